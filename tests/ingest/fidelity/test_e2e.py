"""End to end (issue 7, "Done when" #1): a real SDK client pastes known content through the logging
proxy into the lean example server and into a small array-taking server, the log is ingested, and
every bulk argument gets exactly the expected verdict and evidence against a registered reference
file. Registering the document only after the ingest recomputes the verdicts and the rollups.

Run: VAR_DIR=/tmp/x-var .venv/bin/pytest tests/ingest/fidelity/test_e2e.py -q
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest
from django.db.models import Sum
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from dashboard.alerts.models import Alert, Budget, Level, Measure
from ingest.capture import pipeline
from ingest.capture.models import BulkArgument, IngestJob, ToolCall
from ingest.fidelity import references
from ingest.fidelity.models import JUDGED, FidelityDaily
from ingest.fidelity.selectors import totals as rollup_totals
from mcptax import textdiff, verdict_rules
from tests.conftest import ROOT
from tests.helpers import compact, sha
from tests.ingest.fidelity.agent_table import agent_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PY = sys.executable
CLIENT = Implementation(name="claude-code", version="2.0.14")


def reference_text() -> str:
    """About 4 KB of LF text with a final newline and a few multi-byte characters."""
    lines = ["# Release checklist (café edition)", ""]
    for i in range(1, 61):
        lines.append(f"step {i}: run the check for part {i}, read the log, fix the cause, run it again.")
    return "\n".join(lines) + "\n"


DOC = reference_text()
DOC_SHA = sha(DOC)
TRUNCATED = DOC[:1500]
EDIT_AT = DOC.index("step 30:")
EDITED = DOC[:EDIT_AT] + "step thirty:" + DOC[EDIT_AT + len("step 30:") :]
REFUSED_EDIT_AT = DOC.index("step 7:")
REFUSED = DOC[:REFUSED_EDIT_AT] + "step seven:" + DOC[REFUSED_EDIT_AT + len("step 7:") :]
UNKNOWN = "a checklist nobody registered or pasted\n" * 40
SENT_INSTEAD = "something else entirely, typed from memory\n" * 40
SERIES = list(range(1000, 1150))
SERIES_SHA = sha(compact(SERIES))
SERIES_DROPPED = [v for v in SERIES if v % 10 != 7]

# target (lean write) or series name -> the verdict the paste must get
# ingest/demo.py's scripted pastes, judged with its two documents registered: nothing unverifiable.
# Per round: the first two rounds as below; in the later ones Claude Code's two damaged pastes
# (a dropped newline, an edit) arrive exact.
DEMO_ROUND = {
    "exact": 3,
    "newline_only": 2,
    "line_endings": 1,
    "truncated": 2,
    "mutated": 2,
    "by_reference": 2,
}
DEMO_IMPROVED_ROUND = {**DEMO_ROUND, "exact": 5, "newline_only": 1, "mutated": 1}
DEMO_VERDICTS = {k: 2 * DEMO_ROUND[k] + 2 * DEMO_IMPROVED_ROUND[k] for k in DEMO_ROUND}
EXPECTED = {
    "skill.md": verdict_rules.EXACT,  # no stated hash: found by the document's exact sha256
    "stated.md": verdict_rules.EXACT,  # expected_sha256 stated by the caller
    "no-newline.md": verdict_rules.NEWLINE_ONLY,
    "crlf.md": verdict_rules.LINE_ENDINGS,
    "cut.md": verdict_rules.TRUNCATED,
    "edited.md": verdict_rules.MUTATED,
    "refused.md": verdict_rules.MUTATED,  # the server refused it (isError) through expected_sha256
    "unknown.md": verdict_rules.MISMATCH,  # refused too; the expected content is known nowhere
    "full": verdict_rules.EXACT,
    "dropped": verdict_rules.ELEMENTS_DROPPED,
}


def through_proxy(log: Path, label: str, server: list[str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY,
        args=["-m", "mcptax.proxy", "--server-label", label, "--log", str(log), "--", PY, *server],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


async def drive(log: Path, root: Path) -> dict[str, dict]:
    results: dict[str, dict] = {}
    lean = through_proxy(
        log, "files-lean", ["-m", "examples.servers.lean", "--transport", "stdio", "--root", str(root)]
    )
    writes = [
        {"target": "skill.md", "content": DOC},
        {"target": "stated.md", "content": DOC, "expected_sha256": DOC_SHA},
        {"target": "no-newline.md", "content": DOC[:-1]},
        {"target": "crlf.md", "content": DOC.replace("\n", "\r\n")},
        {"target": "cut.md", "content": TRUNCATED},
        {"target": "edited.md", "content": EDITED},
        {"target": "ref.md", "path": "skill.md"},
        {"target": "refused.md", "content": REFUSED, "expected_sha256": DOC_SHA},
        {"target": "unknown.md", "content": SENT_INSTEAD, "expected_sha256": sha(UNKNOWN)},
    ]
    with anyio.fail_after(120):
        async with Client(lean, client_info=CLIENT) as client:
            await client.list_tools()
            for arguments in writes:
                result = await client.call_tool("write", arguments)
                results[arguments["target"]] = {
                    "is_error": result.is_error,
                    "structured": result.structured_content,
                }
    series = through_proxy(log, "series", [str(ROOT / "tests" / "servers" / "series_server.py")])
    with anyio.fail_after(120):
        async with Client(series, client_info=CLIENT) as client:
            await client.list_tools()
            for name, values in (("full", SERIES), ("dropped", SERIES_DROPPED)):
                result = await client.call_tool(
                    "load_series", {"name": name, "values": values}, meta={"expected_sha256": SERIES_SHA}
                )
                results[name] = {"is_error": result.is_error, "structured": result.structured_content}
    return results


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """The proxy's log of the scripted session (made once, ingested by each test into its own team)."""
    directory = tmp_path_factory.mktemp("fidelity-e2e")
    root = directory / "root"
    root.mkdir()
    log = directory / "capture.jsonl"
    results = anyio.run(drive, log, root)
    # The servers saw what we meant them to see: the refusals are the servers' own.
    assert results["refused.md"]["is_error"] and results["unknown.md"]["is_error"]
    assert not any(r["is_error"] for k, r in results.items() if k not in ("refused.md", "unknown.md"))
    assert results["dropped"]["structured"]["count"] == len(SERIES_DROPPED)
    assert (root / "ref.md").read_text() == DOC
    return log, results


TARGETS_BY_SHA = {
    sha(DOC): None,  # two targets carry the exact document; told apart by the stated hash
    sha(DOC[:-1]): "no-newline.md",
    sha(DOC.replace("\n", "\r\n")): "crlf.md",
    sha(TRUNCATED): "cut.md",
    sha(EDITED): "edited.md",
    sha(REFUSED): "refused.md",
    sha(SENT_INSTEAD): "unknown.md",
}


def verdicts_by_target(team) -> dict[str, BulkArgument]:
    found: dict[str, BulkArgument] = {}
    for argument in BulkArgument.objects.filter(team=team).select_related("call"):
        if argument.call.tool == "load_series":
            key = "full" if argument.elements == len(SERIES) else "dropped"
        elif argument.sha256 == DOC_SHA:
            key = "stated.md" if argument.expected_source == "caller" else "skill.md"
        else:
            key = TARGETS_BY_SHA[argument.sha256]
        assert key not in found, key
        found[key] = argument
    return found


def ingest(team, log: Path) -> IngestJob:
    job = pipeline.ingest_path(team, log)
    assert job.status == IngestJob.Status.DONE, job.error
    return job


def assert_expected_verdicts(team, job: IngestJob) -> None:
    arguments = verdicts_by_target(team)
    assert {k: a.verdict for k, a in arguments.items()} == EXPECTED

    # Evidence, per kind of damage.
    doc_bytes = len(DOC.encode())
    exact = arguments["skill.md"]
    assert exact.expected_source == "reference_document" and exact.expected_sha256 == DOC_SHA
    assert exact.evidence["matched_by"] and "sha256" in exact.evidence["matched_by"]
    assert exact.evidence["document"]["name"] == "checklist.md"
    stated = arguments["stated.md"]
    assert stated.expected_source == "caller" and stated.evidence["expected_sha256"] == DOC_SHA

    newline = arguments["no-newline.md"].evidence
    assert newline["expected_bytes"] == doc_bytes and newline["arrived_bytes"] == doc_bytes - 1
    assert newline["first_diff_offset"] == doc_bytes - 1
    assert newline["expected_source"] == "reference_document"
    context = textdiff.diff_context(DOC[:-1], DOC, newline["first_diff_offset"])
    assert context["arrived"]["at_end"] and context["expected"]["after"] == "↵\n"

    crlf = arguments["crlf.md"].evidence
    assert crlf["first_diff_offset"] == DOC.index("\n") + len("é".encode()) - 1

    cut = arguments["cut.md"].evidence
    assert cut["kept_bytes"] == len(TRUNCATED.encode()) and cut["expected_bytes"] == doc_bytes
    assert cut["expected_source"] == "reference_document" and "head" in cut["matched_by"]

    edited = arguments["edited.md"].evidence
    assert edited["first_diff_offset"] == len(DOC[: EDIT_AT + len("step ")].encode())
    assert 0.95 < edited["similarity"] < 1.0
    assert edited["document"]["name"] == "checklist.md"

    refused = arguments["refused.md"].evidence
    assert refused["server_is_error"] is True and refused["expected_source"] == "caller"
    assert refused["expected_content"] == "reference_document"
    assert refused["first_diff_offset"] == len(DOC[: REFUSED_EDIT_AT + len("step ")].encode())
    # The server reported the hash of what it received: it agrees with the capture.
    assert refused["server_sha256"] == sha(REFUSED) and refused["server_sha256_agrees"] is True

    unknown = arguments["unknown.md"].evidence
    assert unknown["server_is_error"] is True and unknown["expected_sha256"] == sha(UNKNOWN)
    assert unknown["expected_content"] is None and unknown["first_diff_offset"] is None

    dropped = arguments["dropped"].evidence
    assert dropped["expected_elements"] == len(SERIES) and dropped["arrived_elements"] == len(SERIES_DROPPED)
    assert dropped["expected_source"] == "meta" and dropped["expected_content"] == "captured_copy"
    assert dropped["first_diff_element"] == 7
    assert (
        dropped["server_sha256"] == sha(compact(SERIES_DROPPED)) and dropped["server_sha256_agrees"] is True
    )
    assert arguments["full"].evidence["server_sha256_agrees"] is True
    assert all(
        a.evidence["server_is_error"] is False
        for k, a in arguments.items()
        if k not in ("refused.md", "unknown.md")
    )

    reference_calls = ToolCall.objects.filter(team=team, is_reference_call=True)
    assert [(c.tool, c.reference_key, c.reference_value) for c in reference_calls] == [
        ("write", "path", "skill.md")
    ]
    job.refresh_from_db()
    assert job.verdict_counts == {**Counter(EXPECTED.values()), "by_reference": 1}


def rollup_counts(team) -> dict[str, int]:
    rows = FidelityDaily.objects.filter(team=team).values("verdict").annotate(n=Sum("arguments"))
    return {r["verdict"]: r["n"] for r in rows if r["n"]}


def assert_rollups(team) -> None:
    expected = dict(Counter(EXPECTED.values()))
    assert rollup_counts(team) == expected
    by_tool = {
        (r["server_label"], r["tool"]): r["calls"]
        for r in FidelityDaily.objects.filter(team=team)
        .values("server_label", "tool")
        .annotate(calls=Sum("calls"))
    }
    assert by_tool == {("files-lean", "write"): 9, ("series", "load_series"): 2}
    totals = FidelityDaily.objects.filter(team=team).aggregate(
        errors=Sum("server_errors"), bytes=Sum("bytes"), tokens=Sum("pasted_tokens")
    )
    arguments = BulkArgument.objects.filter(team=team)
    assert totals["errors"] == 2
    assert totals["bytes"] == sum(a.bytes for a in arguments)
    assert totals["tokens"] == sum(a.tokens for a in arguments) > 0
    adoption = rollup_totals.reference_adoption(team)
    assert adoption["reference_calls"] == 1 and adoption["calls"] == 9
    agent_row = next(iter(agent_table(team).values()))
    judged = sum(n for v, n in expected.items() if v in JUDGED)
    assert agent_row["exact_rate"] == round(100 * expected[verdict_rules.EXACT] / judged, 2)


@pytest.mark.django_db
def test_known_pastes_get_exactly_the_expected_verdicts_and_evidence(team, captured):
    log, _ = captured
    references.register_upload(team, DOC.encode(), name="checklist.md")
    job = ingest(team, log)
    assert_expected_verdicts(team, job)
    assert_rollups(team)


@pytest.mark.django_db
def test_registering_the_reference_after_ingest_recomputes_verdicts_and_rollups(team, captured):
    log, _ = captured
    job = ingest(team, log)
    before = {k: a.verdict for k, a in verdicts_by_target(team).items()}
    without_document = {
        **EXPECTED,
        # Nothing says what these should have been.
        "skill.md": verdict_rules.UNVERIFIABLE,
        "no-newline.md": verdict_rules.UNVERIFIABLE,
        "crlf.md": verdict_rules.UNVERIFIABLE,
        "cut.md": verdict_rules.UNVERIFIABLE,
        "edited.md": verdict_rules.UNVERIFIABLE,
    }
    # refused.md still compares: the exact copy pasted earlier is the expected content.
    assert before == without_document
    assert verdicts_by_target(team)["refused.md"].evidence["expected_content"] == "captured_copy"
    assert rollup_counts(team) == dict(Counter(without_document.values()))

    document, created = references.register_upload(team, DOC.encode(), name="checklist.md")
    # Five unverifiable become judged; the two with a stated hash now name the document as their source.
    assert created and document.rejudged == 7
    assert_expected_verdicts(team, job)
    assert_rollups(team)

    # Removing it takes the verdicts (and the rollups) back.
    references.remove_document(document)
    assert {k: a.verdict for k, a in verdicts_by_target(team).items()} == without_document
    assert rollup_counts(team) == dict(Counter(without_document.values()))


@pytest.mark.django_db
def test_fidelity_alerts_open_from_the_captured_traffic(team, captured):
    log, _ = captured
    Budget.objects.create(
        team=team, measure=Measure.AGENT_EXACT_RATE, level=Level.WARNING, limit=90, window=50
    )
    Budget.objects.create(team=team, measure=Measure.DAMAGED_ARRIVALS, level=Level.ERROR, limit=0, window=50)
    references.register_upload(team, DOC.encode(), name="checklist.md")
    ingest(team, log)
    alerts = {a.rule_key: a for a in Alert.objects.filter(team=team).open()}
    agent_id = ToolCall.objects.filter(team=team).values_list("agent_id", flat=True).first()
    rate = alerts[f"agent:{agent_id}:agent_exact_rate"]
    assert rate.level == "warning" and rate.value == pytest.approx(100 * 3 / 10)
    assert alerts["tool:files-lean/write:damaged_arrivals"].value == 1  # cut.md
    assert alerts["tool:series/load_series:damaged_arrivals"].value == 1  # dropped
    assert alerts["tool:series/load_series:damaged_arrivals"].level == "error"
    assert len(alerts) == 3


@pytest.mark.django_db
def test_demo_traffic_is_judged_against_its_registered_documents(team, settings, tmp_path):
    from ingest.demo import build_capture_demo

    settings.VAR_DIR = tmp_path
    job = build_capture_demo(team)
    assert job.status == IngestJob.Status.DONE, job.error
    assert job.verdict_counts == DEMO_VERDICTS
