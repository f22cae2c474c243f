"""Two runs writing batches of one team side by side (the ranges of a file on two workers) meet
the same agents in different orders: they must not deadlock on ``unique_agent``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.db import connection

from ingest.capture import pipeline
from ingest.capture.models import Agent, CaptureSession, IngestJob
from ingest.capture.pipeline.calls import CallStore
from tests.ingest.capture.logs import EnvelopeLog

pytestmark = pytest.mark.timeout(120)


def two_sessions(path: Path, first: tuple[str, str], second: tuple[str, str]) -> Path:
    lines: list[bytes] = []
    for session, client in (first, second):
        log = EnvelopeLog(session=session, client=client).initialize()
        lines += log.call("write", {"content": f"from {session}"}).lines
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.django_db(transaction=True)
def test_runs_meeting_the_same_new_agents_in_opposite_orders_both_finish(team, tmp_path, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL")
    paths = [
        two_sessions(tmp_path / "a.jsonl", ("a1", "agent-x"), ("a2", "agent-y")),
        two_sessions(tmp_path / "b.jsonl", ("b1", "agent-y"), ("b2", "agent-x")),
    ]
    # Each run stops after the first agent it meets until the other has met its own first one:
    # the moment at which, agents created in each run's own order, both would hold one the other
    # needs next.
    barrier = threading.Barrier(2, timeout=20)
    met: dict[int, int] = {}
    original = CallStore._agent

    def meeting(self, info, ts, notes):
        agent = original(self, info, ts, notes)
        me = threading.get_ident()
        met[me] = met.get(me, 0) + 1
        if met[me] == 1:
            barrier.wait()
        return agent

    monkeypatch.setattr(CallStore, "_agent", meeting)
    jobs: list[IngestJob] = []

    def run(path: Path) -> None:
        try:
            jobs.append(pipeline.ingest_path(team, path))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(path,)) for path in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [job.error for job in jobs] == ["", ""]
    assert [job.status for job in jobs] == ["done", "done"] and sum(j.calls_stored for j in jobs) == 4
    assert sorted(Agent.objects.filter(team=team).values_list("name", flat=True)) == ["agent-x", "agent-y"]
    assert CaptureSession.objects.filter(team=team).count() == 4
