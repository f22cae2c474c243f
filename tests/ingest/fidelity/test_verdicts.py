"""Verdicts on stored bulk arguments: where the expectation comes from, hash-only captures, the
server's own answer, and the indexed document lookup.

Run: VAR_DIR=/tmp/x-var .venv/bin/pytest tests/ingest/fidelity/test_verdicts.py -q
"""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest.capture import pipeline
from ingest.capture.models import BulkArgument
from ingest.fidelity import references, verdicts
from ingest.fidelity.models import ReferenceFingerprint
from mcptax.bulk import find_bulk_arguments
from tests.helpers import sha
from tests.ingest.capture.logs import EnvelopeLog
from tests.ingest.fidelity.traffic import doc, ingest, only_argument

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


# -- where the expectation comes from ------------------------------------------------------------


def test_a_stated_hash_covers_one_argument():
    big, small = "x" * 5000, "short note"
    one = find_bulk_arguments({"content": big})
    assert verdicts.caller_expectations({"content": big, "expected_sha256": "A" * 64}, None, one) == {
        "/content": ("a" * 64, "caller")
    }
    assert verdicts.caller_expectations({"content": big}, {"sha256": "b" * 64}, one) == {
        "/content": ("b" * 64, "meta")
    }
    # Several bulk arguments: the one it names, else the largest.
    two = find_bulk_arguments({"content": big, "text": small})
    assert verdicts.caller_expectations({"sha256": sha(small)}, None, two) == {
        "/text": (sha(small), "caller")
    }
    assert verdicts.caller_expectations({"sha256": "c" * 64}, None, two) == {"/content": ("c" * 64, "caller")}
    # Not a sha256: not an expectation.
    assert verdicts.caller_expectations({"expected_sha256": "abc"}, {"sha256": 5}, one) == {}


def test_arguments_win_over_meta_and_a_document_is_not_consulted_when_the_caller_stated_a_hash(
    team, tmp_path
):
    text = doc(1)
    references.register_upload(team, text.encode(), name="one.md")
    log = EnvelopeLog().initialize()
    log.call("write", {"content": text, "expected_sha256": sha(doc(2))}, meta={"sha256": sha(text)})
    ingest(team, log, tmp_path)
    argument = only_argument(team)
    # The caller expected doc(2), which is known nowhere: a mismatch, not an exact match to one.md.
    assert (argument.verdict, argument.expected_source, argument.expected_sha256) == (
        "mismatch",
        "caller",
        sha(doc(2)),
    )


def test_cheap_hypotheses_decide_without_expected_content(team, tmp_path):
    text = doc(3)
    log = EnvelopeLog().initialize()
    log.call("write", {"content": text[:-1], "expected_sha256": sha(text)})
    log.call("write", {"content": text.replace("\n", "\r\n"), "expected_sha256": sha(text)})
    ingest(team, log, tmp_path)
    found = {a.call.jsonrpc_id: a for a in BulkArgument.objects.filter(team=team).select_related("call")}
    assert (
        found["1"].verdict == "newline_only" and found["1"].evidence["hypothesis"] == "final_newline_removed"
    )
    assert found["2"].verdict == "line_endings" and found["2"].evidence["expected_content"] is None


def test_hash_only_captures_are_judged_from_their_digest(team, tmp_path):
    text = doc(4)
    references.register_upload(team, text.encode(), name="four.md")
    cut = text[:900].encode()
    log = EnvelopeLog().initialize()
    log.call("write", {"content": {"$digest": {"sha256": sha(text), "bytes": len(text.encode())}}})
    log.call(
        "write",
        {
            "content": {"$digest": {"sha256": hashlib.sha256(cut).hexdigest(), "bytes": len(cut)}},
            "expected_sha256": sha(text),
        },
    )
    log.call("write", {"content": {"$digest": {"sha256": sha("nothing known"), "bytes": 13}}})
    ingest(team, log, tmp_path)
    found = {a.call.jsonrpc_id: a for a in BulkArgument.objects.filter(team=team).select_related("call")}
    assert found["1"].verdict == "exact" and found["1"].expected_source == "reference_document"
    assert found["2"].verdict == "truncated" and found["2"].evidence["kept_bytes"] == len(cut)
    assert found["2"].evidence["hypothesis"] == "prefix" and found["2"].evidence["arrived_content"] is None
    assert found["3"].verdict == "unverifiable"


def test_a_capture_cut_by_the_log_is_never_the_agents_fault(team, tmp_path):
    text = doc(5)
    references.register_upload(team, text.encode(), name="five.md")
    log = EnvelopeLog().initialize()
    log.frame(
        "c2s",
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "write", "arguments": {"content": text[:500]}},
        },
        truncated=True,
    )
    log.frame("s2c", {"jsonrpc": "2.0", "id": 9, "result": {"content": []}})
    ingest(team, log, tmp_path)
    assert only_argument(team).verdict == "capture_truncated"


def test_the_server_answer_and_its_reported_hash_sit_beside_the_verdict(team, tmp_path):
    text = doc(6)
    log = EnvelopeLog().initialize()
    log.call(
        "write",
        {"content": text, "expected_sha256": sha(text)},
        result={"content": [], "structuredContent": {"sha256": sha(text + "\n")}, "isError": False},
    )
    ingest(team, log, tmp_path)
    evidence = only_argument(team).evidence
    assert evidence["server_is_error"] is False
    assert evidence["server_sha256"] == sha(text + "\n") and evidence["server_sha256_agrees"] is False


# -- finding the document ----------------------------------------------------------------------------


def test_document_lookup_is_a_constant_number_of_indexed_queries(team, tmp_path):
    for n in range(30):
        references.register_upload(team, doc(100 + n).encode(), name=f"{n}.md")
    assert ReferenceFingerprint.objects.filter(team=team).count() == 30 * 6

    def judge_pastes(count: int, session: str) -> int:
        log = EnvelopeLog(session=session).initialize()
        for n in range(count):
            log.call("write", {"content": doc(100 + n)[:-1] + " (edited)\n"})
        job = pipeline.ingest_path(team, log.write(tmp_path / f"{session}.jsonl"))
        BulkArgument.objects.filter(call__job=job).update(verdict="")
        arguments = list(BulkArgument.objects.filter(call__job=job).select_related("call"))
        with CaptureQueriesContext(connection) as queries:
            verdicts.judge_arguments(team, arguments)
        assert {a.verdict for a in BulkArgument.objects.filter(call__job=job)} == {"mutated"}
        lookups = [q["sql"] for q in queries if "ingest_referencefingerprint" in q["sql"]]
        # A probe whether the team has documents at all, then one lookup of every key.
        assert len(lookups) == 2 and "LIMIT 1" in lookups[0]
        assert '"team_id" =' in lookups[1] and '"kind" =' in lookups[1]
        return len(queries)

    assert judge_pastes(2, "small") == judge_pastes(25, "large")
    # Each edited paste was tied to its own document.
    names = {a.evidence["document"]["name"] for a in BulkArgument.objects.filter(team=team)}
    assert names == {f"{n}.md" for n in range(25)}


def test_the_strongest_match_wins_when_documents_share_a_head(team, tmp_path):
    base = doc(7)
    references.register_upload(team, (base + "appendix A\n" * 40).encode(), name="long.md")
    references.register_upload(team, base.encode(), name="base.md")
    log = EnvelopeLog().initialize()
    log.call("write", {"content": base[:-1]})  # head and tail (stripped) both match base.md only
    ingest(team, log, tmp_path)
    argument = only_argument(team)
    assert argument.verdict == "newline_only" and argument.evidence["document"]["name"] == "base.md"
