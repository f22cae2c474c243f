"""Builders and checks the capture tests share: envelope logs written the way our proxy writes them,
and line counts and hashes computed here from the definitions, never by the pipeline."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ingest.capture.models import IngestJob
from ingest.capture.signals import calls_ingested
from tests.conftest import ROOT
from tests.helpers import assert_job_reconciles

LOGS = ROOT / "tests" / "data" / "logs"
API = "/api/v1/ingest"


class EnvelopeLog:
    """Writes envelope JSONL the way our proxy does, one session at a time."""

    def __init__(self, session: str = "s1", label: str = "files", client: str = "claude-code") -> None:
        self.session, self.label, self.client = session, label, client
        self.lines: list[bytes] = []
        self.seq = 0
        self.next_id = 1

    def frame(self, direction: str, raw: object, **extra: object) -> EnvelopeLog:
        self.seq += 1
        record = {
            "session_id": self.session,
            "server_label": self.label,
            "seq": self.seq,
            "ts": f"2026-01-05T10:{self.seq // 60 % 60:02d}:{self.seq % 60:02d}.000000Z",
            "direction": direction,
            "transport": "stdio",
            "raw": raw,
            **extra,
        }
        try:
            line = json.dumps(record, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate can only be written as a \ud800 escape
            line = json.dumps(record).encode()
        self.lines.append(line + b"\n")
        return self

    def initialize(self, version: str = "2.0.14") -> EnvelopeLog:
        init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": self.client, "version": version}}
        self.frame("c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.frame(
            "s2c", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "x", "version": "1"}}}
        )
        self.frame("c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def call(
        self, tool: str, arguments: dict, *, result: dict | None = None, meta: dict | None = None
    ) -> EnvelopeLog:
        call_id = self.next_id
        self.next_id += 1
        params: dict = {"name": tool, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        self.frame("c2s", {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params})
        answer = result if result is not None else {"content": [{"type": "text", "text": "ok"}]}
        self.frame("s2c", {"jsonrpc": "2.0", "id": call_id, "result": answer})
        return self

    def write(self, path: Path) -> Path:
        path.write_bytes(b"".join(self.lines))
        return path


def text_of(size: int, seed: int = 0) -> str:
    line = f"{seed:04d} héllo wörld — ✓ the quick brown fox\n"
    return (line * (size // len(line.encode()) + 1))[: size // 2] + "end"


def assert_reconciles(job: IngestJob, lines: int) -> None:
    """Every one of ``lines`` input lines counted exactly once, and the job says so itself."""
    assert_job_reconciles(job, lines)
    assert job.reconciles


def count_lines(data: bytes) -> int:
    """Lines as the ingest reads them: split at \\n only, a final unterminated line counts."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def line_count(path: Path) -> int:
    return count_lines(path.read_bytes())


def content_sha(i: int, *, session: str = "s-1", seed: str = "x", size: int = 2000) -> str:
    body = (f"{seed}:{session}:{i}:" * (size // 8 + 1))[:size]
    return hashlib.sha256(body.encode()).hexdigest()


def bearer(plaintext: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def stored_names(prefix: str = "ingest") -> list[str]:
    """Every file in the ingest storage under ``prefix`` (a local folder or an S3 bucket)."""
    from ingest.capture.storage import ingest_storage

    found: list[str] = []
    try:
        folders, files = ingest_storage().listdir(prefix)
    except FileNotFoundError:  # a local folder not made yet
        return []
    found += [f"{prefix}/{name}" for name in files]
    for folder in folders:
        found += stored_names(f"{prefix}/{folder}")
    return sorted(found)


def stored_bytes(name: str) -> bytes:
    from ingest.capture.storage import open_stored

    kept, _ = open_stored(name)
    with kept:
        return kept.read()


def spooled_files(settings) -> list[str]:
    """Every upload kept, in the ingest storage or on its way there (a refused upload must leave none)."""
    from ingest.capture.storage import spool_dir

    return sorted(str(p) for p in spool_dir().iterdir()) + stored_names()


@contextmanager
def receiving(receiver: Callable[..., Any]) -> Iterator[None]:
    """``receiver`` connected to ``calls_ingested`` for the duration of the block."""
    calls_ingested.connect(receiver)
    try:
        yield
    finally:
        calls_ingested.disconnect(receiver)
