"""The batch writer (ingest.bulkwrite and its use by calls.CallStore): COPY on
PostgreSQL and bulk INSERTs elsewhere store the same rows; a content is stored once per sha256;
a conflict during a COPY loses nothing; agents' and sessions' spans cover their calls."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from dashboard.teams.models import Team
from ingest import bulkwrite
from ingest.capture import pipeline
from ingest.capture.models import Agent, BulkArgument, BulkContent, CaptureSession, LineRecord, ToolCall
from ingest.capture.signals import calls_storing
from ingest.fidelity.models import FidelityDaily
from tests.helpers import need, sha
from tests.ingest.capture.logs import EnvelopeLog, assert_reconciles, text_of

pytestmark = pytest.mark.django_db


def mixed_log() -> EnvelopeLog:
    """Two clients, a session with no initialize, repeated pastes, a value a database refuses, an
    array, a quarantined line: every kind of row the writer makes."""
    log = EnvelopeLog(session="a", client="claude-code").initialize()
    for i in range(7):
        log.call("write", {"target": f"a{i}", "content": text_of(1500 + 700 * i, i % 3)})
    log.call("write", {"target": "nul", "content": "zero \x00 byte " * 200})
    log.call("rows", {"rows": list(range(120))})
    log.lines.append(b"{not json\n")
    other = EnvelopeLog(session="b", client="codex-mcp-client").initialize()
    other.seq = 50
    for i in range(4):
        other.call("write", {"target": f"b{i}", "content": text_of(1500 + 700 * i, i % 3)})
    bare = EnvelopeLog(session="c")  # no initialize: no agent
    bare.seq = 90
    bare.call("write", {"content": text_of(3000, 9)})
    log.lines += other.lines + bare.lines
    return log


def ordered(rows) -> list[tuple]:
    return sorted(rows, key=repr)


def rows_of(team: Team) -> dict[str, list[tuple]]:
    """What the ingest stored for a team, without ids, team or job (they differ between teams)."""
    calls = {c.pk: c.dedupe_key for c in ToolCall.objects.filter(team=team)}
    sessions = {s.pk: (s.format, s.session_key) for s in CaptureSession.objects.filter(team=team)}
    agents = {a.pk: (a.family, a.name, a.version) for a in Agent.objects.filter(team=team)}
    skip = {"id", "team", "job", "created", "session", "agent", "linked_call"}
    call_fields = [f.attname for f in ToolCall._meta.concrete_fields if f.name not in skip]
    argument_fields = [
        f.attname
        for f in BulkArgument._meta.concrete_fields
        if f.name not in {"id", "team", "call", "content", "verdict_at"}
    ]
    return {
        "calls": ordered(
            (*(getattr(c, f) for f in call_fields), sessions.get(c.session_id), agents.get(c.agent_id))
            for c in ToolCall.objects.filter(team=team)
        ),
        "arguments": ordered(
            (
                calls[a.call_id],
                *(str(getattr(a, f)) for f in argument_fields),
                a.content.sha256 if a.content else None,
            )
            for a in BulkArgument.objects.filter(team=team).select_related("content")
        ),
        "contents": sorted(
            (c.sha256, c.bytes, c.is_array, c.text) for c in BulkContent.objects.filter(team=team)
        ),
        "sessions": ordered(
            (s.format, s.session_key, s.server_label, s.first_ts, s.last_ts, agents.get(s.agent_id))
            for s in CaptureSession.objects.filter(team=team)
        ),
        "agents": sorted(
            (a.family, a.name, a.version, a.first_seen, a.last_seen) for a in Agent.objects.filter(team=team)
        ),
        "lines": sorted(
            (r.line_no, r.status, r.reason, r.raw, r.raw_bytes) for r in LineRecord.objects.filter(team=team)
        ),
        "rollups": ordered(
            (r.day, agents.get(r.agent_id), r.tool, r.verdict, r.size_bucket, r.calls, r.arguments, r.bytes)
            for r in FidelityDaily.objects.filter(team=team)
        ),
    }


def _mixed_rows(path, team) -> dict:
    job = pipeline.ingest_path(team, path)
    assert job.status == "done", job.error
    assert_reconciles(job, len(path.read_bytes().splitlines()))
    return rows_of(team)


def _assert_mixed_log_rows(rows: dict) -> None:
    assert len(rows["calls"]) == 14 and len(rows["arguments"]) == 14 and len(rows["lines"]) == 1
    assert {agent for *_, agent in rows["sessions"]} == {
        ("claude-code", "claude-code", "2.0.14"),
        ("codex", "codex-mcp-client", "2.0.14"),
        None,
    }


@pytest.mark.services
def test_copy_and_the_insert_fallback_store_the_same_rows(tmp_path, settings, team_factory, alice):
    """Only PostgreSQL has COPY: on SQLite both runs would take the INSERT path and the comparison
    would compare INSERT with INSERT, so this runs on the PostgreSQL leg only."""
    if connection.vendor != "postgresql":
        need("COPY is PostgreSQL's: this comparison runs on the PostgreSQL leg")
    settings.INGEST_BATCH_CALLS = 3
    path = mixed_log().write(tmp_path / "mixed.jsonl")
    stored = {}
    # COPY in binary format (the default), COPY in text format, INSERTs.
    for use_copy, binary in ((True, True), (True, False), (False, True)):
        settings.INGEST_USE_COPY, settings.INGEST_COPY_BINARY = use_copy, binary
        assert bulkwrite.copy_supported() is use_copy
        stored[use_copy, binary] = _mixed_rows(path, team_factory(f"copy {use_copy} {binary}", alice))
    assert stored[True, True] == stored[True, False] == stored[False, True]
    _assert_mixed_log_rows(stored[True, True])


def test_the_insert_path_stores_every_row(tmp_path, settings, team):
    settings.INGEST_BATCH_CALLS = 3
    settings.INGEST_USE_COPY = False
    assert not bulkwrite.copy_supported()
    _assert_mixed_log_rows(_mixed_rows(mixed_log().write(tmp_path / "mixed.jsonl"), team))


def test_each_content_is_stored_once_per_sha256_across_batches(team, tmp_path, settings):
    settings.INGEST_BATCH_CALLS = 4
    pastes = [text_of(2000 + 10 * (i % 5), i % 5) for i in range(18)]  # 5 distinct texts
    log = EnvelopeLog().initialize()
    for i, paste in enumerate(pastes):
        log.call("write", {"target": f"t{i}", "content": paste})
    job = pipeline.ingest_path(team, log.write(tmp_path / "repeats.jsonl"))
    assert job.status == "done" and job.calls_stored == 18
    contents = {c.sha256: c for c in BulkContent.objects.filter(team=team)}
    assert sorted(contents) == sorted({sha(p) for p in pastes})
    for content in contents.values():
        assert sha(content.text) == content.sha256 and content.bytes == len(content.text.encode())
    arguments = BulkArgument.objects.filter(call__job=job).select_related("content")
    assert sorted(a.content.text for a in arguments) == sorted(pastes)
    assert all(a.sha256 == a.content.sha256 for a in arguments)
    # A later job with the same pastes adds no content.
    more = EnvelopeLog(session="s2").initialize()
    more.call("write", {"content": pastes[0]})
    pipeline.ingest_path(team, more.write(tmp_path / "again.jsonl"))
    assert BulkContent.objects.filter(team=team).count() == 5


def test_a_row_stored_meanwhile_is_kept_and_the_others_written(team):
    # A concurrent run stored one of the contents after this batch looked: on PostgreSQL the
    # COPY is refused as a whole and the INSERT fallback skips just that row.
    kept = BulkContent.objects.create(team=team, sha256=sha("first"), bytes=5, text="first")
    rows = [
        BulkContent(team=team, sha256=sha("first"), bytes=5, text="first"),
        BulkContent(team=team, sha256=sha("second"), bytes=6, text="second"),
    ]
    bulkwrite.insert_rows(BulkContent, rows)
    stored = dict(BulkContent.objects.filter(team=team).values_list("sha256", "pk"))
    assert stored == {sha("first"): kept.pk, sha("second"): stored[sha("second")]}
    if connection.vendor == "postgresql":
        # And the refusal left the transaction usable: a COPY without conflict goes through.
        fresh = [
            BulkContent(pk=pk, team=team, sha256=sha("third"), bytes=5, text="third")
            for pk in bulkwrite.reserve_ids(BulkContent, 1)
        ]
        assert bulkwrite.copy_rows(BulkContent, fresh)
        assert not bulkwrite.copy_rows(
            BulkContent, [BulkContent(team=team, pk=fresh[0].pk, sha256="x", bytes=1, text="x")]
        )
        assert BulkContent.objects.get(pk=fresh[0].pk).text == "third"


def test_agents_and_sessions_span_their_calls_over_every_batch(team, tmp_path, settings):
    settings.INGEST_BATCH_CALLS = 2
    log = EnvelopeLog(session="span").initialize()
    for i in range(9):
        log.call("write", {"content": text_of(1200, i)})
    job = pipeline.ingest_path(team, log.write(tmp_path / "span.jsonl"))
    assert job.status == "done"
    # The requests' timestamps, as EnvelopeLog wrote them (10:MM:SS on 2026-01-05).
    stamps = [
        datetime(2026, 1, 5, 10, seq // 60 % 60, seq % 60, tzinfo=UTC) for seq in range(4, 4 + 2 * 9, 2)
    ]
    session = CaptureSession.objects.get(team=team, session_key="span")
    assert (session.first_ts, session.last_ts) == (min(stamps), max(stamps))
    agent = Agent.objects.get(team=team)
    assert (agent.first_seen, agent.last_seen) == (min(stamps), max(stamps))
    # A later job of the same session only widens the span.
    later = EnvelopeLog(session="span")
    later.seq = 200
    later.call("write", {"content": text_of(1300, 1)})
    pipeline.ingest_path(team, later.write(tmp_path / "later.jsonl"))
    session.refresh_from_db()
    assert (session.first_ts, session.last_ts) == (min(stamps), datetime(2026, 1, 5, 10, 3, 21, tzinfo=UTC))


def test_a_batch_is_judged_and_rolled_up_in_its_own_transaction(team_factory, alice, tmp_path, settings):
    settings.INGEST_BATCH_CALLS = 3
    log = EnvelopeLog().initialize()
    for i in range(8):
        log.call("write", {"target": f"t{i}", "content": text_of(1500 + 100 * i, i)})
    path = log.write(tmp_path / "eight.jsonl")
    seen: list[tuple[bool, set[str], set[bool]]] = []

    def after_fidelity(sender, calls, arguments, written, **kwargs):
        # Connected after the fidelity step's receiver: the rows it got are judged and rolled up.
        seen.append((written, {a.verdict for a in arguments}, {c.in_rollups for c in calls}))
        if len(seen) == 2 and kwargs["team"].name == "Broken":
            raise RuntimeError("the second batch breaks")

    calls_storing.connect(after_fidelity)
    try:
        broken = team_factory("Broken", alice)
        failed = pipeline.ingest_path(broken, path)
        # The first batch is kept whole; nothing of the second, not even its rollups.
        assert failed.status == "failed" and "the second batch breaks" in failed.error
        assert ToolCall.objects.filter(team=broken).count() == 3
        assert sum(FidelityDaily.objects.filter(team=broken).values_list("calls", flat=True)) == 3
        assert not ToolCall.objects.filter(team=broken, in_rollups=False).exists()
        resumed = pipeline.run_job(failed.pk)
        assert resumed.status == "done" and resumed.calls_stored == 8
        clean = pipeline.ingest_path(team_factory("Clean", alice), path)
    finally:
        calls_storing.disconnect(after_fidelity)
    for team in (broken, clean.team):
        assert sum(FidelityDaily.objects.filter(team=team).values_list("calls", flat=True)) == 8
        assert set(BulkArgument.objects.filter(team=team).values_list("verdict", flat=True)) == {
            "unverifiable"
        }
    # COPY writes the rows as judged; the INSERT path updates the rows it wrote.
    assert {written for written, _, _ in seen} == {connection.vendor != "postgresql"}
    assert all(verdicts == {"unverifiable"} and flags == {True} for _, verdicts, flags in seen)


def test_a_copy_refused_midway_undoes_the_batch_rollups_and_writes_it_again(team, tmp_path, settings):
    settings.INGEST_BATCH_CALLS = 4
    log = EnvelopeLog().initialize()
    for i in range(6):
        log.call("write", {"target": f"t{i}", "content": text_of(1400 + 50 * i, i)})
    path = log.write(tmp_path / "six.jsonl")
    passes: list[bool] = []

    def squatter(sender, calls, written, **kwargs):
        passes.append(written)
        if not written and len(passes) == 1:
            # A row in the way of the COPY (as a concurrent run's would be): the batch's savepoint
            # goes, with the rollups just added, and the INSERT path stores the batch instead.
            ToolCall.objects.create(team=kwargs["team"], dedupe_key=calls[0].dedupe_key, tool="x", job=None)

    calls_storing.connect(squatter)
    try:
        job = pipeline.ingest_path(team, path)
    finally:
        calls_storing.disconnect(squatter)
    assert job.status == "done" and job.calls_stored == 6, job.error
    assert sum(FidelityDaily.objects.filter(team=team).values_list("calls", flat=True)) == 6
    assert not ToolCall.objects.filter(team=team, tool="x").exists()  # rolled back with the savepoint
    if connection.vendor == "postgresql":
        assert passes == [False, True, False]  # batch 1 refused, then written in steps; batch 2 by COPY
    else:
        assert passes == [True, True]
