"""Ingest pages: jobs with progress and counts, a job's page, the quarantine, watched folders."""

from __future__ import annotations

import json

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord, WatchedFile, WatchedFolder
from tests.conftest import make_envelope_log


def ingest(team, data: bytes, name: str = "proxy.jsonl") -> IngestJob:
    return pipeline.ingest_bytes(team, data, source=IngestJob.Source.UPLOAD, filename=name)


def queued(team, data: bytes, name: str = "queued.jsonl") -> IngestJob:
    return pipeline.ingest_bytes(team, data, source=IngestJob.Source.UPLOAD, filename=name, run=False)


def test_ingest_page_empty_state_and_links(alice_client, team):
    page = alice_client.get(reverse("ingest_home", args=[team.slug]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Nothing ingested yet" in html
    assert reverse("ingest_quarantine", args=[team.slug]) in html
    assert reverse("ingest_watch", args=[team.slug]) in html
    assert 'enctype="multipart/form-data"' in html and reverse("ingest_upload", args=[team.slug]) in html
    assert 'hx-trigger="every 1s"' not in html  # nothing to wait for
    assert f'href="{reverse("ingest_home", args=[team.slug])}">Ingest</a>' in html  # the nav link


def test_jobs_show_status_counts_and_whether_they_add_up(alice_client, team):
    done = ingest(team, make_envelope_log(2, bad_lines=1), "done.jsonl")
    waiting = queued(team, make_envelope_log(1, session="q"))
    html = alice_client.get(reverse("ingest_home", args=[team.slug])).content.decode()
    row = html[html.index(f'id="job-{done.code}"') :]
    row = row[: row.index("</tr>")]
    assert 'data-status="done"' in row and "done.jsonl" in row
    cells = [c.split("</td>")[0].strip() for c in row.split('<td class="num">')[1:]]
    assert cells[:4] == ["7", "4", "0", "2"]  # read, stored, duplicate, ignored
    assert f"?job={done.code}" in row  # quarantined count links to the filtered quarantine
    assert ">yes<" in row
    wrow = html[html.index(f'id="job-{waiting.code}"') :]
    assert (
        'data-status="queued"' in wrow[: wrow.index("</tr>")] and "<progress" in wrow[: wrow.index("</tr>")]
    )
    assert 'hx-trigger="every 1s"' in html  # polls while a job is in progress


def test_jobs_region_polls_until_nothing_is_in_progress(alice_client, team):
    job = queued(team, make_envelope_log(1))
    url = reverse("ingest_home", args=[team.slug])
    polling = alice_client.get(url, HTTP_HX_REQUEST="true")
    assert polling.status_code == 200 and 'hx-trigger="every 1s"' in polling.content.decode()
    assert "<h1>" not in polling.content.decode()  # the partial only
    pipeline.run_job(job.pk)
    final = alice_client.get(url, HTTP_HX_REQUEST="true")
    assert final.status_code == 286  # htmx stops polling
    assert (
        'hx-trigger="every 1s"' not in final.content.decode()
        and 'data-status="done"' in final.content.decode()
    )


def test_jobs_sort_and_paginate_with_constant_queries(alice_client, team):
    url = reverse("ingest_home", args=[team.slug])
    for n in range(3):
        ingest(team, make_envelope_log(1, session=f"s{n}"), f"f{n}.jsonl")
    with CaptureQueriesContext(connection) as few:
        alice_client.get(url)
    for n in range(3, 30):
        ingest(team, make_envelope_log(1, session=f"s{n}"), f"f{n:02d}.jsonl")
    with CaptureQueriesContext(connection) as many:
        page = alice_client.get(url + "?sort=file")
    assert len(many) == len(few)
    html = page.content.decode()
    assert "page 1 of 2" in html
    assert html.index("f0.jsonl") < html.index("f03.jsonl")  # sorted by file name
    second = alice_client.get(url + "?sort=file&page=2").content.decode()
    assert "f29.jsonl" in second and "f03.jsonl" not in second
    assert alice_client.get(url + "?sort=nonsense&page=999").status_code == 200


def test_job_page_shows_counts_reasons_calls_and_quarantined_lines(alice_client, team):
    job = ingest(team, make_envelope_log(3, bad_lines=2))
    page = alice_client.get(reverse("ingest_job", args=[team.slug, job.code]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-count="lines_read">10<' in html and 'data-count="stored">6<' in html
    assert 'data-count="quarantined"><a' in html and 'data-count="calls_stored">3<' in html
    assert "adds up" in html and "session_context" in html and "invalid_json" in html
    assert html.count("<code>write_file</code>") == 3 and "claude-code" in html
    for record in LineRecord.objects.filter(job=job, status="quarantined"):
        assert reverse("ingest_line", args=[team.slug, record.pk]) in html
    assert 'hx-trigger="every 1s"' not in html  # a finished job is not polled


def test_job_progress_polls_then_stops_and_tells_the_page(alice_client, team):
    job = queued(team, make_envelope_log(2))
    page = alice_client.get(reverse("ingest_job", args=[team.slug, job.code])).content.decode()
    progress_url = reverse("ingest_job_progress", args=[team.slug, job.code])
    assert f'hx-get="{progress_url}"' in page and "No calls stored yet" in page
    waiting = alice_client.get(progress_url, HTTP_HX_REQUEST="true")
    assert waiting.status_code == 200 and "<progress" in waiting.content.decode()
    pipeline.run_job(job.pk)
    done = alice_client.get(progress_url, HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert json.loads(done["HX-Trigger"]) == {"ingestJobFinished": {"job": str(job.code)}}
    assert 'data-count="calls_stored">2<' in done.content.decode()
    # The results below the progress reload on that event, as a partial.
    results = alice_client.get(
        reverse("ingest_job", args=[team.slug, job.code]),
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="results-region",
    ).content.decode()
    assert (
        results.strip().startswith('<div id="results-region"')
        and results.count("<code>write_file</code>") == 2
    )


def test_quarantine_filters_by_reason_and_job_and_paginates(alice_client, team):
    first = ingest(team, make_envelope_log(1, bad_lines=60), "first.jsonl")
    second = ingest(team, make_envelope_log(1, session="b") + b"[1, 2]\n", "second.jsonl")
    url = reverse("ingest_quarantine", args=[team.slug])
    reasons = dict(
        LineRecord.objects.filter(job=second, status="quarantined").values_list("reason", "line_no")
    )
    other_reason = next(r for r in reasons if r != "invalid_json")

    html = alice_client.get(url).content.decode()
    assert "page 1 of 2" in html and "(61 lines)" in html
    by_job = alice_client.get(url, {"job": str(second.code)}).content.decode()
    assert "second.jsonl" in by_job and "first.jsonl</a>" not in by_job
    by_reason = alice_client.get(url, {"reason": "invalid_json"}).content.decode()
    assert (
        "(60 lines)" in by_reason
        and f"<code>{other_reason}</code>" not in by_reason.split('id="quarantine"')[1]
    )
    both = alice_client.get(url, {"reason": other_reason, "job": str(first.code)}).content.decode()
    assert "No quarantined lines match these filters" in both
    partial = alice_client.get(url, {"reason": other_reason}, HTTP_HX_REQUEST="true").content.decode()
    assert (
        partial.strip().startswith('<section class="card flush" id="lines-region"')
        and "second.jsonl" in partial
    )
    page2 = alice_client.get(url, {"reason": "invalid_json", "page": 2}).content.decode()
    assert "page 2 of 2" in page2 and 'href="?reason=invalid_json&page=1"' in page2
    assert alice_client.get(url, {"job": "not-a-uuid"}).status_code == 404


def test_quarantine_empty_state(alice_client, team):
    ingest(team, make_envelope_log(1))
    html = alice_client.get(reverse("ingest_quarantine", args=[team.slug])).content.decode()
    assert "Nothing in quarantine" in html


def test_a_quarantined_line_is_viewable_and_downloadable_exactly(alice_client, team):
    odd = b'{"session_id": "\xff\xfe not utf-8 <script>alert(1)</script>\n'
    job = ingest(team, make_envelope_log(1) + odd + b'{"broken": <b>bold</b>\n')
    records = list(LineRecord.objects.filter(job=job, status="quarantined").order_by("line_no"))
    assert len(records) == 2
    binary, html_line = records
    page = alice_client.get(reverse("ingest_line", args=[team.slug, html_line.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in text and "<b>bold</b>" not in text  # shown, never rendered
    download = alice_client.get(reverse("ingest_line_raw", args=[team.slug, binary.pk]))
    assert download.status_code == 200 and download["Content-Type"] == "application/octet-stream"
    assert "attachment" in download["Content-Disposition"]
    assert download.content == odd.rstrip(b"\n")
    assert (
        "not valid UTF-8"
        in alice_client.get(reverse("ingest_line", args=[team.slug, binary.pk])).content.decode()
    )


def test_a_long_quarantined_line_shows_its_size_sha256_and_file(alice_client, team, settings):
    """A line over INGEST_MAX_RAW_BYTES: the page says what was kept where; the download streams
    the whole line from its file."""
    import hashlib

    settings.INGEST_MAX_RAW_BYTES = 1000
    junk = b"<i>" + b"j" * 3 * 1024 * 1024
    job = ingest(team, make_envelope_log(1) + junk + b"\n")
    line = LineRecord.objects.get(job=job, status="quarantined")
    sha256 = hashlib.sha256(junk).hexdigest()
    page = alice_client.get(reverse("ingest_line", args=[team.slug, line.pk])).content.decode()
    assert f"Line of 3.0\xa0MB ({len(junk)} bytes), sha256 <code>{sha256}</code>" in page
    assert f"kept as file <code>{line.raw_file}</code>" in page and sha256 in line.raw_file
    assert "&lt;i&gt;jjj" in page and "j" * 1001 not in page
    listing = alice_client.get(reverse("ingest_quarantine", args=[team.slug])).content.decode()
    assert "kept as file" in listing and sha256 in listing
    download = alice_client.get(reverse("ingest_line_raw", args=[team.slug, line.pk]))
    assert download.status_code == 200 and download.streaming
    assert "attachment" in download["Content-Disposition"]
    assert b"".join(download.streaming_content) == junk


def test_watched_folders_page_shows_offsets(alice_client, team, tmp_path):
    from ingest.capture.watch import scan_all

    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path), pattern="*.jsonl")
    (tmp_path / "a.jsonl").write_bytes(make_envelope_log(2) + b'{"partial')
    scan_all()
    wf = WatchedFile.objects.get()
    html = alice_client.get(reverse("ingest_watch", args=[team.slug])).content.decode()
    assert str(tmp_path / "a.jsonl") in html and f'<td class="num">{wf.offset}</td>' in html
    assert reverse("ingest_job", args=[team.slug, wf.job.code]) in html and "tailing" in html
    assert f"Allowed under: <code>{tmp_path}</code>" in html and 'id="watch-form"' in html
    assert reverse("ingest_watch_scan", args=[team.slug, folder.pk]) in html
    job_page = alice_client.get(reverse("ingest_job", args=[team.slug, wf.job.code])).content.decode()
    assert f"offset {wf.offset} bytes" in job_page


def test_watched_folder_admin_actions(
    alice_client, team, tmp_path, eager_celery, django_capture_on_commit_callbacks
):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path), pattern="*.jsonl")
    (tmp_path / "a.jsonl").write_bytes(make_envelope_log(1))
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("ingest_watch_scan", args=[team.slug, folder.pk]))
    assert response.status_code == 302 and WatchedFile.objects.filter(folder=folder).count() == 1
    alice_client.post(reverse("ingest_watch_toggle", args=[team.slug, folder.pk]))
    folder.refresh_from_db()
    assert folder.enabled is False
    alice_client.post(reverse("ingest_watch_delete", args=[team.slug, folder.pk]))
    assert not WatchedFolder.objects.exists() and IngestJob.objects.filter(team=team).exists()


def test_another_teams_ingest_objects_are_not_found(alice_client, team, user_factory, team_factory, tmp_path):
    bob = user_factory("bob")
    other = team_factory("Other", bob)
    job = ingest(other, make_envelope_log(1, bad_lines=1))
    line = LineRecord.objects.get(job=job, status="quarantined")
    folder = WatchedFolder.objects.create(team=other, path=str(tmp_path), pattern="*.jsonl")
    not_found = [
        reverse("ingest_home", args=[other.slug]),
        reverse("ingest_quarantine", args=[other.slug]),
        reverse("ingest_watch", args=[other.slug]),
        reverse("ingest_job", args=[other.slug, job.code]),
        reverse("ingest_job", args=[team.slug, job.code]),  # their job under our slug
        reverse("ingest_job_progress", args=[team.slug, job.code]),
        reverse("ingest_line", args=[team.slug, line.pk]),
        reverse("ingest_line_raw", args=[team.slug, line.pk]),
    ]
    for url in not_found:
        assert alice_client.get(url).status_code == 404, url
    assert (
        alice_client.get(reverse("ingest_quarantine", args=[team.slug]), {"job": str(job.code)}).status_code
        == 404
    )
    for name in ("ingest_watch_toggle", "ingest_watch_scan", "ingest_watch_delete"):
        assert alice_client.post(reverse(name, args=[team.slug, folder.pk])).status_code == 404
    assert WatchedFolder.objects.get(pk=folder.pk).enabled is True
    # Our own lists never show their data.
    assert job.filename not in alice_client.get(reverse("ingest_home", args=[team.slug])).content.decode()


def test_pages_need_a_login(client, team):
    for name in ("ingest_home", "ingest_quarantine", "ingest_watch"):
        response = client.get(reverse(name, args=[team.slug]))
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_quarantine_job_and_watch_pages_use_a_constant_number_of_queries(alice_client, team, tmp_path):
    from ingest.capture.watch import scan_all

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert alice_client.get(url).status_code == 200
        return len(ctx)

    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path), pattern="*.jsonl")
    (tmp_path / "a.jsonl").write_bytes(make_envelope_log(1, session="w0"))
    scan_all()
    small = ingest(team, make_envelope_log(1, bad_lines=1), "small.jsonl")
    urls = {
        "quarantine": reverse("ingest_quarantine", args=[team.slug]),
        "job": reverse("ingest_job", args=[team.slug, small.code]),
        "watch": reverse("ingest_watch", args=[team.slug]),
    }
    before = {name: queries(url) for name, url in urls.items()}
    for n in range(1, 8):
        ingest(team, make_envelope_log(1, session=f"q{n}", bad_lines=3), f"more{n}.jsonl")
        (tmp_path / f"b{n}.jsonl").write_bytes(make_envelope_log(1, session=f"w{n}"))
    big = ingest(team, make_envelope_log(20, session="big", bad_lines=5), "big.jsonl")
    scan_all()
    assert folder.files.count() == 8
    urls["job"] = reverse("ingest_job", args=[team.slug, big.code])
    after = {name: queries(url) for name, url in urls.items()}
    assert after == before
