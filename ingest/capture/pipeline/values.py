"""Values a database column accepts, made from what a log says (text, JSON, timestamps, hashes)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mcptax.formats.records import canonical, load_json

if TYPE_CHECKING:
    from ingest.capture.models import TeamCaptureSettings
    from mcptax.bulk import BulkArg

_SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")


def fit(value: str | None, limit: int | None, name: str, notes: list[str]) -> str:
    """A string a database column accepts: no NUL, no lone surrogate, not over ``limit``."""
    if not value:
        return ""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
        notes.append(f"nul_replaced:{name}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        notes.append(f"surrogate_replaced:{name}")
    if limit is not None and len(value) > limit:
        value = value[:limit]
        notes.append(f"shortened:{name}")
    return value


def db_safe_json(value: Any, notes: list[str], name: str) -> Any:
    # JSON columns refuse the same characters as text columns (PostgreSQL jsonb: \u0000).
    if isinstance(value, str):
        return fit(value, None, name, notes)
    if isinstance(value, list):
        return [db_safe_json(v, notes, name) for v in value]
    if isinstance(value, dict):
        return {fit(str(k), None, name, notes): db_safe_json(v, notes, name) for k, v in value.items()}
    return value


def text_is_db_safe(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_ts(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _valid_sha(value: Any) -> str:
    return value.lower() if isinstance(value, str) and _SHA256_RE.match(value) else ""


def server_reported_sha256(result: dict[str, Any] | None) -> str:
    """What the server says it processed: ``structuredContent.sha256``, else the ``sha256`` of a
    JSON object in a text content item; "" when it says nothing."""
    if not isinstance(result, dict):
        return ""
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and _valid_sha(structured.get("sha256")):
        return _valid_sha(structured["sha256"])
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    for item in content:
        if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
            continue
        text = item["text"].strip()
        if not text.startswith("{") or len(text) > 1024 * 1024:
            continue
        value, problem = load_json(text)
        if problem is None and isinstance(value, dict) and _valid_sha(value.get("sha256")):
            return _valid_sha(value["sha256"])
    return ""


def jsonrpc_id_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else canonical(value)


def stored_arguments(
    capture: TeamCaptureSettings, bulk: list[BulkArg], notes: list[str]
) -> tuple[list[BulkArg], list[str], list[bool]]:
    """The arguments to store (one per pointer), their column-safe pointers and whether each
    one's content is kept; what had to change is noted on the call."""
    keep = capture.keep_bulk_content
    max_bytes = capture.max_content_bytes
    kept: list[bool] = []
    for arg in bulk:
        ok = bool(keep and arg.content is not None and arg.sha256 and (arg.bytes or 0) <= max_bytes)
        if ok and not text_is_db_safe(arg.content or ""):
            # The figures and hash are over the exact text; a stand-in copy would mislead.
            notes.append(f"content_not_kept:{arg.pointer[:200]}:unstorable_characters")
            ok = False
        kept.append(ok)
    stored: list[BulkArg] = []
    pointers: list[str] = []
    stored_kept: list[bool] = []
    for arg, ok in zip(bulk, kept, strict=True):
        pointer = arg.pointer
        if len(pointer) > 500:
            pointer = pointer[:500]
            notes.append("shortened:pointer")
        pointer = fit(pointer, 500, "pointer", notes)
        if pointer in pointers:
            continue  # two pointers the same once shortened: the first one is kept
        stored.append(arg)
        pointers.append(pointer)
        stored_kept.append(ok)
    return stored, pointers, stored_kept
