"""A worker killed outright (SIGKILL) in the middle of one range of a large file read in ranges:
the range is resumed by the stalled-job sweep on another worker, the file's job ends with the
counts of an uninterrupted run, every call stored once.

Same set-up as tests/config/test_worker_kills.py (real `celery worker` processes, SQLite and the
filesystem broker in a VAR_DIR of their own), with ranges small enough for the log to be split.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.config.test_worker_kills import (
    CALLS,
    GUARD,
    kill,
    query,
    running,
    start_beat,
    start_ingest,
    start_worker,
)
from tests.conftest import ROOT, make_envelope_log
from tests.helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def log_bytes() -> bytes:
    """The log ``start_ingest`` queues (its size sets the ranges)."""
    return make_envelope_log(CALLS, bad_lines=7, content_bytes=3000, seed="kill")


@pytest.fixture(scope="module")
def ranges_env(tmp_path_factory, log_bytes) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {
        "VAR_DIR": str(tmp_path_factory.mktemp("kill-ranges-var")),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        # A live range heartbeats at every batch: silent 5 s, it is dead and resumed.
        "INGEST_JOB_LEASE_SECONDS": "5",
        "INGEST_BATCH_CALLS": "50",
        "INGEST_RANGE_BYTES": str(len(log_bytes) // 4 + 1),  # four ranges
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=240
    )
    return env


def _job_row(env: dict[str, str], job: int) -> tuple:
    ((row),) = query(
        env,
        "SELECT status, lines_read, stored, quarantined, ignored, duplicate, calls_stored, error "
        "FROM ingest_ingestjob WHERE id = ?",
        job,
    )
    return row


def _ranges(env: dict[str, str], job: int) -> list[tuple]:
    return query(
        env,
        "SELECT id, status, lines_read FROM ingest_ingestjob WHERE parent_id = ? ORDER BY range_index",
        job,
    )


def test_a_range_a_killed_worker_was_reading_finishes_on_another_exactly_once(
    ranges_env, log_bytes, tmp_path
):
    job = start_ingest(ranges_env, tmp_path)["job"]  # the same 3,000-call log, queued as an upload
    logs = tmp_path / "logs"
    logs.mkdir()
    worker_a = start_worker(ranges_env, "a-ranges", logs / "a.log")
    try:

        def in_a_range() -> bool:
            assert worker_a.poll() is None, f"worker A exited; see {logs / 'a.log'}"
            assert _job_row(ranges_env, job)[0] != "done", "the job ended before worker A could be killed"
            return any(status == "running" and lines > 0 for _, status, lines in _ranges(ranges_env, job))

        wait_until(in_a_range, timeout=GUARD, interval=0.02, message="worker A in the middle of a range")
    finally:
        kill(worker_a)
    parts = _ranges(ranges_env, job)
    assert len(parts) == 4
    assert any(status == "running" for _, status, _ in parts)
    assert _job_row(ranges_env, job)[0] == "running"

    with running(
        lambda: start_worker(ranges_env, "b-ranges", logs / "b.log"),
        lambda: start_beat(ranges_env, "ingest.tasks.resume_stalled_jobs", logs / "beat.log"),
    ):
        wait_until(
            lambda: _job_row(ranges_env, job)[0] in ("done", "failed"),
            timeout=GUARD,
            message="the file's job to finish on worker B",
        )
    # The log's own make-up: 2 session lines, 2 per call, 7 broken ones; none counted twice.
    assert _job_row(ranges_env, job) == ("done", 2 + 2 * CALLS + 7, 2 * CALLS, 7, 2, 0, CALLS, "")
    assert [status for _, status, _ in _ranges(ranges_env, job)] == ["done"] * 4
    ((calls, distinct),) = query(
        ranges_env, "SELECT count(*), count(DISTINCT dedupe_key) FROM ingest_toolcall WHERE job_id = ?", job
    )
    assert (calls, distinct) == (CALLS, CALLS)
    log_b = (logs / "b.log").read_text(errors="replace")
    assert "Traceback" not in log_b, log_b[-3000:]
