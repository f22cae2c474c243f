"""Each worker reports the queues it consumes, and the overview names a queue nobody consumes.

What failed for real: workers started one queue each (as the README suggests) never ran the
heartbeat task, which sat on the default queue, so the page said "No worker is running" while
polls ran; a queue with no consumer went unnoticed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard.system.models import WorkerHeartbeat
from tests.helpers import wait_until, worker_environment

ROOT = Path(__file__).resolve().parents[3]


def test_the_overview_names_the_queues_no_live_worker_consumes(alice_client, team):
    url = reverse("team_overview", args=[team.slug])
    WorkerHeartbeat.beat("poller@a", ["poll"])
    WorkerHeartbeat.beat("ingester@b", ["ingest", "celery"])
    page = alice_client.get(url).content.decode()
    assert "No worker consumes the notify queue." in page and "No worker is running" not in page
    # A worker that stopped reporting no longer counts for its queues.
    WorkerHeartbeat.objects.filter(hostname="ingester@b").update(
        last_seen=timezone.now() - timedelta(minutes=10)
    )
    page = alice_client.get(url).content.decode()
    assert "No worker consumes the ingest, notify queues." in page
    WorkerHeartbeat.beat("notifier@c", ["notify", "ingest"])
    assert b"worker-banner" not in alice_client.get(url).content


@pytest.mark.slow
@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_worker_started_for_one_queue_reports_itself_and_its_queue(postgres_and_redis, team):
    env = worker_environment()
    hostname = f"poll-only-{os.getpid()}@test"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            "poll",
            "--pool",
            "threads",
            "--concurrency",
            "1",
            "--hostname",
            hostname,
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        beat = wait_until(
            lambda: WorkerHeartbeat.objects.filter(hostname=hostname).first(),
            timeout=90,
            message="the poll-only worker's own heartbeat",
        )
        # Reported by the worker itself: no task had to reach it through a queue it does not read.
        assert beat.queues == ["poll"]
        assert WorkerHeartbeat.status().alive
    finally:
        proc.terminate()
        proc.wait(timeout=30)
