"""A wrong file ends its job "failed" with the reason and leaves no debris; the quarantine can be
emptied per job and in bulk on its page (in real headless Chromium), and expires on its own
retention (QUARANTINE_RETENTION_DAYS)."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.teams.models import Membership
from ingest.capture import pipeline, retention, storage
from ingest.capture.models import IngestJob, LineRecord
from tests.browser import browser_login
from tests.conftest import ROOT, make_envelope_log

README = ROOT / "README.md"


def _quarantined(job: IngestJob | None = None) -> int:
    lines = LineRecord.objects.filter(status=LineRecord.Status.QUARANTINED)
    return (lines.filter(job=job) if job else lines).count()


@pytest.mark.django_db
def test_an_unrecognised_file_fails_with_the_reason_and_quarantines_nothing(team):
    job = pipeline.ingest_path(team, README)
    assert job.status == IngestJob.Status.FAILED
    assert job.error.startswith("cannot tell the log format (")
    assert (job.lines_read, job.quarantined) == (0, 0)
    assert _quarantined() == 0


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_ingest_command_on_a_readme_exits_1_and_its_job_reads_failed(postgres_and_redis, team):
    from tests.helpers import worker_environment

    done = subprocess.run(
        [sys.executable, "manage.py", "ingest", str(README), "--team", team.slug],
        cwd=ROOT,
        env=worker_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "cannot tell the log format" in done.stderr
    job = IngestJob.objects.get(team=team, filename="README.md")
    assert job.status == "failed" and job.error.startswith("cannot tell the log format")
    assert job.quarantined == 0 and _quarantined() == 0


def _two_jobs_with_bad_lines(team, tmp_path, settings) -> tuple[IngestJob, IngestJob]:
    settings.INGEST_MAX_RAW_BYTES = 64  # longer bad lines are kept whole as files
    a = tmp_path / "a.jsonl"
    a.write_bytes(make_envelope_log(1, session="a", bad_lines=3) + b'{"broken' + b"x" * 200 + b"\n")
    b = tmp_path / "b.jsonl"
    b.write_bytes(make_envelope_log(1, session="b", bad_lines=2))
    job_a, job_b = pipeline.ingest_path(team, a), pipeline.ingest_path(team, b)
    assert (job_a.status, job_a.quarantined, job_b.status, job_b.quarantined) == ("done", 4, "done", 2)
    return job_a, job_b


@pytest.mark.django_db
def test_retention_deletes_old_quarantined_lines_and_their_files(team, tmp_path, settings):
    job_a, job_b = _two_jobs_with_bad_lines(team, tmp_path, settings)
    (kept_file,) = (
        LineRecord.objects.filter(job=job_a).exclude(raw_file="").values_list("raw_file", flat=True)
    )
    assert storage.exists(kept_file)
    settings.QUARANTINE_RETENTION_DAYS = 7
    IngestJob.objects.filter(pk=job_a.pk).update(finished=timezone.now() - timedelta(days=8))
    assert retention.purge_expired_quarantine() == 4
    assert (_quarantined(job_a), _quarantined(job_b)) == (0, 2)
    assert not storage.exists(kept_file)
    job_a.refresh_from_db()
    assert job_a.quarantined == 4  # the run's record stays true
    settings.QUARANTINE_RETENTION_DAYS = 0  # keep for good
    IngestJob.objects.filter(pk=job_b.pk).update(finished=timezone.now() - timedelta(days=800))
    assert retention.purge_expired_quarantine() == 0 and _quarantined(job_b) == 2


@pytest.mark.django_db
def test_a_member_may_not_delete_and_a_running_jobs_lines_stay(
    team, tmp_path, settings, client, user_factory
):
    from django.urls import reverse

    job_a, _ = _two_jobs_with_bad_lines(team, tmp_path, settings)
    bob = user_factory("bob")
    Membership.objects.create(team=team, user=bob, role=Membership.Role.MEMBER)
    client.force_login(bob)
    url = reverse("ingest_quarantine_delete", args=[team.slug])
    assert client.post(url).status_code == 404 and _quarantined() == 6  # the role matrix answers 404
    IngestJob.objects.filter(pk=job_a.pk).update(status=IngestJob.Status.RUNNING)
    assert retention.delete_quarantined(LineRecord.objects.all()) == 2
    assert _quarantined(job_a) == 4


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_quarantine_page_deletes_one_jobs_lines_then_all(
    browser_page, live_server, team, alice, tmp_path, settings
):
    job_a, job_b = _two_jobs_with_bad_lines(team, tmp_path, settings)
    alice.set_password("pw-for-browser-123")
    alice.save()
    page = browser_page
    page.on("dialog", lambda dialog: dialog.accept())
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    page.goto(f"{live_server.url}/t/{team.slug}/ingest/jobs/{job_a.code}/")
    page.click("[data-count=quarantined] a")  # the job's quarantined lines
    page.wait_for_selector("#quarantine-delete")
    assert page.locator("#quarantine-delete button").inner_text() == "Delete this job's 4 line(s)"
    assert "for 30 days after its job finished" in page.locator("main").inner_text()
    page.screenshot(path="/tmp/shots/quarantine-job.png", full_page=True)
    page.click("#quarantine-delete button")
    page.wait_for_selector("text=Deleted 4 quarantined line(s) of a.jsonl.")
    assert (_quarantined(job_a), _quarantined(job_b)) == (0, 2)
    assert page.locator("#quarantine-delete button").inner_text() == "Delete all 2 line(s)"
    page.click("#quarantine-delete button")
    page.wait_for_selector("text=Deleted 2 quarantined line(s).")
    assert _quarantined() == 0
    assert page.locator("#quarantine-delete").count() == 0
    assert "Nothing in quarantine" in page.locator("#quarantine").inner_text()
    assert page.js_errors == []
