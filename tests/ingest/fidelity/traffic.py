"""The scripted agent of the fidelity page tests: two versions of one agent paste a known document
through the real logging proxy into the lean example server, one paste per verdict (and one call by
reference). ``capture_log`` runs it; the area conftest captures it once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from dashboard.teams.models import Team
from ingest.capture import pipeline
from ingest.capture.models import BulkArgument, IngestJob
from tests.conftest import ROOT
from tests.helpers import sha
from tests.ingest.capture.logs import EnvelopeLog

PY = sys.executable
LABEL = "files-lean"


def _doc() -> str:
    lines = ["# Deploy runbook (café edition)", ""]
    lines += [
        f"step {i}: check part {i}, read the log, fix the cause, then run it again." for i in range(1, 50)
    ]
    return "\n".join(lines) + "\n"


DOC = _doc()
DOC_SHA = sha(DOC)
TRUNCATED = DOC[:1500]
EDIT_AT = DOC.index("step 7:")
EDITED = DOC[:EDIT_AT] + "step seven:" + DOC[EDIT_AT + len("step 7:") :]
UNRELATED = "notes nobody registered, typed from memory\n" * 40

# (client version, [(arguments, _meta)]) in the order the agent sends them.
SCRIPT: list[tuple[str, list[tuple[dict, dict | None]]]] = [
    (
        "2.0.14",
        [
            ({"target": "exact.md", "content": DOC, "expected_sha256": DOC_SHA}, None),  # exact
            ({"target": "nl.md", "content": DOC.rstrip("\n")}, {"sha256": DOC_SHA}),  # newline_only
            ({"target": "ref.md", "path": "exact.md"}, None),  # by_reference
        ],
    ),
    (
        "2.0.15",
        [
            (
                {"target": "crlf.md", "content": DOC.replace("\n", "\r\n")},
                {"sha256": DOC_SHA},
            ),  # line_endings
            ({"target": "cut.md", "content": TRUNCATED}, {"sha256": DOC_SHA}),  # truncated
            ({"target": "edit.md", "content": EDITED, "expected_sha256": DOC_SHA}, None),  # mutated, isError
            ({"target": "other.md", "content": UNRELATED}, None),  # unverifiable
        ],
    ),
]


def _through_proxy(log: Path, root: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY,
        args=["-m", "mcptax.proxy", "--server-label", LABEL, "--log", str(log), "--"]
        + [PY, "-m", "examples.servers.lean", "--transport", "stdio", "--root", str(root)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


async def _drive(log: Path, root: Path) -> list[bool]:
    errors = []
    for version, calls in SCRIPT:
        info = Implementation(name="claude-code", version=version)
        with anyio.fail_after(120):
            async with Client(_through_proxy(log, root), client_info=info) as client:
                await client.list_tools()
                for arguments, meta in calls:
                    result = await client.call_tool("write", arguments, meta=meta)
                    errors.append(result.is_error)
    return errors


def capture_log(directory: Path) -> Path:
    """Run the scripted agent through the real proxy into the lean server; return the envelope log."""
    root = directory / "root"
    root.mkdir()
    log = directory / "capture.jsonl"
    errors = anyio.run(_drive, log, root)
    # The lean server refused exactly the edited copy (expected_sha256 mismatch).
    assert errors == [False, False, False, False, False, True, False]
    return log


PASTES = {
    "exact": DOC,
    "newline_only": DOC.rstrip("\n"),
    "line_endings": DOC.replace("\n", "\r\n"),
    "truncated": TRUNCATED,
    "mutated": EDITED,
    "unverifiable": UNRELATED,
}


def pasted_argument(team: Team, verdict: str) -> BulkArgument:
    """The bulk argument that pasted the content scripted for ``verdict``."""
    return BulkArgument.objects.select_related("call").get(team=team, sha256=sha(PASTES[verdict]))


# -- envelope logs written here (no proxy), for the verdict, reference, rollup and cost tests -------


def doc(n: int = 0, lines: int = 60) -> str:
    return "".join(f"{n:03d}/{i:03d} the paragraph an agent keeps re-typing, ✓\n" for i in range(lines))


def ingest(team: Team, log: EnvelopeLog, tmp_path: Path, name: str = "a.jsonl") -> IngestJob:
    job = pipeline.ingest_path(team, log.write(tmp_path / name))
    assert job.status == "done", job.error
    return job


def only_argument(team: Team, **filters: object) -> BulkArgument:
    return BulkArgument.objects.select_related("call").get(team=team, **filters)


# -- a synthetic envelope log (no proxy): one paste per kind, for the rollup and cost tests ------------


def numbered_doc(n: int = 0) -> str:
    return "".join(f"line {i} of document {n}: some words to paste\n" for i in range(80))


def paste_log(session: str = "s1", client: str = "claude-code") -> EnvelopeLog:
    log = EnvelopeLog(session=session, label="files-lean", client=client).initialize()
    log.call("write", {"target": "a.md", "content": numbered_doc(1)})
    log.call(
        "write", {"target": "b.md", "content": numbered_doc(1)[:-1], "expected_sha256": sha(numbered_doc(1))}
    )
    log.call("write", {"target": "c.md", "content": numbered_doc(1)[:700]})
    log.call("write", {"target": "d.md", "path": "a.md"})
    log.call("search", {"query": "step"})
    log.call(
        "write",
        {
            "target": "e.md",
            "content": numbered_doc(2).replace("document", "doc"),
            "expected_sha256": sha(numbered_doc(2)),
        },
        result={"content": [{"type": "text", "text": "no"}], "isError": True},
    )
    log.call("write", {"target": "f.md", "content": "x" * 200_000})
    log.call("bulk", {"rows": list(range(150)), "notes": {"text": "short"}})
    return log
