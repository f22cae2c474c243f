"""Limits on ingest input that can grow (ingest.capture.pipeline.limits and the readers using it):
decompressed bytes for every way in, lines too long to keep in a row, detection past a long
first line."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord, ToolCall
from ingest.capture.pipeline.reading import detect
from tests.conftest import make_envelope_log
from tests.ingest.capture.logs import LOGS, EnvelopeLog, assert_reconciles, stored_bytes, text_of

MIB = 1024 * 1024


def _bomb(tmp_path, size: int):
    """A small .gz of a valid envelope log followed by ``size`` bytes of newlines."""
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(make_envelope_log(1))
        f.write(b"\n" * size)
    return path


def _refused_whole(job: IngestJob, limit: int) -> None:
    assert job.status == IngestJob.Status.FAILED
    assert f"decompressed beyond 1.0 MB ({limit} bytes) (INGEST_MAX_BYTES); refused, nothing stored" in (
        job.error
    )
    assert job.lines_read == 0 and job.stored == 0 and job.ignored == 0
    assert not LineRecord.objects.filter(job=job).exists() and not ToolCall.objects.exists()


@pytest.mark.django_db
def test_a_gzip_bomb_upload_is_refused_before_anything_is_stored(
    alice_client, team, settings, eager_celery, django_capture_on_commit_callbacks, tmp_path
):
    settings.INGEST_MAX_BYTES = MIB
    path = _bomb(tmp_path, 4 * MIB)
    assert path.stat().st_size < 20_000  # a ratio bomb: small on the wire, 4 MiB of lines inside
    upload = SimpleUploadedFile("bomb.jsonl.gz", path.read_bytes(), content_type="application/gzip")
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("ingest_upload", args=[team.slug]), {"file": upload})
    assert response.status_code == 302
    _refused_whole(IngestJob.objects.get(team=team), MIB)


@pytest.mark.django_db
def test_the_ingest_command_refuses_a_bomb_and_takes_an_override(team, settings, tmp_path):
    settings.INGEST_MAX_BYTES = MIB
    path = _bomb(tmp_path, 2 * MIB)
    with pytest.raises(CommandError):
        call_command("ingest", str(path), "--json")
    _refused_whole(IngestJob.objects.get(), MIB)
    # Within the limit (here raised for this run only) the same file ingests and reconciles.
    job = pipeline.ingest_path(team, path, max_bytes=3 * MIB)
    assert job.status == IngestJob.Status.DONE and job.calls_stored == 1
    assert_reconciles(job, len(gzip.decompress(path.read_bytes()).splitlines()))


@pytest.mark.django_db
def test_a_gzip_file_within_the_limit_ingests_as_before(team, settings, tmp_path):
    settings.INGEST_MAX_BYTES = MIB
    path = tmp_path / "ok.jsonl.gz"
    data = make_envelope_log(3)
    path.write_bytes(gzip.compress(data))
    job = pipeline.ingest_path(team, path)
    assert job.status == IngestJob.Status.DONE and job.calls_stored == 3
    assert_reconciles(job, data.count(b"\n"))


def _kept_file(record: LineRecord) -> bytes:
    return stored_bytes(record.raw_file)  # from the ingest storage, whichever backend it is


@pytest.mark.django_db
def test_a_long_junk_line_keeps_a_bounded_head_and_a_file_with_its_sha256(team, settings, tmp_path):
    """A 3 MiB line that is not JSON: quarantined, but the row holds at most INGEST_MAX_RAW_BYTES;
    the whole line is a content-addressed file, with its sha256 and size on the row."""
    settings.INGEST_MAX_RAW_BYTES = 64 * 1024
    junk = b"x" * (3 * MIB) + "é".encode() * 10
    data = make_envelope_log(2)
    lines = data.splitlines(keepends=True)
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b"".join([*lines[:3], junk + b"\r\n", *lines[3:]]))
    job = pipeline.ingest_path(team, path)
    assert_reconciles(job, len(lines) + 1)
    assert job.calls_stored == 2 and job.quarantined_reasons == {"invalid_json": 1}
    record = LineRecord.objects.get(job=job, status="quarantined")
    assert record.line_no == 4 and record.raw_bytes == len(junk)
    assert len(record.raw.encode()) <= 64 * 1024 and junk.startswith(record.raw.encode())
    assert record.raw_sha256 == hashlib.sha256(junk).hexdigest()
    assert record.raw_file.endswith(record.raw_sha256) and _kept_file(record) == junk
    assert record.exact_raw() == junk


@pytest.mark.django_db
def test_a_line_over_the_line_limit_is_never_held_and_kept_as_a_file(team, settings, tmp_path):
    settings.INGEST_MAX_LINE_BYTES = MIB
    settings.INGEST_MAX_RAW_BYTES = 4096
    junk = b'{"session_id":"s","direction":"c2s","raw":"' + b"y" * (5 * MIB) + b'"}'
    data = make_envelope_log(1)
    path = tmp_path / "long.jsonl.gz"
    path.write_bytes(gzip.compress(junk + b"\n" + data))
    job = pipeline.ingest_path(team, path)
    assert_reconciles(job, 1 + data.count(b"\n"))
    assert job.calls_stored == 1 and job.quarantined_reasons == {"oversize_line": 1}
    record = LineRecord.objects.get(job=job, status="quarantined")
    assert record.line_no == 1 and record.raw_bytes == len(junk) and len(record.raw) == 4096
    assert record.raw_sha256 == hashlib.sha256(junk).hexdigest() and _kept_file(record) == junk


@pytest.mark.django_db
def test_a_long_line_that_is_a_valid_frame_is_still_a_call(team, settings, tmp_path):
    """A 3 MiB bulk argument in one envelope frame: over the raw-text limit, under the line limit,
    so it is parsed and stored as a call, not quarantined."""
    settings.INGEST_MAX_RAW_BYTES = 64 * 1024
    text = text_of(6 * MIB)
    log = EnvelopeLog().initialize().call("write_file", {"path": "a.txt", "content": text})
    job = pipeline.ingest_path(team, log.write(tmp_path / "bulk.jsonl"))
    assert_reconciles(job, len(log.lines))
    assert job.quarantined == 0 and job.calls_stored == 1
    bulk = ToolCall.objects.get(job=job).bulk_arguments.get()
    assert bulk.sha256 == hashlib.sha256(text.encode()).hexdigest()


def _long_first_line(kind: str) -> bytes:
    padding = "p" * (100 * 1024)
    if kind == "envelope":
        log = EnvelopeLog().initialize().call("write_file", {"path": "a", "content": padding})
        # The call's request (with its 100 KiB argument) first, before any short line.
        return b"".join([log.lines[3], *log.lines[:3], log.lines[4]])
    record = {"type": "summary", "summary": padding, "leafUuid": "u1", "sessionId": "s1"}
    return json.dumps(record).encode() + b"\n" + (LOGS / "claude_code_session.jsonl").read_bytes()


@pytest.mark.parametrize(("kind", "expected"), [("envelope", "envelope"), ("claude", "claude-code")])
def test_detection_reads_past_a_first_line_longer_than_its_window(kind, expected, tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(_long_first_line(kind))
    assert path.read_bytes().index(b"\n") > 100 * 1024
    with open(path, "rb") as f:
        assert detect(f) == (expected, "")
        assert f.tell() == 0


def test_detection_skips_a_first_line_over_the_line_limit(settings, tmp_path):
    settings.INGEST_MAX_LINE_BYTES = 200 * 1024
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"z" * (300 * 1024) + b"\n" + make_envelope_log(1))
    with open(path, "rb") as f:
        assert detect(f) == ("envelope", "")
