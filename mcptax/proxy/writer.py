"""Envelope records (docs/definitions.md) and the off-path writer that serialises them.

The relay threads only call `EnvelopeWriter.record`, which stamps seq/ts under a
lock and appends to an in-memory queue; parsing, hash-only redaction and all I/O
happen on the writer thread so logging can never delay or reorder traffic.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

# docs/definitions.md's bulk rule and figures are defined once, in mcptax.bulk.
from mcptax.bulk import BULK_STRING_MIN_BYTES as BULK_MIN_BYTES
from mcptax.bulk import CONTENT_KEYS, text_figures

PROXY_VERSION = "0.1.0"
PROXY_NAME = "mcp-tax-proxy"

DEFAULT_QUEUE_BYTES = 256 * 1024 * 1024


def warn(message: str) -> None:
    """One write per message so a warning is not interleaved mid-line with relayed child stderr."""
    with contextlib.suppress(OSError):
        os.write(2, f"{PROXY_NAME}: {message}\n".encode("utf-8", "replace"))


def rfc3339_now() -> str:
    """RFC 3339 UTC timestamp with microseconds, e.g. 2026-01-02T03:04:05.123456Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_session_id() -> str:
    return str(uuid.uuid4())


# ---------------------------------------------------------------- digests


def digest_string(text: str) -> dict[str, Any]:
    """The `{"$digest": {...}}` stand-in a hash-only log writes instead of a bulk string."""
    figures = text_figures(text)
    return {
        "$digest": {
            "sha256": figures.sha256,
            "bytes": figures.bytes,
            "lines": figures.lines,
            "tokens": figures.tokens,
        }
    }


def is_bulk_string(value: str, parent_key: str | None) -> bool:
    if parent_key is not None and parent_key.lower() in CONTENT_KEYS:
        return True
    # Cheap bound first: a str of n code points is at least n UTF-8 bytes.
    if len(value) >= BULK_MIN_BYTES:
        return True
    return len(value.encode("utf-8", "surrogatepass")) >= BULK_MIN_BYTES


def redact_bulk(value: Any, parent_key: str | None = None) -> tuple[Any, bool]:
    """Copy of `value` with every bulk string replaced by its digest; second item says if any was."""
    if isinstance(value, str):
        if is_bulk_string(value, parent_key):
            return digest_string(value), True
        return value, False
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            out[key], hit = redact_bulk(item, key)
            changed |= hit
        return out, changed
    if isinstance(value, list):
        changed = False
        items: list[Any] = []
        for item in value:
            # A list's elements inherit the key that owns the list ("data": ["...", ...]).
            new_item, hit = redact_bulk(item, parent_key)
            items.append(new_item)
            changed |= hit
        return items, changed
    return value, False


# ---------------------------------------------------------------- frames


@dataclass
class Frame:
    """One observed frame, as handed from a relay to the writer (not yet parsed)."""

    session_id: str
    seq: int
    ts: str
    direction: str
    payload: bytes | None = None
    text: str | None = None
    meta: dict[str, Any] | None = None
    conn_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def size(self) -> int:
        return len(self.payload or b"") + len(self.text or "") + 256


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_payload(payload: bytes) -> tuple[str, Any] | None:
    """(json text, value) when the frame is strict UTF-8 JSON, else None."""
    try:
        text = payload.decode("utf-8")
        value = json.loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return text, value


def render_envelope(frame: Frame, server_label: str, transport: str, hash_only: bool) -> bytes:
    """Serialise a frame as one envelope JSONL line (with the trailing newline)."""
    head: dict[str, Any] = {
        "session_id": frame.session_id,
        "server_label": server_label,
        "seq": frame.seq,
        "ts": frame.ts,
        "direction": frame.direction,
        "transport": transport,
    }
    if frame.conn_id is not None:
        head["conn_id"] = frame.conn_id
    tail: dict[str, Any] = {}
    raw_text = "null"
    if frame.meta is not None:
        raw_text = json.dumps(frame.meta, ensure_ascii=False, separators=(",", ":"))
    elif frame.payload is not None:
        parsed = _parse_payload(frame.payload)
        if parsed is None:
            tail["text"] = frame.payload.decode("utf-8", "replace").rstrip("\r")
            tail["status"] = "invalid_json"
        else:
            text, value = parsed
            if isinstance(value, list):
                tail["batch"] = True
            redacted = False
            if hash_only:
                value, redacted = redact_bulk(value)
            if redacted:
                raw_text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            else:
                # Embed the message verbatim: cheap for multi-MB frames, and it keeps the
                # sender's escapes and number spellings. Strict json.loads has proven that any
                # CR/LF here is whitespace between tokens (never inside a string), so dropping
                # it keeps the envelope on one line without changing the message.
                raw_text = text.strip(" \t\r\n")
                if "\n" in raw_text or "\r" in raw_text:
                    raw_text = raw_text.replace("\r", "").replace("\n", "")
            if redacted:
                tail["redacted"] = True
    if frame.text is not None:
        tail["text"] = frame.text
    if hash_only and isinstance(tail.get("text"), str) and is_bulk_string(tail["text"], None):
        tail["text"] = digest_string(tail["text"])
        tail["redacted"] = True
    tail.update(frame.extra)
    line = json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + ',"raw":' + raw_text
    if tail:
        line += "," + json.dumps(tail, ensure_ascii=False, separators=(",", ":"))[1:]
    else:
        line += "}"
    # A lone surrogate can only sit inside a JSON string, where its \uXXXX escape is valid JSON.
    return line.encode("utf-8", "backslashreplace") + b"\n"


# ---------------------------------------------------------------- sinks


class Sink(Protocol):
    def write_lines(self, lines: list[bytes]) -> None: ...

    def close(self) -> None: ...


# The log holds every argument in full (file contents, tokens pasted into tool calls): only its
# owner may read it.
LOG_FILE_MODE = 0o600


def open_private_append(path: str) -> Any:
    """Open `path` for appending; a new file is created owner-only (0600) in the same system call,
    so there is no moment at which another user could open it. An existing file keeps its mode."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), LOG_FILE_MODE)
    return os.fdopen(fd, "ab")


class FileSink:
    """Appends envelope lines to a file; the first failure is reported once and disables it."""

    def __init__(self, path: str, report: Callable[[str], None] = warn) -> None:
        self.path = path
        self._report = report
        self._file: Any = None
        self._failed = False

    @property
    def failed(self) -> bool:
        return self._failed

    def write_lines(self, lines: list[bytes]) -> None:
        if self._failed:
            return
        try:
            if self._file is None:
                self._file = open_private_append(self.path)
                if os.fstat(self._file.fileno()).st_mode & 0o077:
                    self._report(
                        f"log {self.path!r} is readable by other users and holds full tool arguments; "
                        f"consider `chmod 600 {self.path}`"
                    )
            self._file.write(b"".join(lines))
            # Flushed per batch so the log can be tailed or ingested while the session runs.
            self._file.flush()
        except OSError as exc:
            self._failed = True
            self._report(
                f"cannot write log {self.path!r} ({exc.strerror or exc}); "
                "traffic is still relayed, but this log is off for the rest of the session"
            )
            self._discard()

    def _discard(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._file.close()
        except OSError as exc:
            if not self._failed:
                self._failed = True
                self._report(f"cannot write log {self.path!r} ({exc.strerror or exc})")
        self._file = None


# ---------------------------------------------------------------- writer


class EnvelopeWriter:
    """Stamps frames with seq/ts on the caller's thread and renders/writes them on its own.

    `record` never blocks on I/O. Memory is bounded by `max_queue_bytes`; frames that do
    not fit are not logged (their seq is still consumed, so the gap is visible in the log)
    and the loss is reported on stderr.
    """

    def __init__(
        self,
        server_label: str,
        transport: str,
        sinks: Iterable[Sink],
        *,
        hash_only: bool = False,
        max_queue_bytes: int = DEFAULT_QUEUE_BYTES,
        report: Callable[[str], None] = warn,
    ) -> None:
        self.server_label = server_label
        self.transport = transport
        self.hash_only = hash_only
        self._sinks = list(sinks)
        self._max_queue_bytes = max_queue_bytes
        self._report = report
        self._lock = threading.Condition()
        self._queue: deque[Frame] = deque()
        self._queued_bytes = 0
        self._seq: dict[str, int] = {}
        self._dropped = 0
        self._dropped_reported = 0
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="envelope-writer", daemon=True)
        self._thread.start()

    def record(
        self,
        session_id: str,
        direction: str,
        payload: bytes | None = None,
        *,
        text: str | None = None,
        meta: dict[str, Any] | None = None,
        conn_id: str | None = None,
        ts: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Queue one frame for logging; cheap and non-blocking (safe from any thread)."""
        with self._lock:
            seq = self._seq.get(session_id, 0) + 1
            self._seq[session_id] = seq
            frame = Frame(
                session_id=session_id,
                seq=seq,
                ts=ts or rfc3339_now(),
                direction=direction,
                payload=payload,
                text=text,
                meta=meta,
                conn_id=conn_id,
                extra=extra or {},
            )
            size = frame.size()
            if self._closing or self._queued_bytes + size > self._max_queue_bytes:
                self._dropped += 1
                self._lock.notify()
                return
            self._queue.append(frame)
            self._queued_bytes += size
            self._lock.notify()

    @property
    def dropped(self) -> int:
        with self._lock:
            return self._dropped

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closing and self._dropped == self._dropped_reported:
                    self._lock.wait()
                frames = list(self._queue)
                self._queue.clear()
                self._queued_bytes = 0
                newly_dropped = self._dropped - self._dropped_reported
                self._dropped_reported = self._dropped
                done = self._closing and not frames
            if newly_dropped:
                self._report(
                    f"log queue full: {newly_dropped} frame(s) were relayed but NOT logged "
                    "(see gaps in seq); the log sink is too slow"
                )
            if frames:
                lines = []
                for frame in frames:
                    try:
                        lines.append(
                            render_envelope(frame, self.server_label, self.transport, self.hash_only)
                        )
                    except Exception as exc:  # a logging bug must never take the relay down
                        self._report(f"could not log frame seq={frame.seq}: {exc!r}")
                for sink in self._sinks:
                    try:
                        sink.write_lines(lines)
                    except Exception as exc:
                        self._report(f"log sink {type(sink).__name__} failed: {exc!r}")
            if done:
                return

    def close(self, timeout: float = 30.0) -> None:
        """Drain what is queued, then close the sinks (push sinks flush with their own deadline)."""
        with self._lock:
            self._closing = True
            self._lock.notify()
        self._thread.join(timeout)
        for sink in self._sinks:
            try:
                sink.close()
            except Exception as exc:
                self._report(f"log sink {type(sink).__name__} failed on close: {exc!r}")
