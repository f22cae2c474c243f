"""Demo capture data: real MCP traffic, really captured and ingested.

Three agents (different ``clientInfo``) drive the official SDK client through the logging proxy
(``python -m mcptax.proxy``, stdio) to the lean and the sprawling example servers and paste
documents as tool arguments: exact copies, a dropped final newline, CRLF turned into LF, a
truncated copy, an edited one, an ``expected_sha256`` the paste does not match (the lean server
refuses it with ``isError``), and reference calls by ``path``. The proxy's log is then ingested
into the team like any other log, so the ingest and fidelity pages have something true to show.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
from django.conf import settings

from dashboard.teams.models import Team
from ingest.capture.models import IngestJob
from ingest.capture.pipeline import ingest_path
from ingest.fidelity.references import register_upload

if TYPE_CHECKING:  # the MCP SDK is imported when the demo runs, not with the app
    from mcp import StdioServerParameters
    from mcp_types import Implementation

logger = logging.getLogger(__name__)

DEMO_LOG_NAME = "demo-proxy-capture.jsonl"
# Server labels match the demo's registered servers (dashboard.demo), so calls link to them.
LEAN, SPRAWL = "files-lean", "files-sprawl"
MODULES = {LEAN: "examples.servers.lean", SPRAWL: "examples.servers.sprawling"}


def _skill_doc() -> str:
    sections = []
    for i in range(1, 41):
        sections.append(
            f"## Step {i}\n\nRun the check for part {i}; if it fails, read the log, fix the cause and run it "
            f"again. Never skip step {i} — the release notes (café, naïve, ✓) depend on it.\n"
        )
    return "# Release skill\n\n" + "\n".join(sections)


def _csv() -> str:
    rows = ["id,name,qty"] + [f"{i},item-{i},{i * 3}" for i in range(1, 400)]
    return "\r\n".join(rows) + "\r\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Paste:
    tool: str
    arguments: dict[str, Any]
    meta: dict[str, str] | None = None


# Capture rounds, days ago; the demo back-dates each round's frames so the history charts have a
# shape. From the third round on, Claude Code is a newer version that no longer damages pastes.
ROUNDS = (20, 13, 6, 0)


def _scripts(doc: str, csv: str, round_no: int = 0) -> list[tuple[Implementation, str, list[Paste]]]:
    doc_sha, csv_sha = sha256(doc), sha256(csv)
    cut = doc[: len(doc) * 3 // 5]
    edited = doc.replace("Step 17", "Step seventeen", 1)
    improved = round_no >= 2
    from mcp_types import Implementation

    claude = Implementation(name="claude-code", version="2.0.15" if improved else "2.0.14")
    codex = Implementation(name="codex-mcp-client", title="Codex", version="0.46.0")
    gemini = Implementation(name="gemini-cli-mcp-client", version="0.9.0")
    return [
        (
            claude,
            LEAN,
            [
                Paste("write", {"target": "skill.md", "content": doc, "expected_sha256": doc_sha}),  # exact
                Paste(
                    "write",
                    {"target": "skill-2.md", "content": doc if improved else doc.rstrip("\n")},
                    {"sha256": doc_sha},
                ),
                Paste("write", {"target": "skill-3.md", "path": "skill.md"}),  # by reference
                Paste(
                    "write",
                    {
                        "target": "skill-4.md",
                        "content": doc if improved else edited,
                        "expected_sha256": doc_sha,
                    },
                ),  # refused unless improved
            ],
        ),
        (
            codex,
            SPRAWL,
            [
                Paste("write_file", {"path": "notes.md", "content": doc}, {"sha256": doc_sha}),  # exact
                Paste("write_file", {"path": "notes-2.md", "content": cut}, {"sha256": doc_sha}),  # truncated
                Paste("write_file", {"path": "notes-3.md", "content": edited}, {"sha256": doc_sha}),  # edited
                Paste("write_file", {"path": "notes-4.md", "content": doc + "\n"}),  # no expectation given
            ],
        ),
        (
            gemini,
            LEAN,
            [
                Paste("write", {"target": "stock.csv", "content": csv, "expected_sha256": csv_sha}),  # exact
                Paste(
                    "write",
                    {"target": "stock-lf.csv", "content": csv.replace("\r\n", "\n")},
                    {"sha256": csv_sha},
                ),
                Paste("write", {"target": "stock-copy.csv", "path": "stock.csv"}),  # by reference
                Paste("write", {"target": "stock-2.csv", "content": csv[:-40], "expected_sha256": csv_sha}),
            ],
        ),
    ]


def _through_proxy(label: str, log: Path, root: Path) -> StdioServerParameters:
    server = [sys.executable, "-m", MODULES[label], "--transport", "stdio", "--root", str(root)]
    proxy = [sys.executable, "-m", "mcptax.proxy", "--server-label", label, "--log", str(log), "--"]
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=proxy[0],
        args=[*proxy[1:], *server],
        env={"PYTHONPATH": str(settings.BASE_DIR)},
        cwd=str(settings.BASE_DIR),
    )


async def _drive(log: Path, root: Path, doc: str, csv: str, round_no: int = 0) -> int:
    from mcp import Client
    from mcp_types import RequestParamsMeta

    made = 0
    for client_info, label, pastes in _scripts(doc, csv, round_no):
        with anyio.fail_after(120):
            async with Client(_through_proxy(label, log, root), client_info=client_info) as client:
                await client.list_tools()
                for paste in pastes:
                    # isError results are part of the story (refused pastes), not failures here.
                    # `_meta` is an open map (extra_items=Any), which mypy cannot check a dict against yet.
                    meta = cast(RequestParamsMeta, paste.meta) if paste.meta else None
                    await client.call_tool(paste.tool, paste.arguments, meta=meta)
                    made += 1
    return made


def capture_demo_log(directory: Path) -> Path:
    """Run the scripted agents through the proxy and return the envelope log they produced."""
    if directory.exists():
        shutil.rmtree(directory)
    root = directory / "root"
    root.mkdir(parents=True)
    log = directory / DEMO_LOG_NAME
    doc, csv = _skill_doc(), _csv()
    with log.open("w", encoding="utf-8") as out:
        for round_no, days_ago in enumerate(ROUNDS):
            part = directory / f"round-{round_no}.jsonl"
            # Reference calls copy from files the earlier pastes wrote; the exact pastes come first.
            anyio.run(_drive, part, root, doc, csv, round_no)
            out.writelines(_backdated(part, timedelta(days=days_ago)))
    return log


def _backdated(path: Path, delta: timedelta) -> Iterator[str]:
    """The captured envelopes with their timestamps moved `delta` into the past (nothing else changes)."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            envelope = json.loads(line)
            if delta and isinstance(envelope.get("ts"), str):
                ts = datetime.fromisoformat(envelope["ts"].replace("Z", "+00:00")) - delta
                envelope["ts"] = ts.isoformat().replace("+00:00", "Z")
            yield json.dumps(envelope, ensure_ascii=False) + "\n"


def build_capture_demo(team: Team) -> IngestJob | None:
    """Capture and ingest the demo traffic once per team; None when it is already there."""
    if IngestJob.objects.filter(team=team, filename=DEMO_LOG_NAME, status=IngestJob.Status.DONE).exists():
        return None
    log = capture_demo_log(Path(settings.VAR_DIR) / "demo-capture")
    # The documents the agents were asked to paste, so pastes without a stated hash are judged too.
    register_upload(team, _skill_doc().encode(), name="release-skill.md", rejudge=False)
    register_upload(team, _csv().encode(), name="stock.csv", rejudge=False)
    job = ingest_path(team, log, source=IngestJob.Source.COMMAND)
    if job.status != IngestJob.Status.DONE:
        logger.warning("demo capture ingest ended %s: %s", job.status, job.error)
    return job
