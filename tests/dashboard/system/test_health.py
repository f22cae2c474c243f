"""The health page and `/api/v1/health`: a stopped queue, a database outage a real worker ran
into, queue depths of a real broker, and leases nobody renews.

What failed for real: with PostgreSQL down, worker errors appeared only in the worker's log, and
nothing on the dashboard said a queue had no consumer or how deep it was.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.notify.delivery import create_test_delivery
from dashboard.alerts.notify.models import Channel, ChannelKind, Delivery
from dashboard.servers.models import McpServer, Transport
from dashboard.system import outages
from dashboard.system.models import WorkerHeartbeat
from dashboard.teams.models import ApiToken, Membership
from ingest.capture import pipeline
from ingest.capture.models import IngestJob
from tests.conftest import make_envelope_log
from tests.dashboard.system.outage_helpers import celery_broker, filesystem_broker_options, own_redis
from tests.helpers import free_port, wait_until

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def own_outage_files(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    outages.forget_mine()
    yield
    outages.forget_mine()


def _bearer(plaintext: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _stale_leases(team, alice):
    """One lease of each kind, held by a worker that stopped renewing it: taken a day ago, written
    as a raw timestamp (far past any staleness rule the settings give: minutes, not a day)."""
    now = timezone.now()
    a_day_ago = now - timedelta(days=1)
    server = McpServer.objects.create(
        team=team,
        name="docs",
        transport=Transport.HTTP,
        url="http://127.0.0.1:9/mcp",
        owner=alice,
        polling_since=a_day_ago,
        poll_lease="task-of-a-dead-worker",
    )
    channel = Channel.objects.create(team=team, name="ops", kind=ChannelKind.EMAIL, config={"to": ["o@x.io"]})
    delivery = create_test_delivery(channel)
    Delivery.objects.filter(pk=delivery.pk).update(locked_at=a_day_ago)
    job = pipeline.ingest_bytes(
        team, make_envelope_log(1), source=IngestJob.Source.UPLOAD, filename="cap.jsonl", run=False
    )
    IngestJob.objects.filter(pk=job.pk).update(
        status=IngestJob.Status.RUNNING,
        run_token="t",
        worker="gone-host:4242",
        heartbeat_at=now - timedelta(hours=1),
    )
    return server, delivery, job


def test_the_page_names_a_stopped_queue_and_lists_every_stale_lease(alice_client, team, alice):
    WorkerHeartbeat.beat("poller@a", ["poll", "notify", "celery"])
    server, delivery, job = _stale_leases(team, alice)
    response = alice_client.get(reverse("team_health", args=[team.slug]))
    assert response.status_code == 200
    page = response.content.decode()
    ingest_row = page.split('id="queue-ingest"')[1].split("</tr>")[0]
    assert "stopped: no live worker consumes it" in ingest_row
    assert "poller@a" in page.split('id="queue-poll"')[1].split("</tr>")[0]
    leases = page.split('id="health-leases"')[1]
    assert f"{team.slug}/docs" in leases and "task-of-a-dead-worker" in leases
    assert f"{team.slug}/ops delivery {delivery.pk}" in leases
    assert f"{team.slug}/cap.jsonl (running)" in leases and "gone-host:4242" in leases
    assert 'id="health-overall">degraded' in page
    assert "No live worker consumes: ingest." in page


def test_the_json_tells_monitoring_the_same_and_keeps_details_to_the_tokens_team(
    client, team, alice, team_factory, user_factory
):
    WorkerHeartbeat.beat("poller@a", ["poll", "notify"])
    _stale_leases(team, alice)
    # Nobody: the overall status and nothing else.
    anonymous = client.get("/api/v1/health")
    assert anonymous.status_code == 200 and set(anonymous.json()) == {"status", "checked_at"}
    assert anonymous.json()["status"] == "degraded"
    _, plaintext = ApiToken.issue(team, "monitoring")
    body = client.get("/api/v1/health", **_bearer(plaintext)).json()
    assert body["unconsumed_queues"] == ["ingest"]
    assert body["queues"]["ingest"]["consumers"] == [] and body["queues"]["poll"]["consumers"] == ["poller@a"]
    assert sorted(s["kind"] for s in body["stale_leases"]) == ["delivery", "ingest", "poll"]
    assert body["workers"][0]["hostname"] == "poller@a" and body["workers"][0]["alive"] is True
    assert body["database"] == {"ok": True, "error": ""}
    # Another team's token sees the system, not this team's leases.
    other = team_factory("Elsewhere", user_factory("bob"))
    _, theirs = ApiToken.issue(other, "theirs")
    body = client.get("/api/v1/health", **_bearer(theirs)).json()
    assert body["stale_leases"] == [] and body["unconsumed_queues"] == ["ingest"]
    assert client.get("/api/v1/health", **_bearer("mcpt_wrong")).status_code == 401


def test_only_owners_admins_and_staff_see_the_page(client, team, user_factory):
    url = reverse("team_health", args=[team.slug])
    for role, status in (("member", 404), ("viewer", 404), ("admin", 200)):
        user = user_factory(f"u-{role}")
        Membership.objects.create(team=team, user=user, role=role)
        client.force_login(user)
        assert client.get(url).status_code == status, role
    staff = user_factory("operator")
    staff.is_staff = True
    staff.save()
    client.force_login(staff)  # a member of no team
    assert client.get(url).status_code == 200


def test_queue_depths_of_a_real_redis_broker_and_its_outage(client, team, settings):
    """A redis-server of this test's own: three messages wait in `ingest`; then it is killed."""
    _, plaintext = ApiToken.issue(team, "monitoring")
    from config.celery import app

    with own_redis() as (url, proc), celery_broker(url):
        settings.REDIS_URL = url
        for _ in range(3):
            app.send_task("config.ping", queue="ingest")
        app.send_task("config.ping", queue="poll")
        body = client.get("/api/v1/health", **_bearer(plaintext)).json()
        assert body["broker"]["kind"] == "redis" and body["broker"]["ok"] is True
        assert {q: v["depth"] for q, v in body["queues"].items()} == {
            "poll": 1,
            "ingest": 3,
            "notify": 0,
            "celery": 0,
        }
        proc.kill()
        proc.wait(timeout=10)
        down = client.get("/api/v1/health", **_bearer(plaintext))
    assert down.status_code == 503
    body = down.json()
    assert body["status"] == "down" and body["broker"]["ok"] is False
    assert body["queues"]["ingest"]["depth"] is None  # unknown, not 0
    # The failed check is itself on record (in the database: Redis is what is down).
    assert body["errors"]["broker"]["where"].startswith("health check on ")
    anonymous = client.get("/api/v1/health")
    assert anonymous.status_code == 503 and anonymous.json()["status"] == "down"


def test_queue_depths_of_the_embedded_filesystem_broker(client, team, settings, tmp_path):
    options = filesystem_broker_options(tmp_path)
    settings.REDIS_URL = None
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = options
    _, plaintext = ApiToken.issue(team, "monitoring")
    from config.celery import app

    with celery_broker("filesystem://", options):
        for queue in ("notify", "notify", "celery"):
            app.send_task("config.ping", queue=queue)
    body = client.get("/api/v1/health", **_bearer(plaintext)).json()
    assert body["broker"]["kind"] == "filesystem" and body["broker"]["reserved"] is None
    assert {q: v["depth"] for q, v in body["queues"].items()} == {
        "poll": 0,
        "ingest": 0,
        "notify": 2,
        "celery": 1,
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_that_cannot_reach_the_database_shows_on_the_health_page(
    alice_client, team, settings, tmp_path
):
    """A real Celery worker whose DATABASE_URL points at a closed port: its heartbeat and a task it
    runs fail, it records both (Redis in the full stack, a file under VAR_DIR always) and keeps
    running; the page shows the database errors with their count and time."""
    env = dict(os.environ)
    env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:{free_port()}/nowhere"
    env["VAR_DIR"] = str(tmp_path)
    queue = f"health-{os.getpid()}"
    options: dict[str, str] = {}
    if not settings.REDIS_URL:  # the embedded broker lives under the worker's VAR_DIR
        options = filesystem_broker_options(tmp_path)
    hostname = f"no-db-{os.getpid()}@test"
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "--pool", "threads"]
    command += ["--concurrency", "1", "--hostname", hostname, "--without-mingle", "--without-gossip"]
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    from config.celery import app

    try:
        broker_url = settings.REDIS_URL or "filesystem://"
        with celery_broker(broker_url, options or app.conf.broker_transport_options):
            app.send_task("ingest.tasks.run_ingest_job", (123456,), queue=queue)

        def database_entries() -> list[outages.Entry]:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
            found = [
                e for e in outages.recorded() if e.kind == "database" and e.source.endswith(f":{proc.pid}")
            ]
            wheres = {e.where for e in found}
            return found if "task ingest.tasks.run_ingest_job" in wheres else []

        entry = wait_until(database_entries, timeout=120, message="the worker's recorded database errors")[0]
        assert entry.count >= 2  # the heartbeat's failure and the task's, at least
        assert "connect" in entry.message.lower() or "refused" in entry.message.lower()
        page = alice_client.get(reverse("team_health", args=[team.slug])).content.decode()
        row = page.split('id="errors-database"')[1].split("</tr>")[0]
        shown = re.search(r"<td>(\d+) <span", row)
        assert shown is not None and int(shown.group(1)) >= entry.count, row
        assert f":{proc.pid}" in row, row  # the worker's own record is the latest one
        assert 'id="health-overall">degraded' in page and "Database errors in the last 15 minutes" in page
        assert proc.poll() is None, "recording the errors must not take the worker down"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
