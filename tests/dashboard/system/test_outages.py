"""Broker and cache outages answer 503 with Retry-After, or "saved" where the work was kept.

What failed for real: with Redis down `POST /api/v1/ingest` answered 500 (the rate limiter's cache
call) and a web upload answered 500 although its job was saved. Here the app is pointed at a
loopback port where nothing listens: a real connection refused, from the real clients.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.servers.models import McpServer, Transport
from dashboard.system import outages
from dashboard.system.models import OutageRecord
from ingest.capture.models import IngestJob
from ingest.tasks import resume_stalled_jobs
from tests.conftest import make_envelope_log
from tests.dashboard.system.outage_helpers import celery_broker, closed_redis_url
from tests.helpers import assert_job_reconciles

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def own_outage_files(settings, tmp_path):
    """Each test's outage files in its own VAR_DIR, and nothing left in this process's memory."""
    settings.VAR_DIR = tmp_path
    outages.forget_mine()
    yield
    outages.forget_mine()


@pytest.fixture
def cache_down(settings):
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": closed_redis_url()}
    }


def _bearer(plaintext: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def test_the_ingest_api_answers_503_with_retry_after_when_the_cache_is_down(
    client, team, team_token, cache_down
):
    _, plaintext = team_token
    response = client.post(
        "/api/v1/ingest", make_envelope_log(1), content_type="application/x-ndjson", **_bearer(plaintext)
    )
    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    body = response.json()
    assert body["unavailable"] == "broker" and "try again in 30 s" in body["detail"]
    # Refused before anything was kept, and the outage is on record for the health page.
    assert not IngestJob.objects.filter(team=team).exists()
    row = OutageRecord.objects.get(kind="broker")
    assert row.count == 1 and "Connection" in row.message and row.where == "POST /api/v1/ingest"


def test_the_gate_answers_503_too_when_its_rate_limit_cannot_be_counted(client, team, team_token, cache_down):
    _, plaintext = team_token
    response = client.post(
        "/api/v1/check",
        json.dumps({"server": "any", "tools_list": {"tools": []}}),
        content_type="application/json",
        **_bearer(plaintext),
    )
    assert response.status_code == 503 and response["Retry-After"] == "30"


# These run without the test's wrapping transaction, as a request does in production: the task is
# sent when the view's own transaction commits, so the view knows whether it went out.
@pytest.mark.django_db(transaction=True)
def test_an_upload_is_saved_while_the_broker_is_down_and_the_sweep_runs_it_later(
    alice_client, team, settings, eager_celery
):
    data = make_envelope_log(3)
    eager_celery.conf.task_always_eager = False  # the upload must go through the (dead) broker
    with celery_broker(closed_redis_url()):
        response = alice_client.post(
            reverse("ingest_upload", args=[team.slug]), {"file": SimpleUploadedFile("cap.jsonl", data)}
        )
    job = IngestJob.objects.get(team=team)
    # Answered as saved: the job's page, with the reason it has not started and when it will.
    assert response.status_code == 302 and response["Location"] == reverse(
        "ingest_job", args=[team.slug, job.code]
    )
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("cap.jsonl uploaded" in m and "stalled-job sweep starts it" in m for m in said), said
    assert job.status == IngestJob.Status.QUEUED
    assert OutageRecord.objects.get(kind="broker").where == f"queueing ingest job {job.pk}"

    # The broker is back; the beat's sweep (its real task) finds the queued job and runs it.
    eager_celery.conf.task_always_eager = True
    settings.INGEST_QUEUED_RESEND_SECONDS = 0  # "queued for a minute" is now
    assert resume_stalled_jobs() == [job.pk]
    job.refresh_from_db()
    assert job.status == IngestJob.Status.DONE
    assert_job_reconciles(job, len(data.splitlines()))


@pytest.mark.django_db(transaction=True)
def test_a_queued_api_push_is_saved_and_says_so_while_the_broker_is_down(client, team, team_token):
    _, plaintext = team_token
    with celery_broker(closed_redis_url()):
        response = client.post(
            "/api/v1/ingest?wait=false",
            make_envelope_log(1),
            content_type="application/x-ndjson",
            **_bearer(plaintext),
        )
    assert response.status_code == 202, response.content
    body = response.json()
    job = IngestJob.objects.get(code=body["code"])
    assert job.status == IngestJob.Status.QUEUED and body["status"] == "queued"
    assert "stalled-job sweep starts it" in body["note"]


@pytest.mark.django_db(transaction=True)
def test_a_pushed_batch_that_was_sent_has_no_note(client, team, team_token, eager_celery):
    _, plaintext = team_token
    response = client.post(
        "/api/v1/ingest?wait=false",
        make_envelope_log(1),
        content_type="application/x-ndjson",
        **_bearer(plaintext),
    )
    assert response.status_code == 202 and response.json()["note"] == ""
    # Sent, and run (eagerly here): the job is done.
    assert IngestJob.objects.get(code=response.json()["code"]).status == IngestJob.Status.DONE


@pytest.mark.django_db(transaction=True)
def test_poll_now_says_the_broker_is_down_instead_of_a_500(alice_client, team, alice):
    server = McpServer.objects.create(
        team=team, name="docs", transport=Transport.HTTP, url="http://127.0.0.1:9/mcp", owner=alice
    )
    with celery_broker(closed_redis_url()):
        response = alice_client.post(reverse("poll_now", args=[team.slug, server.code]))
    assert response.status_code == 302
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("the poll of docs was not sent" in m for m in said), said
    assert not any("requested" in m for m in said), said
    assert OutageRecord.objects.get(kind="broker").where == f"poll now of server {server.pk}"


def test_broker_and_database_errors_are_told_apart_through_their_causes():
    import kombu.exceptions
    import redis
    from django.db import IntegrityError, OperationalError

    try:
        try:
            raise redis.exceptions.ConnectionError("refused")
        except redis.exceptions.ConnectionError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as wrapped:
        assert outages.kind_of(wrapped) == "broker"
    assert outages.kind_of(kombu.exceptions.OperationalError("x")) == "broker"
    assert outages.kind_of(OperationalError("x")) == "database"
    # A constraint violation is a bug or bad input, not an outage.
    assert outages.kind_of(IntegrityError("x")) is None
    assert outages.kind_of(ValueError("x")) is None
