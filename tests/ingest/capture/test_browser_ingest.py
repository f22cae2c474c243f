"""Uploading a log in real headless Chromium: the job page follows the job to the end by htmx
polling, without a reload, and no request leaves the app's origin."""

from __future__ import annotations

import threading

import pytest

from tests.conftest import make_envelope_log
from tests.helpers import thread_on_test_database

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def held_worker(monkeypatch):
    """Stands in for the Celery worker: runs the real task body in another thread once the test
    sets ``release``, so the page first sees the job waiting and then has to notice it finish."""
    from ingest import tasks

    threads: list[threading.Thread] = []
    release = threading.Event()

    def work(job_id: int) -> None:
        if release.wait(timeout=120):
            tasks.run_ingest_job(job_id)

    def delay(job_id: int) -> None:
        thread = thread_on_test_database(work, job_id)
        threads.append(thread)
        thread.start()

    monkeypatch.setattr(tasks.run_ingest_job, "delay", delay)
    yield release
    release.set()
    for thread in threads:
        thread.join(timeout=30)


def test_upload_and_watch_the_job_finish_without_a_reload(
    browser_page, live_server, team, alice, held_worker, settings, tmp_path
):
    from ingest.capture.models import IngestJob

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
    # The worker is held: the job is still waiting, whatever the machine's speed.
    assert page.locator("#progress-region").get_attribute("data-status") == "queued"
    assert page.locator("#calls").inner_text().count("No calls stored yet") == 1

    # From here on the page must update itself: mark the document and count navigations.
    page.evaluate("window.__sameDocument = true")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    # The page polls while the job waits; only then does the worker run it.
    with page.expect_request(lambda r: "/progress/" in r.url):
        pass
    held_worker.set()

    page.wait_for_selector('#progress-region[data-status="done"]', timeout=30_000)
    assert page.locator('[data-count="lines_read"]').inner_text() == "11"
    assert page.locator('[data-count="stored"]').inner_text() == "8"
    assert page.locator('[data-count="calls_stored"]').inner_text() == "4"
    assert "adds up" in page.locator("#reconcile").inner_text()
    # The calls table below reloads on the job's "finished" event. (A function, not an expression:
    # Playwright polls an expression with eval, which the page's policy refuses.)
    page.wait_for_function("() => document.querySelectorAll('#calls tbody code').length === 4")
    assert page.evaluate("window.__sameDocument") is True and navigations == []

    # Polling has stopped: the region swapped in last polls no more, and no progress request
    # starts before a sentinel polling at the same 1 s period has started two requests. Both are
    # counted in the page, in the order htmx issues them.
    assert page.locator("#progress-region").get_attribute("hx-trigger") is None
    page.evaluate(
        """url => {
            window.__progressRequests = 0;
            window.__sentinelRequests = 0;
            document.body.addEventListener("htmx:beforeRequest", e => {
                const path = e.detail.requestConfig.path;
                if (path.includes("/progress/")) window.__progressRequests += 1;
                if (path.includes("sentinel=1")) window.__sentinelRequests += 1;
            });
            const s = document.createElement("div");
            s.setAttribute("hx-get", url);
            s.setAttribute("hx-trigger", "every 1s");
            s.setAttribute("hx-swap", "none");
            document.body.appendChild(s);
            htmx.process(s);
        }""",
        f"/t/{team.slug}/ingest/jobs/{job.code}/?sentinel=1",
    )
    page.wait_for_function("() => window.__sentinelRequests >= 2", timeout=30_000)
    assert page.evaluate("window.__progressRequests") == 0

    job.refresh_from_db()
    assert job.status == "done" and job.reconciles and job.calls_stored == 4
    page.click(f"a[href='/t/{team.slug}/ingest/quarantine/?job={job.code}']")
    page.wait_for_selector("#quarantine >> text=invalid_json")

    assert page.foreign_requests == []
    assert page.js_errors == []
