"""Failed jobs: a transient failure (the input not in the storage yet) is retried with backoff and
shown on the job page; refused input fails at once; the last retry gives up and says so.

Runs against the ingest storage of the leg: local files on SQLite, the S3 server on PostgreSQL.
"""

from __future__ import annotations

import gzip
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from ingest.capture import pipeline
from ingest.capture.models import IngestJob, ToolCall
from ingest.capture.storage import ingest_storage, spool_dir
from ingest.capture.uploads import store_upload, upload_dir
from tests.conftest import make_envelope_log
from tests.helpers import free_port
from tests.ingest.capture.logs import API, bearer


def _page(client, job: IngestJob) -> str:
    response = client.get(reverse("ingest_job", args=[job.team.slug, job.code]))
    assert response.status_code == 200
    return response.content.decode()


def _falls_due(job: IngestJob) -> None:
    """Time passes until the retry is due (the job's own clock is moved, nothing is mocked)."""
    IngestJob.objects.filter(pk=job.pk).update(retry_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db
def test_a_missing_input_is_retried_with_backoff_and_the_job_finishes_once_it_appears(
    team, settings, alice_client
):
    settings.INGEST_RETRY_MAX = 3
    settings.INGEST_RETRY_BASE_SECONDS = 60
    data = make_envelope_log(3, bad_lines=1)  # 9 lines: 6 stored, 2 ignored, 1 quarantined
    name = f"{upload_dir(team)}/late.jsonl"
    job = pipeline.create_job(team, source="upload", filename="late.jsonl", storage_name=name, size=len(data))

    before = timezone.now()
    first = pipeline.run_job(job.pk)
    after = timezone.now()
    assert (first.status, first.attempts, first.finished) == ("retrying", 1, None)
    assert "cannot open" in first.error and name in first.error
    assert before + timedelta(seconds=60) <= first.retry_at <= after + timedelta(seconds=60)
    page = _page(alice_client, first)
    assert "retrying" in page and "Attempt 1 of 4 failed" in page and "cannot open" in page
    assert first.retry_at.strftime("%Y-%m-%d %H:%M:%S") in page

    # A delivery before the retry is due leaves the job alone; the beat's sweep waits for it too.
    assert pipeline.run_job(job.pk).attempts == 1
    assert job.pk not in pipeline.stalled_jobs()
    assert job.pk in pipeline.stalled_jobs(now=first.retry_at)

    _falls_due(job)
    before = timezone.now()
    second = pipeline.run_job(job.pk)
    after = timezone.now()
    assert (second.status, second.attempts) == ("retrying", 2)
    assert before + timedelta(seconds=120) <= second.retry_at <= after + timedelta(seconds=120)  # doubled

    ingest_storage().save(name, ContentFile(data))  # the file arrives in the storage
    _falls_due(job)
    done = pipeline.run_job(job.pk)
    assert (done.status, done.attempts, done.error, done.retry_at) == ("done", 3, "", None)
    assert (done.lines_read, done.stored, done.ignored, done.quarantined) == (9, 6, 2, 1)
    assert done.calls_stored == ToolCall.objects.filter(job=done).count() == 3
    page = _page(alice_client, done)
    assert "3 attempts; the last one succeeded" in page and "Attempt 3" not in page


@pytest.mark.django_db
def test_the_last_retry_gives_up_and_says_why(team, settings, alice_client):
    settings.INGEST_RETRY_MAX = 1
    settings.INGEST_RETRY_BASE_SECONDS = 30
    name = f"{upload_dir(team)}/never.jsonl"
    job = pipeline.create_job(team, source="api", filename="never", storage_name=name)
    assert pipeline.run_job(job.pk).status == "retrying"
    _falls_due(job)
    failed = pipeline.run_job(job.pk)
    assert (failed.status, failed.attempts, failed.retry_at) == ("failed", 2, None)
    assert failed.error.startswith("Gave up after 2 attempts. The last one failed:")
    assert "cannot open" in failed.error and failed.finished is not None
    assert job.pk not in pipeline.stalled_jobs(now=timezone.now() + timedelta(days=1))
    page = _page(alice_client, failed)
    assert "Gave up after 2 attempts" in page and "2 attempts." in page and "Attempt 2 of" not in page


@pytest.mark.django_db
def test_refused_input_fails_at_once_with_its_reason(team, settings):
    settings.INGEST_RETRY_MAX = 3
    settings.INGEST_MAX_BYTES = 1000
    name = store_upload(team, [gzip.compress(make_envelope_log(5))], "bomb.jsonl.gz")
    job = pipeline.create_job(team, source="upload", filename="bomb.jsonl.gz", storage_name=name)
    failed = pipeline.run_job(job.pk)
    assert (failed.status, failed.attempts, failed.retry_at) == ("failed", 1, None)
    assert "decompressed beyond" in failed.error and "Gave up" not in failed.error
    assert not ToolCall.objects.filter(team=team).exists()


@pytest.fixture
def unreachable_storage(settings):
    """The ingest storage is an S3 endpoint where nothing listens (the object store is down)."""
    from botocore.config import Config

    settings.STORAGES = {
        **settings.STORAGES,
        "ingest": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": "down",
                "endpoint_url": f"http://127.0.0.1:{free_port()}",
                "access_key": "k",
                "secret_key": "s",
                "region_name": "us-east-1",
                "addressing_style": "path",
                "client_config": Config(retries={"max_attempts": 1}, connect_timeout=2),
            },
        },
    }


@pytest.mark.django_db
def test_an_upload_or_body_the_storage_cannot_take_is_answered_503_and_leaves_nothing(
    alice_client, client, team, team_token, unreachable_storage
):
    spooled_before = set(spool_dir().iterdir())
    page = alice_client.post(
        reverse("ingest_upload", args=[team.slug]),
        {"file": SimpleUploadedFile("a.jsonl", make_envelope_log(2))},
    )
    assert page.status_code == 503 and "could not be kept" in page.content.decode()
    api = client.post(API, make_envelope_log(2), content_type="application/x-ndjson", **bearer(team_token[1]))
    assert api.status_code == 503 and api["Retry-After"] == "30"
    assert "the ingest storage is unavailable" in api.json()["detail"]
    assert not IngestJob.objects.exists() and set(spool_dir().iterdir()) == spooled_before


@pytest.mark.django_db
def test_a_job_whose_storage_is_down_is_retried(team, settings, unreachable_storage):
    settings.INGEST_RETRY_MAX = 2
    job = pipeline.create_job(team, source="api", filename="x", storage_name=f"{upload_dir(team)}/x.jsonl")
    retrying = pipeline.run_job(job.pk)
    assert (retrying.status, retrying.attempts) == ("retrying", 1)
    assert "cannot reach the ingest storage" in retrying.error
