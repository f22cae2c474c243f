"""The web upload (ingest.capture.uploads through the upload view): streamed to disk, size limit,
form errors, login, CSRF and team scope."""

from __future__ import annotations

import hashlib

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from ingest.capture.models import (
    IngestJob,
    ToolCall,
)
from ingest.capture.uploads import upload_dir
from tests.conftest import make_envelope_log
from tests.ingest.capture.logs import (
    content_sha,
    spooled_files,
    stored_bytes,
)


def test_upload_streams_to_disk_and_the_task_ingests_it(
    alice_client, team, settings, eager_celery, django_capture_on_commit_callbacks
):
    data = make_envelope_log(3, bad_lines=1)
    upload = SimpleUploadedFile("proxy session.jsonl", data, content_type="application/x-ndjson")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = alice_client.post(
            reverse("ingest_upload", args=[team.slug]), {"format": "auto", "file": upload}
        )
    assert len(callbacks) == 1  # the job is enqueued once the request's transaction commits
    job = IngestJob.objects.get(team=team)
    assert response.status_code == 302 and response["Location"] == reverse(
        "ingest_job", args=[team.slug, job.code]
    )
    # Kept byte for byte in the ingest storage, under the team's upload folder; nothing left spooled.
    assert job.storage_name.startswith(upload_dir(team) + "/") and job.path == ""
    assert stored_bytes(job.storage_name) == data
    assert spooled_files(settings) == [job.storage_name]
    assert (job.source, job.filename, job.created_by) == (
        "upload",
        "proxy session.jsonl",
        team.memberships.get().user,
    )
    assert job.status == "done" and job.format == "envelope"
    assert (job.lines_read, job.stored, job.ignored, job.quarantined, job.duplicate) == (9, 6, 2, 1, 0)
    assert job.reconciles and job.calls_stored == 3
    hashes = set(ToolCall.objects.filter(job=job).values_list("bulk_arguments__sha256", flat=True))
    assert hashes == {content_sha(i) for i in (1, 2, 3)}


def test_upload_handler_never_holds_the_file_in_memory(alice_client, team, settings, monkeypatch):
    """Bigger than FILE_UPLOAD_MAX_MEMORY_SIZE: still written chunk by chunk to its final path."""
    from ingest.capture.uploads import IngestUploadHandler

    chunks: list[int] = []
    original = IngestUploadHandler.receive_data_chunk

    def spy(self, raw_data, start):
        chunks.append(len(raw_data))
        return original(self, raw_data, start)

    monkeypatch.setattr(IngestUploadHandler, "receive_data_chunk", spy)
    data = make_envelope_log(40, content_bytes=100_000)
    assert len(data) > settings.FILE_UPLOAD_MAX_MEMORY_SIZE
    upload = SimpleUploadedFile("big.jsonl", data)
    response = alice_client.post(reverse("ingest_upload", args=[team.slug]), {"file": upload})
    assert response.status_code == 302
    assert len(chunks) > 1 and max(chunks) <= 64 * 1024 * 4
    job = IngestJob.objects.get(team=team)
    assert job.status == "queued" and job.total_bytes == len(data)
    assert hashlib.sha256(stored_bytes(job.storage_name)).hexdigest() == hashlib.sha256(data).hexdigest()


def test_upload_over_the_limit_is_refused_with_a_clear_message(alice_client, team, settings):
    settings.INGEST_MAX_UPLOAD_BYTES = 1000
    upload = SimpleUploadedFile("big.jsonl", make_envelope_log(3))
    response = alice_client.post(reverse("ingest_upload", args=[team.slug]), {"file": upload})
    assert response.status_code == 413
    assert "larger than the upload limit of 1000" in response.content.decode().replace("\xa0", " ")
    assert not IngestJob.objects.exists()
    assert spooled_files(settings) == []  # the partial file is gone


def test_upload_of_an_empty_file_or_nothing_is_a_form_error(alice_client, team, settings):
    url = reverse("ingest_upload", args=[team.slug])
    response = alice_client.post(url, {"file": SimpleUploadedFile("empty.jsonl", b"")})
    assert response.status_code == 400
    assert not IngestJob.objects.exists() and spooled_files(settings) == []
    assert alice_client.post(url, {}).status_code == 400
    assert alice_client.get(url).status_code == 405


def test_upload_needs_a_login_and_csrf(client, team, alice):
    url = reverse("ingest_upload", args=[team.slug])
    response = client.post(url, {"file": SimpleUploadedFile("a.jsonl", make_envelope_log(1))})
    assert response.status_code == 302 and "/login/" in response["Location"]
    strict = type(client)(enforce_csrf_checks=True)
    strict.force_login(alice)
    response = strict.post(url, {"file": SimpleUploadedFile("a.jsonl", make_envelope_log(1))})
    assert response.status_code == 403
    assert not IngestJob.objects.exists()


def test_upload_to_another_team_is_not_found(alice_client, user_factory, team_factory, settings):
    other = team_factory("Other", user_factory("bob"))
    response = alice_client.post(
        reverse("ingest_upload", args=[other.slug]),
        {"file": SimpleUploadedFile("a.jsonl", make_envelope_log(1))},
    )
    assert response.status_code == 404
    assert not IngestJob.objects.exists() and spooled_files(settings) == []


def test_a_csrf_rejected_upload_leaves_no_file_on_disk(team, alice, settings):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    url = reverse("ingest_upload", args=[team.slug])
    # With a CSRF cookie but no token in the form, the check must parse the body (writing the
    # file) to look for the token, and only then refuses.
    assert strict.get(reverse("ingest_home", args=[team.slug])).status_code == 200
    assert "csrftoken" in strict.cookies
    log = SimpleUploadedFile("a.jsonl", make_envelope_log(200), content_type="application/x-ndjson")
    response = strict.post(url, {"file": log})
    assert response.status_code == 403
    assert not IngestJob.objects.exists()
    assert spooled_files(settings) == []
