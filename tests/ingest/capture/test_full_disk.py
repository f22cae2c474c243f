"""A full disk, for real: a small tmpfs mounted where the upload spool or the ingest storage lives
(tests.helpers.small_filesystem), filled by the upload itself.

What failed: an upload into a full spool was a "Server Error (500)" (the API's an HTML 500 without
Retry-After), and a long line kept while the disk filled stayed truncated under its sha256 name,
then was skipped as "already existing" by the retry.
"""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.teams.models import ApiToken
from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord
from ingest.capture.storage import ingest_storage
from tests.conftest import make_envelope_log
from tests.helpers import grow_filesystem, small_filesystem
from tests.ingest.capture.logs import API, bearer, stored_bytes, stored_names

LARGE = 2_200_000  # the 2.2 MB upload of the report, into a 1 MiB spool


@pytest.fixture
def full_spool(settings, tmp_path):
    """VAR_DIR (and so the upload spool, VAR_DIR/spool) on a 1 MiB filesystem."""
    var = tmp_path / "small-var"
    with small_filesystem(var, "1m"):
        settings.VAR_DIR = var
        yield var / "spool"


def _log_of_size(size: int) -> bytes:
    data = b""
    n = 0
    while len(data) < size:
        data += make_envelope_log(50, session=f"s-{n}", content_bytes=4000)
        n += 1
    return data


def _nothing_kept(spool) -> None:
    assert not IngestJob.objects.exists()
    assert list(spool.iterdir()) == [] if spool.exists() else True
    assert stored_names() == []


def test_an_api_push_into_a_full_spool_is_507_json_with_retry_after_and_keeps_nothing(
    client, team, full_spool
):
    _, plaintext = ApiToken.issue(team, "push")
    response = client.post(API, _log_of_size(LARGE), content_type="application/x-ndjson", **bearer(plaintext))
    assert response.status_code == 507
    assert response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert "upload spool is full" in detail and "Nothing was kept" in detail
    assert int(response["Retry-After"]) > 0
    _nothing_kept(full_spool)


def test_a_web_upload_into_a_full_spool_says_why_and_keeps_nothing(alice_client, team, full_spool):
    upload = SimpleUploadedFile("big.jsonl", _log_of_size(LARGE), content_type="application/x-ndjson")
    response = alice_client.post(
        reverse("ingest_upload", args=[team.slug]), {"format": "auto", "file": upload}
    )
    assert response.status_code == 507, response.content.decode()[-3000:]
    assert int(response["Retry-After"]) > 0
    page = response.content.decode()
    assert "upload spool is full" in page and "Nothing was kept" in page
    _nothing_kept(full_spool)


def _long_line_log(tmp_path) -> tuple[object, bytes]:
    """A log with a 1,200,037-byte broken line (the report's line 607): quarantined, and over
    INGEST_MAX_RAW_BYTES, so the whole line is kept as a file named by its sha256."""
    line = b"p" * 1_200_037
    lines = make_envelope_log(2).splitlines(keepends=True)
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join([*lines[:3], line + b"\n", *lines[3:]]))
    return path, line


@pytest.mark.django_db
def test_a_long_line_kept_while_the_disk_fills_is_never_left_truncated(team, settings, tmp_path):
    if "ingest" in settings.STORAGES and "S3" in settings.STORAGES["ingest"]["BACKEND"]:
        pytest.skip("the ingest storage is S3 in this leg: an object appears whole or not at all")
    path, line = _long_line_log(tmp_path)
    name = f"ingest/lines/{hashlib.sha256(line).hexdigest()[:2]}/{hashlib.sha256(line).hexdigest()}"
    media = tmp_path / "small-media"
    with small_filesystem(media, "1m"):
        settings.MEDIA_ROOT = media
        job = pipeline.create_job(team, source="upload", filename="long.jsonl", path=path)
        pipeline.run_job(job.pk)
        job.refresh_from_db()
        assert job.status == IngestJob.Status.RETRYING and "No space left" in job.error
        # Nothing under the line's name (a partial write would later pass for the line).
        assert not (media / name).exists()
        assert [p for p in media.rglob("*") if p.is_file()] == []

        grow_filesystem(media, "8m")  # the operator freed space; the retry is due
        IngestJob.objects.filter(pk=job.pk).update(retry_at=job.created)
        pipeline.run_job(job.pk)
        job.refresh_from_db()
        assert job.status == IngestJob.Status.DONE
        kept = (media / name).read_bytes()
        assert kept == line and hashlib.sha256(kept).hexdigest() == name.rsplit("/", 1)[1]


@pytest.mark.django_db
def test_a_truncated_file_under_a_lines_name_is_written_again_not_skipped(team, tmp_path):
    path, line = _long_line_log(tmp_path)
    digest = hashlib.sha256(line).hexdigest()
    name = f"ingest/lines/{digest[:2]}/{digest}"
    # What a full disk left before: the first 466,944 bytes under the line's name.
    assert ingest_storage().save(name, ContentFile(line[:466_944])) == name
    job = pipeline.create_job(team, source="upload", filename="long.jsonl", path=path)
    pipeline.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == IngestJob.Status.DONE
    record = LineRecord.objects.get(job=job, raw_file=name)
    assert record.raw_sha256 == digest
    assert stored_bytes(name) == line
