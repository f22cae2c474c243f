"""FidelityDaily rollups: maintained at ingest, corrected on re-judging, equal to a from-scratch count.

The oracle below recomputes every rollup row from the call table (which the product never does);
after each kind of change the maintained rows must equal it exactly.

Run: VAR_DIR=/tmp/x-var .venv/bin/pytest tests/test_rollups.py -q
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.servers.models import McpServer, Transport
from dashboard.servers.polling import record_snapshot
from ingest.capture import pipeline
from ingest.capture.models import BulkArgument, ToolCall
from ingest.capture.signals import calls_ingested
from ingest.fidelity import costs, references, rollups
from ingest.fidelity.models import FidelityDaily, ModelPrice
from tests.dashboard.alerts.factories import fetch_example
from tests.test_ingest_pipeline import LOGS, EnvelopeLog

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(240)]

COUNTED = ("calls", "arguments", "bytes", "pasted_tokens", "output_tokens", "billed_tokens", "server_errors")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def doc(n: int = 0) -> str:
    return "".join(f"line {i} of document {n}: some words to paste\n" for i in range(80))


def oracle(team) -> dict[tuple, dict[str, int]]:
    """Every rollup row recomputed from the calls (test only)."""
    expected: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTED, 0))
    for call in ToolCall.objects.filter(team=team, counts_in_rollups=True):
        arguments = list(BulkArgument.objects.filter(call=call).order_by("pointer", "pk"))
        day = rollups.call_day(call)
        if not arguments:
            verdict = "by_reference" if call.is_reference_call else "no_bulk"
            row = expected[(day, call.agent_id, call.server_label, call.tool, verdict, "")]
            row["calls"] += 1
            row["output_tokens"] += call.output_tokens or 0
            row["billed_tokens"] += call.output_tokens or 0
            row["server_errors"] += 1 if call.is_error else 0
            continue
        shares = costs.split_output_tokens(call.output_tokens, [a.tokens for a in arguments])
        for index, (argument, share) in enumerate(zip(arguments, shares, strict=True)):
            key = (
                day,
                call.agent_id,
                call.server_label,
                call.tool,
                argument.verdict,
                rollups.size_bucket(argument.bytes),
            )
            row = expected[key]
            row["calls"] += index == 0
            row["arguments"] += 1
            row["bytes"] += argument.bytes
            row["pasted_tokens"] += argument.tokens
            row["output_tokens"] += share
            row["billed_tokens"] += share if call.output_tokens is not None else argument.tokens
            row["server_errors"] += 1 if (call.is_error and index == 0) else 0
    return {k: dict(v) for k, v in expected.items()}


def maintained(team) -> dict[tuple, dict[str, int]]:
    rows = {}
    for row in FidelityDaily.objects.filter(team=team):
        counts = {name: getattr(row, name) for name in COUNTED}
        if any(counts.values()):
            rows[(row.day, row.agent_id, row.server_label, row.tool, row.verdict, row.size_bucket)] = counts
    return rows


def paste_log(session: str = "s1", client: str = "claude-code") -> EnvelopeLog:
    log = EnvelopeLog(session=session, label="files-lean", client=client).initialize()
    log.call("write", {"target": "a.md", "content": doc(1)})
    log.call("write", {"target": "b.md", "content": doc(1)[:-1], "expected_sha256": sha(doc(1))})
    log.call("write", {"target": "c.md", "content": doc(1)[:700]})
    log.call("write", {"target": "d.md", "path": "a.md"})
    log.call("search", {"query": "step"})
    log.call(
        "write",
        {"target": "e.md", "content": doc(2).replace("document", "doc"), "expected_sha256": sha(doc(2))},
        result={"content": [{"type": "text", "text": "no"}], "isError": True},
    )
    log.call("write", {"target": "f.md", "content": "x" * 200_000})
    log.call("bulk", {"rows": list(range(150)), "notes": {"text": "short"}})
    return log


def test_size_buckets_have_the_issue_boundaries():
    kb = 1024
    cases = [(0, "lt1k"), (kb - 1, "lt1k"), (kb, "1-10k"), (10 * kb - 1, "1-10k"), (10 * kb, "10-50k")]
    cases += [(50 * kb, "50-100k"), (100 * kb - 1, "50-100k"), (100 * kb, "gt100k")]
    assert [rollups.size_bucket(n) for n, _ in cases] == [b for _, b in cases]


def test_rollups_equal_a_recount_through_ingest_rejudging_and_removal(team, tmp_path):
    job = pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    assert job.status == "done", job.error
    first = maintained(team)
    assert first == oracle(team)
    verdicts = {r["verdict"] for r in FidelityDaily.objects.filter(team=team).values("verdict")}
    assert {"by_reference", "no_bulk", "unverifiable", "newline_only", "mismatch"} <= verdicts
    buckets = set(FidelityDaily.objects.filter(team=team).values_list("size_bucket", flat=True))
    assert {"", "lt1k", "1-10k", "gt100k"} <= buckets
    assert sum(FidelityDaily.objects.filter(team=team).values_list("calls", flat=True)) == 8

    # A document registered later moves counts between verdicts.
    document, _ = references.register_upload(team, doc(1).encode(), name="doc1.md")
    assert maintained(team) == oracle(team) != first
    assert BulkArgument.objects.get(team=team, call__tool="write", bytes=700).verdict == "truncated"
    # An exact copy of doc(2) arriving later makes the mismatch a comparison (mutated).
    second = EnvelopeLog(session="s2", label="files-lean").initialize()
    second.call("write", {"target": "g.md", "content": doc(2)})
    pipeline.ingest_path(team, second.write(tmp_path / "b.jsonl"))
    assert BulkArgument.objects.get(team=team, expected_sha256=sha(doc(2))).verdict == "mutated"
    assert maintained(team) == oracle(team)
    # And removing the document takes them back.
    references.remove_document(document)
    assert maintained(team) == oracle(team)


def test_a_batch_signalled_again_is_not_counted_twice(team, tmp_path):
    job = pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    before = maintained(team)
    ids = list(ToolCall.objects.filter(job=job).values_list("pk", flat=True))
    calls_ingested.send(sender=type(job), team=team, call_ids=ids, job=job)
    assert maintained(team) == before == oracle(team)
    assert ToolCall.objects.filter(job=job, in_rollups=False).count() == 0


@pytest.mark.parametrize(
    "order",
    [("envelope.jsonl", "claude_code_session.jsonl"), ("claude_code_session.jsonl", "envelope.jsonl")],
)
def test_a_transcript_linked_to_its_proxy_capture_counts_once_in_either_order(team, order):
    for name in order:
        pipeline.ingest_path(team, LOGS / name)
    assert ToolCall.objects.filter(team=team, counts_in_rollups=False).exists()
    assert maintained(team) == oracle(team)
    counting = ToolCall.objects.filter(team=team, counts_in_rollups=True).count()
    assert sum(FidelityDaily.objects.filter(team=team).values_list("calls", flat=True)) == counting
    assert not ToolCall.objects.filter(team=team, counts_in_rollups=False, in_rollups=True).exists()


def test_transcript_output_tokens_are_billed_and_priced_by_the_editable_table(team):
    pipeline.ingest_path(team, LOGS / "claude_code_session.jsonl")
    assert maintained(team) == oracle(team)
    calls = ToolCall.objects.filter(team=team, counts_in_rollups=True)
    with_output = sum(c.output_tokens or 0 for c in calls)
    assert with_output > 0
    totals = costs.summary(team)
    assert totals["output_tokens"] == with_output
    billed = totals["billed_tokens"]
    # Seeded example price for claude-code: $15 per million output tokens.
    assert totals["cost_usd"] == (Decimal(billed) * Decimal(15) / Decimal(1_000_000)).quantize(
        Decimal("0.000001")
    )
    # The team's own price wins and re-prices the rollups.
    ModelPrice.objects.create(
        team=team, model="our-model", agent_family="claude-code", input_usd_per_mtok=1, output_usd_per_mtok=40
    )
    assert costs.summary(team)["cost_usd"] == (Decimal(billed) * 40 / Decimal(1_000_000)).quantize(
        Decimal("0.000001")
    )
    assert costs.summary(team)["reference_cost_usd"] == (
        Decimal(totals["reference_tokens"]) * 40 / Decimal(1_000_000)
    ).quantize(Decimal("0.000001"))


def test_reference_cost_is_the_tokens_of_a_reference_argument(team, tmp_path):
    pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    totals = costs.summary(team)
    arguments = BulkArgument.objects.filter(team=team).count()
    per_reference = costs.reference_argument_tokens(costs.TYPICAL_REFERENCE)
    assert 10 < per_reference < 40
    assert totals["reference_tokens"] == arguments * per_reference
    assert totals["pasted_tokens"] > 50 * totals["reference_tokens"]
    assert totals["saving_usd"] > 0


def test_price_book_resolution_order(team, team_factory):
    book = costs.PriceBook(team)
    assert book.price_for("codex").model == "gpt-5"
    assert book.price_for("some-new-agent").is_default
    ModelPrice.objects.create(
        team=team, model="house", is_default=True, input_usd_per_mtok=1, output_usd_per_mtok=2
    )
    book = costs.PriceBook(team)
    assert book.price_for("some-new-agent").model == "house"
    assert book.price_for("codex").model == "house"  # the team's default beats a global family row
    assert costs.PriceBook(team_factory("Other")).price_for("codex").model == "gpt-5"


def test_unused_tools_come_from_rollups_with_their_share_of_the_fixed_tax(team, tmp_path):
    server = McpServer.objects.create(
        team=team, name="files-lean", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    snapshot, _ = record_snapshot(server, fetch_example("lean", False))
    server.refresh_from_db()
    pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    # The sample log is dated 2026-01-05; make it this week's traffic.
    FidelityDaily.objects.filter(team=team).update(day=rollups.days_ago(3))
    unused = rollups.unused_tools(server)
    names = [t.name for t in snapshot.tools.order_by("position")]
    assert "write" in names and "search" in names
    assert [u["name"] for u in unused] == [n for n in names if n not in ("write", "search")]
    for entry in unused:
        tool = snapshot.tools.get(name=entry["name"])
        assert entry["tokens"] == tool.tokens and entry["share"] == tool.tokens / snapshot.fixed_tax_tokens
    # Traffic older than the window does not count as use.
    FidelityDaily.objects.filter(team=team).update(day="2020-01-01")
    assert [u["name"] for u in rollups.unused_tools(server)] == names


def test_page_reads_are_a_constant_number_of_queries(team, tmp_path):
    pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    agent = ToolCall.objects.filter(team=team).values_list("agent_id", flat=True).first()

    def reads() -> int:
        with CaptureQueriesContext(connection) as queries:
            rollups.agent_table(team)
            rollups.exact_rate_series(team)
            for by in ("verdict", "tool", "size"):
                rollups.breakdown(team, by, agent=agent)
            rollups.reference_adoption(team, agent=agent)
            costs.summary(team, agent=agent)
        return len(queries)

    small = reads()
    for n in range(2, 6):
        pipeline.ingest_path(
            team, paste_log(session=f"s{n}", client=f"agent-{n}").write(tmp_path / f"{n}.jsonl")
        )
    assert reads() == small == 7
