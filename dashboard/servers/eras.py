"""Servers that answer in more than one protocol revision.

The SDK client asks in the 2026-07-28 revision first (``server/discover``) and falls back to the
``initialize`` handshake of the 2025 revisions. A server that speaks both may list its tools
differently in each (another key order inside a schema, another description), and a client of the
other era then pays another figure. So a server that answered in the 2026-07-28 revision is asked
again in the handshake era; the team's ``protocol_era`` decides which answer becomes the snapshot
(all figures, budgets and alerts follow it), and each revision's figure is kept on the snapshot
(``Snapshot.eras``), the one asked marked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from dashboard.servers.models import McpServer, Snapshot
from mcptax import tokens
from mcptax.client import FetchResult, PollError
from mcptax.client.target import Listings

MODERN_REVISIONS = ("2026-07-28",)
HANDSHAKE, MODERN = "handshake", "modern"


def fetch_in_eras(
    server: McpServer, fetch: Callable[[str, Listings], FetchResult]
) -> tuple[FetchResult, FetchResult | None]:
    """(the answer the team's figures follow, the other era's answer or None).

    `fetch(mode, listings)` asks the server once in the SDK's ``mode`` (``auto`` or ``legacy``),
    counting prompts and resources as ``listings`` says: only in the answer that is kept (the
    other era's counts would be thrown away). A server that does not speak the modern revision is
    asked once; one that speaks only it keeps that answer whatever the team follows (a failure to
    answer in the other era is no poll failure).
    """
    follows_modern = server.team.protocol_era == MODERN

    def kept(version: str) -> bool:
        return follows_modern or version not in MODERN_REVISIONS

    first = fetch("auto", kept)
    if first.protocol_version not in MODERN_REVISIONS:
        return first, None
    try:
        handshake = fetch("legacy", not follows_modern)
    except PollError:
        if not follows_modern:
            # The modern answer is kept after all: ask again for it with its counts.
            with contextlib.suppress(PollError):
                first = fetch("auto", True)
        return first, None
    if follows_modern:
        return first, handshake
    return handshake, first


def record_eras(snapshot: Snapshot, asked: FetchResult, other: FetchResult | None) -> None:
    """Keep each revision's figure beside the snapshot (counted only where the tools differ)."""
    eras: dict[str, Any] = {}
    if other is not None:
        eras[asked.protocol_version or ""] = _figure(
            snapshot.sha256, snapshot.tool_count, snapshot.fixed_tax_tokens, snapshot.encoding, True
        )
        sha = tokens.snapshot_sha256(other.tools, float_free_json=other.float_free_json)
        known = (snapshot.eras or {}).get(other.protocol_version or "")
        if sha == snapshot.sha256:
            figure = _figure(sha, snapshot.tool_count, snapshot.fixed_tax_tokens, snapshot.encoding, False)
        elif _same_list(known, sha, snapshot.encoding):
            # The same bytes as when this snapshot last counted them: the same figure, not counted again.
            assert known is not None
            figure = _figure(sha, known["tool_count"], known["fixed_tax_tokens"], snapshot.encoding, False)
        else:
            report = tokens.account(other.tools, other.instructions, encoding=snapshot.encoding)
            figure = _figure(sha, report.tool_count, report.fixed_tax_tokens, snapshot.encoding, False)
        eras[other.protocol_version or ""] = figure
    if eras != (snapshot.eras or {}):
        Snapshot.objects.filter(pk=snapshot.pk).update(eras=eras)
        snapshot.eras = eras


def _same_list(known: Any, sha: str, encoding: str) -> bool:
    """A figure kept for a list of exactly these bytes (its sha256), counted in this encoding."""
    return (
        isinstance(known, dict)
        and known.get("sha256") == sha
        and known.get("encoding") == encoding
        and isinstance(known.get("tool_count"), int)
        and isinstance(known.get("fixed_tax_tokens"), int)
    )


def _figure(sha: str, tool_count: int, fixed_tax: int, encoding: str, asked: bool) -> dict[str, Any]:
    return {
        "sha256": sha,
        "tool_count": tool_count,
        "fixed_tax_tokens": fixed_tax,
        "encoding": encoding,
        "asked": asked,
    }
