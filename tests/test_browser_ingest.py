"""Uploading a log in real headless Chromium: the job page follows the job to the end by htmx
polling, without a reload, and no request leaves the app's origin."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import make_envelope_log

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def slow_worker(monkeypatch):
    """Stands in for the Celery worker: runs the real task body a moment after the enqueue, in
    another thread, so the page first sees the job waiting and then has to notice it finish."""
    from django.db import connection

    from ingest.capture import tasks

    threads: list[threading.Thread] = []

    def work(job_id: int) -> None:
        try:
            time.sleep(1.5)
            tasks.run_ingest_job(job_id)
        finally:
            connection.close()

    def delay(job_id: int) -> None:
        thread = threading.Thread(target=work, args=(job_id,), daemon=True)
        threads.append(thread)
        thread.start()

    monkeypatch.setattr(tasks.run_ingest_job, "delay", delay)
    yield threads
    for thread in threads:
        thread.join(timeout=30)


def test_upload_and_watch_the_job_finish_without_a_reload(
    browser_page, live_server, team, alice, slow_worker, settings, tmp_path
):
    from ingest.capture.models import IngestJob

    settings.MEDIA_ROOT = tmp_path / "media"
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-for-browser-123")
    page.click("form button")
    page.wait_for_url(lambda url: "/login/" not in url)

    page.click("nav.mainnav >> text=Ingest")
    page.wait_for_selector("text=Nothing ingested yet")

    log = tmp_path / "session.jsonl"
    log.write_bytes(make_envelope_log(4, bad_lines=1))
    page.set_input_files("#upload-form input[type=file]", str(log))
    page.click("#upload-form button")
    page.wait_for_url("**/ingest/jobs/**")
    job = IngestJob.objects.get(team=team)
    assert page.locator("#progress-region").get_attribute("data-status") in ("queued", "running")
    assert page.locator("#calls").inner_text().count("No calls stored yet") == 1

    # From here on the page must update itself: mark the document and count navigations.
    page.evaluate("window.__sameDocument = true")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))

    page.wait_for_selector('#progress-region[data-status="done"]', timeout=30_000)
    assert page.locator('[data-count="lines_read"]').inner_text() == "11"
    assert page.locator('[data-count="stored"]').inner_text() == "8"
    assert page.locator('[data-count="calls_stored"]').inner_text() == "4"
    assert "adds up" in page.locator("#reconcile").inner_text()
    # The calls table below reloads on the job's "finished" event.
    page.wait_for_function("document.querySelectorAll('#calls tbody code').length === 4")
    assert page.evaluate("window.__sameDocument") is True and navigations == []

    # Polling has stopped: no more progress requests once done.
    progress_requests: list[str] = []
    page.on("request", lambda r: progress_requests.append(r.url) if "/progress/" in r.url else None)
    page.wait_for_timeout(2500)
    assert progress_requests == []

    job.refresh_from_db()
    assert job.status == "done" and job.reconciles and job.calls_stored == 4
    page.click(f"a[href='/t/{team.slug}/ingest/quarantine/?job={job.code}']")
    page.wait_for_selector("#quarantine >> text=invalid_json")

    assert page.foreign_requests == []
    assert page.js_errors == []
