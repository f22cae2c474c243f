"""The three ways in: web upload (streamed to disk, run by the Celery task), POST /api/v1/ingest
(gzip, size limit, rate limit, tokens) and watched folders (tail by offset, rotation, restart)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.teams.models import ApiToken, Membership
from ingest.capture import pipeline
from ingest.capture.uploads import upload_dir
from ingest.capture.models import Agent, IngestJob, ToolCall, WatchedFile, WatchedFolder
from ingest.capture.watch import WatchPathError, scan_all, validate_watch_path
from tests.conftest import make_envelope_log

API = "/api/v1/ingest"


def content_sha(i: int, *, session: str = "s-1", seed: str = "x", size: int = 2000) -> str:
    body = (f"{seed}:{session}:{i}:" * (size // 8 + 1))[:size]
    return hashlib.sha256(body.encode()).hexdigest()


def bearer(plaintext: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    # Rate-limit counters need no reset: they are keyed by the token's random key id.
    settings.MEDIA_ROOT = tmp_path / "media"


def spooled_files(settings) -> list:
    root = settings.MEDIA_ROOT / "ingest"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


# --- web upload ----------------------------------------------------------------------------------


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
    # Kept where it was written, byte for byte, under the team's upload folder.
    assert job.path.startswith(str(upload_dir(team)))
    with open(job.path, "rb") as f:
        assert f.read() == data
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
    with open(job.path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256(data).hexdigest()


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


# --- POST /api/v1/ingest --------------------------------------------------------------------------


def test_api_ingests_gzip_and_reingesting_stores_nothing_new(client, team, team_token):
    _, plaintext = team_token
    data = make_envelope_log(4, bad_lines=2)
    response = client.post(
        API,
        gzip.compress(data),
        content_type="application/x-ndjson",
        HTTP_CONTENT_ENCODING="gzip",
        **bearer(plaintext),
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "done" and body["format"] == "envelope" and body["source"] == "api"
    assert (body["lines_read"], body["stored"], body["ignored"], body["quarantined"]) == (12, 8, 2, 2)
    assert body["reconciles"] is True and body["calls_stored"] == 4
    job = IngestJob.objects.get(code=body["code"])
    assert job.team == team
    with open(job.path, "rb") as f:
        assert f.read() == data  # kept decompressed

    again = client.post(API, gzip.compress(data), content_type="application/gzip", **bearer(plaintext)).json()
    assert (again["stored"], again["duplicate"], again["calls_stored"]) == (0, 8, 0)
    assert ToolCall.objects.filter(team=team).count() == 4

    status = client.get(f"{API}/{body['code']}", **bearer(plaintext))
    assert status.status_code == 200 and status.json()["stored"] == 8


def test_api_accepts_plain_jsonl_and_concatenated_gzip_members(client, team, team_token):
    _, plaintext = team_token
    first, second = make_envelope_log(2, session="a"), make_envelope_log(2, session="b")
    body = gzip.compress(first) + gzip.compress(second)  # `cat a.gz b.gz`
    response = client.post(API, body, content_type="application/gzip", **bearer(plaintext))
    assert response.status_code == 200 and response.json()["calls_stored"] == 4
    plain = client.post(
        API, make_envelope_log(1, session="c"), content_type="application/x-ndjson", **bearer(plaintext)
    )
    assert plain.status_code == 200 and plain.json()["calls_stored"] == 1


def test_api_size_limit_applies_to_the_body_and_to_the_decompressed_data(client, team, team_token, settings):
    _, plaintext = team_token
    settings.INGEST_API_MAX_BYTES = 5_000
    data = make_envelope_log(5)
    assert len(data) > 5_000
    response = client.post(API, data, content_type="application/x-ndjson", **bearer(plaintext))
    assert response.status_code == 413
    assert (
        "larger than the ingest limit" in response.json()["detail"]
        and "INGEST_API_MAX_BYTES" in response.json()["detail"]
    )
    # A small gzip that unpacks past the limit (a gzip bomb) is refused the same way.
    bomb = gzip.compress(b"\n" * 1_000_000)
    assert len(bomb) < 5_000
    response = client.post(API, bomb, content_type="application/gzip", **bearer(plaintext))
    assert response.status_code == 413
    assert not IngestJob.objects.exists() and spooled_files(settings) == []


def test_api_rejects_broken_gzip_empty_body_and_unknown_format(client, team, team_token, settings):
    _, plaintext = team_token
    truncated = gzip.compress(make_envelope_log(2))[:-20]
    response = client.post(API, truncated, content_type="application/gzip", **bearer(plaintext))
    assert response.status_code == 400 and "gzip" in response.json()["detail"]
    garbage = b"\x1f\x8b" + os.urandom(64)
    assert client.post(API, garbage, content_type="application/gzip", **bearer(plaintext)).status_code == 400
    response = client.post(API, b"", content_type="application/x-ndjson", **bearer(plaintext))
    assert response.status_code == 400 and "empty" in response.json()["detail"]
    response = client.post(
        f"{API}?format=xml", b"{}\n", content_type="application/x-ndjson", **bearer(plaintext)
    )
    assert response.status_code == 400 and "Unknown format" in response.json()["detail"]
    assert not IngestJob.objects.exists() and spooled_files(settings) == []


def test_api_rate_limit_per_token_answers_429_with_retry_after(client, team, team_token, settings):
    settings.INGEST_API_RATE_PER_MINUTE = 2
    _, plaintext = team_token
    _, other_plaintext = ApiToken.issue(team, "second")
    for n in range(2):
        ok = client.post(
            API, make_envelope_log(1, seed=str(n)), content_type="application/x-ndjson", **bearer(plaintext)
        )
        assert ok.status_code == 200
    limited = client.post(
        API, make_envelope_log(1, seed="3"), content_type="application/x-ndjson", **bearer(plaintext)
    )
    assert limited.status_code == 429
    assert 1 <= int(limited["Retry-After"]) <= 61
    assert "2 ingest requests per minute" in limited.json()["detail"]
    assert IngestJob.objects.count() == 2  # the refused batch was not read
    # The budget is per token.
    other = client.post(
        API, make_envelope_log(1, seed="4"), content_type="application/x-ndjson", **bearer(other_plaintext)
    )
    assert other.status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", API), ("get", f"{API}/00000000-0000-0000-0000-000000000000"), ("get", "/api/v1/agents")],
)
def test_api_needs_a_valid_token(client, team, team_token, method, path):
    token, plaintext = team_token
    kwargs = {"content_type": "application/x-ndjson"} if method == "post" else {}
    data = (make_envelope_log(1),) if method == "post" else ()
    assert getattr(client, method)(path, *data, **kwargs).status_code == 401
    assert getattr(client, method)(path, *data, **kwargs, **bearer(plaintext + "x")).status_code == 401
    token.revoke()
    assert getattr(client, method)(path, *data, **kwargs, **bearer(plaintext)).status_code == 401
    assert not IngestJob.objects.exists()


def test_api_job_status_and_agents_are_team_scoped(client, team, team_token, user_factory, team_factory):
    _, plaintext = team_token
    other = team_factory("Other", user_factory("bob"))
    _, other_plaintext = ApiToken.issue(other, "theirs")
    theirs = client.post(
        API, make_envelope_log(2, session="b"), content_type="x", **bearer(other_plaintext)
    ).json()
    ours = client.post(API, make_envelope_log(3), content_type="x", **bearer(plaintext)).json()
    assert client.get(f"{API}/{theirs['code']}", **bearer(plaintext)).status_code == 404
    assert client.get(f"{API}/{ours['code']}", **bearer(plaintext)).status_code == 200

    agents = client.get("/api/v1/agents", **bearer(plaintext)).json()
    assert agents["count"] == 1
    (agent,) = agents["items"]
    assert (agent["family"], agent["name"], agent["version"], agent["calls"]) == (
        "claude-code",
        "claude-code",
        "2.0.14",
        3,
    )
    assert Agent.objects.filter(team=other).count() == 1  # theirs exists, but is not listed for us


def test_api_can_queue_instead_of_waiting(
    client, team, team_token, eager_celery, django_capture_on_commit_callbacks
):
    _, plaintext = team_token
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            f"{API}?wait=false&filename=batch-7", make_envelope_log(2), content_type="x", **bearer(plaintext)
        )
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["filename"] == "batch-7" and body["lines_read"] == 0
    for callback in callbacks:
        callback()  # what the commit would do: the Celery task (eager here) runs the job
    job = IngestJob.objects.get(code=body["code"])
    assert job.status == "done" and job.calls_stored == 2 and job.reconciles


def test_api_is_in_the_openapi_document(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert {"/api/v1/ingest", "/api/v1/ingest/{code}", "/api/v1/agents"} <= set(schema["paths"])


# --- watched folders ------------------------------------------------------------------------------


@pytest.fixture
def watched(team, tmp_path):
    folder_path = tmp_path / "logs"
    folder_path.mkdir()
    folder = WatchedFolder.objects.create(team=team, path=str(folder_path), pattern="*.jsonl")
    return folder


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def test_tail_reads_only_complete_lines_and_continues_from_its_offset(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    lines = lines_of(make_envelope_log(3))  # 8 lines
    with open(log, "wb") as f:
        f.writelines(lines[:4])  # initialize + the first call
        f.write(lines[4][:50])  # half of the second call's request
    (scan,) = scan_all()
    assert (scan.files_new, scan.files_read, scan.errors) == (1, 1, [])
    wf = WatchedFile.objects.get()
    assert wf.offset == sum(map(len, lines[:4])) and wf.line_no == 4
    assert (wf.device, wf.inode) == (os.stat(log).st_dev, os.stat(log).st_ino)
    job = wf.job
    assert job.source == "watch" and job.status == "running" and job.calls_stored == 1

    scan_all()  # nothing new: nothing changes
    assert WatchedFile.objects.get().offset == wf.offset

    with open(log, "ab") as f:
        f.write(lines[4][50:])
        f.writelines(lines[5:])
    scan_all()
    wf.refresh_from_db()
    job.refresh_from_db()
    assert wf.offset == os.path.getsize(log) and wf.line_no == 8
    assert job.calls_stored == 3 and job.lines_read == 8 and job.reconciles
    hashes = set(ToolCall.objects.filter(team=team).values_list("bulk_arguments__sha256", flat=True))
    assert hashes == {content_sha(i) for i in (1, 2, 3)}


def test_a_request_waits_for_its_response_across_scans(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    lines = lines_of(make_envelope_log(1))
    with open(log, "wb") as f:
        f.writelines(lines[:3])  # the request, not yet its response
    scan_all()
    assert not ToolCall.objects.exists()  # an open call is not stored half-done
    with open(log, "ab") as f:
        f.write(lines[3])
    scan_all()
    call = ToolCall.objects.get()
    assert call.unanswered is False and call.is_error is False


def test_rotation_finishes_the_old_file_and_starts_the_new_one(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    old = lines_of(make_envelope_log(3, session="old"))
    with open(log, "wb") as f:
        f.writelines(old[:4])
    scan_all()
    first = WatchedFile.objects.get()

    # logrotate: rename, the writer finishes its last lines into the renamed file, a new file appears.
    os.rename(log, log + ".1")
    with open(log + ".1", "ab") as f:
        f.writelines(old[4:7])  # the third call's response never comes
    new = lines_of(make_envelope_log(2, session="new"))
    with open(log, "wb") as f:
        f.writelines(new)

    (scan,) = scan_all()
    assert scan.errors == [] and scan.files_new == 1
    first.refresh_from_db()
    assert first.path == log + ".1" and first.offset == sum(map(len, old[:7]))
    second = WatchedFile.objects.exclude(pk=first.pk).get()
    assert (
        second.path == log and second.inode == os.stat(log).st_ino and second.offset == os.path.getsize(log)
    )
    assert first.job_id != second.job_id
    assert first.job.status == "running"  # maybe the writer is not done with it yet

    (scan,) = scan_all()  # quiet since the last scan: finished
    assert scan.files_finished == 1
    first.refresh_from_db()
    old_job = first.job
    assert old_job.status == "done" and old_job.reconciles and old_job.lines_read == 7
    old_calls = ToolCall.objects.filter(job=old_job)
    assert old_calls.count() == 3 and old_calls.filter(unanswered=True).count() == 1
    assert ToolCall.objects.filter(job=second.job).count() == 2

    scan_all()  # a finished file is left alone
    assert IngestJob.objects.get(pk=old_job.pk).finished == old_job.finished


def test_restart_continues_from_the_database_with_the_same_result_as_one_pass(
    watched, team, team_factory, alice, tmp_path
):
    data = make_envelope_log(6, bad_lines=1)
    lines = lines_of(data)
    log = os.path.join(watched.path, "proxy.jsonl")
    with open(log, "wb") as f:
        f.writelines(lines[:5])
    scan_all()
    # A "restart": nothing survives but the database; a new scan picks up the rows.
    for start, cut in ((5, 9), (9, len(lines))):
        with open(log, "ab") as f:
            f.writelines(lines[start:cut])
        scan_all()
    wf = WatchedFile.objects.get()
    assert wf.offset == len(data) and wf.line_no == len(lines)
    tailed = wf.job

    reference_team = team_factory("Reference", alice)
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(data)
    once = pipeline.ingest_path(reference_team, whole)
    counts = ("lines_read", "stored", "duplicate", "ignored", "quarantined", "calls_stored")
    assert [getattr(tailed, c) for c in counts] == [getattr(once, c) for c in counts]
    assert sorted(ToolCall.objects.filter(team=team).values_list("dedupe_key", flat=True)) == sorted(
        ToolCall.objects.filter(team=reference_team).values_list("dedupe_key", flat=True)
    )


def test_truncated_file_starts_over_without_storing_twice(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    with open(log, "wb") as f:
        f.write(make_envelope_log(3))
    scan_all()
    with open(log, "wb") as f:  # copytruncate-style rotation: same inode, back to zero
        f.write(make_envelope_log(1))
    scan_all()
    wf = WatchedFile.objects.get()
    assert wf.offset == os.path.getsize(log)
    assert ToolCall.objects.filter(team=team).count() == 3  # the re-seen first call is a duplicate
    assert wf.job.duplicate == 2


def test_only_matching_files_are_tailed_and_a_missing_folder_is_reported(watched, team):
    with open(os.path.join(watched.path, "notes.txt"), "wb") as f:
        f.write(make_envelope_log(1))
    os.mkdir(os.path.join(watched.path, "sub.jsonl"))
    (scan,) = scan_all()
    assert scan.files_seen == 0 and not WatchedFile.objects.exists()
    os.rmdir(os.path.join(watched.path, "sub.jsonl"))
    os.remove(os.path.join(watched.path, "notes.txt"))
    os.rmdir(watched.path)
    (scan,) = scan_all()
    watched.refresh_from_db()
    assert "cannot read" in watched.last_error and watched.last_scan_at is not None


def test_the_periodic_task_scans_enabled_folders_only(watched, team, eager_celery):
    from config.celery import app
    from ingest.capture.tasks import scan_watched_folders

    assert app.conf.beat_schedule["scan-watched-folders"]["task"] == "ingest.tasks.scan_watched_folders"
    with open(os.path.join(watched.path, "a.jsonl"), "wb") as f:
        f.write(make_envelope_log(1))
    watched.enabled = False
    watched.save()
    assert scan_watched_folders.delay().get() == 0
    watched.enabled = True
    watched.save()
    assert scan_watched_folders.delay().get() == 1
    assert ToolCall.objects.filter(team=team).count() == 1


def test_watch_roots_restrict_where_folders_may_be(settings, tmp_path):
    allowed = tmp_path / "allowed"
    (allowed / "proxy").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    settings.INGEST_WATCH_DIRS = []
    assert validate_watch_path(str(tmp_path / "elsewhere")) == (tmp_path / "elsewhere").resolve()
    settings.INGEST_WATCH_DIRS = [str(allowed)]
    assert validate_watch_path(str(allowed / "proxy")) == (allowed / "proxy").resolve()
    for bad, why in [
        (str(tmp_path / "elsewhere"), "outside the allowed folders"),
        (str(allowed / "proxy" / ".." / ".." / "elsewhere"), "outside the allowed folders"),
        ("relative/path", "not an absolute path"),
        (str(allowed / "missing"), "does not exist"),
        (__file__, "not a directory"),
    ]:
        with pytest.raises(WatchPathError, match=why):
            validate_watch_path(bad)


def test_a_symlink_out_of_the_allowed_roots_is_not_read(settings, team, tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    secret = tmp_path / "secret.jsonl"
    secret.write_bytes(make_envelope_log(1))
    (allowed / "link.jsonl").symlink_to(secret)
    settings.INGEST_WATCH_DIRS = [str(allowed)]
    WatchedFolder.objects.create(team=team, path=str(allowed), pattern="*.jsonl")
    scan_all()
    assert not WatchedFile.objects.exists() and not ToolCall.objects.exists()


def test_only_admins_add_watched_folders(client, team, user_factory, tmp_path, settings):
    member = user_factory("mo")
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    client.force_login(member)
    url = reverse("ingest_watch", args=[team.slug])
    page = client.get(url)
    assert page.status_code == 200 and b"Only team admins can add" in page.content
    assert (
        client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "auto"}).status_code == 404
    )
    assert not WatchedFolder.objects.exists()

    admin = team.memberships.get(role=Membership.Role.OWNER).user
    client.force_login(admin)
    settings.INGEST_WATCH_DIRS = [str(tmp_path / "only-here")]
    refused = client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "auto"})
    assert refused.status_code == 400 and b"outside the allowed folders" in refused.content
    settings.INGEST_WATCH_DIRS = []
    ok = client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "envelope"})
    assert ok.status_code == 302
    folder = WatchedFolder.objects.get()
    assert (folder.team, folder.path, folder.format) == (team, str(tmp_path.resolve()), "envelope")
    again = client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "auto"})
    assert again.status_code == 400 and b"already watched" in again.content


def test_the_json_schema_of_the_status_matches_the_job(client, team, team_token):
    _, plaintext = team_token
    body = client.post(API, make_envelope_log(1), content_type="x", **bearer(plaintext)).json()
    job = IngestJob.objects.get(code=body["code"])
    assert body["url"] == f"/api/v1/ingest/{job.code}"
    assert json.loads(json.dumps(body))["total_bytes"] == job.total_bytes == len(make_envelope_log(1))


def test_gzip_sniffing_without_a_header(client, team, team_token):
    _, plaintext = team_token
    body = gzip.compress(make_envelope_log(2))
    response = client.post(API, body, content_type="application/octet-stream", **bearer(plaintext))
    assert response.status_code == 200 and response.json()["calls_stored"] == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_the_logging_proxy_pushes_to_the_real_api(live_server, team, settings, tmp_path):
    """A real MCP client (official SDK) through the proxy with --push: every envelope it pushed is
    accounted for by the API's jobs, and the pasted text's call carries its exact sha256."""
    import sys
    from pathlib import Path

    import anyio
    from mcp import Client, StdioServerParameters

    root = Path(__file__).resolve().parents[1]
    _, plaintext = ApiToken.issue(team, "proxy")
    text = "".join(f"line {n}: the quick brown fox\n" for n in range(200))  # ~6 KB, a bulk argument
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcptax.proxy",
            "--server-label",
            "echo",
            "--push",
            f"{live_server.url}/api/v1/ingest",
            "--token",
            plaintext,
            "--",
            sys.executable,
            str(root / "tests" / "servers" / "echo_hash_server.py"),
        ],
        cwd=str(root),
        env={"PYTHONPATH": str(root)},
    )

    async def paste() -> None:
        with anyio.fail_after(60):
            async with Client(params) as client:
                result = await client.call_tool("digest", {"text": text})
        assert not result.is_error

    anyio.run(paste)
    # The proxy drains its push buffer before it exits; the API ingests each batch as it arrives.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not ToolCall.objects.filter(team=team, tool="digest").exists():
        time.sleep(0.2)
    jobs = list(IngestJob.objects.filter(team=team, source="api"))
    assert jobs and all(j.status == "done" and j.reconciles for j in jobs)
    call = ToolCall.objects.get(team=team, tool="digest")
    (bulk,) = call.bulk_arguments.all()
    assert bulk.sha256 == hashlib.sha256(text.encode()).hexdigest() and bulk.pointer == "/text"
    # The proxy held the request back until its response could travel in the same batch, and the
    # session still knows its client in batches after the one holding `initialize`.
    assert not call.unanswered and call.response_ts is not None and call.is_error is False
    assert call.agent is not None and call.agent.name == "mcp"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_upload_and_api_jobs_run_on_a_real_worker(
    postgres_and_redis, celery_worker_process, alice_client, team, settings
):
    """PostgreSQL + Redis: the upload's job goes through the broker to a real `celery worker`, and the
    API's queued mode too; the rate limit counts in the shared (Redis) cache."""
    data = make_envelope_log(5, bad_lines=1)
    response = alice_client.post(
        reverse("ingest_upload", args=[team.slug]), {"file": SimpleUploadedFile("w.jsonl", data)}
    )
    assert response.status_code == 302
    _, plaintext = ApiToken.issue(team, "worker-test")
    queued = alice_client.post(
        f"{API}?wait=false",
        gzip.compress(make_envelope_log(2, session="api")),
        content_type="application/gzip",
        **bearer(plaintext),
    )
    assert queued.status_code == 202
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if IngestJob.objects.filter(team=team, status="done").count() == 2:
            break
        time.sleep(0.25)
    upload_job = IngestJob.objects.get(team=team, source="upload")
    api_job = IngestJob.objects.get(team=team, source="api")
    assert upload_job.status == "done" and upload_job.worker.split(":")[-1] != str(os.getpid())
    assert (upload_job.lines_read, upload_job.stored, upload_job.quarantined, upload_job.calls_stored) == (
        13,
        10,
        1,
        5,
    )
    assert api_job.status == "done" and api_job.calls_stored == 2 and api_job.reconciles

    settings.INGEST_API_RATE_PER_MINUTE = 2  # one request already counted for this token
    ok = alice_client.post(API, make_envelope_log(1, seed="r"), content_type="x", **bearer(plaintext))
    assert ok.status_code == 200
    assert (
        alice_client.post(
            API, make_envelope_log(1, seed="s"), content_type="x", **bearer(plaintext)
        ).status_code
        == 429
    )
