"""The ingest pages say what happened: a job whose every line was quarantined is not a green
"done", the upload message does not claim a state the page then contradicts, and the page names
all four ways in."""

from __future__ import annotations

import re

from django.urls import reverse

from ingest.capture import pipeline
from ingest.capture.models import IngestJob
from tests.conftest import make_envelope_log


def _status(html: str) -> str:
    match = re.search(r"<h2>Status: (.*?)</h2>", html, re.S)
    assert match, "no status heading"
    return match.group(1)


def test_job_status_tells_all_quarantined_from_done(alice_client, team):
    clean = pipeline.ingest_bytes(
        team, make_envelope_log(2), source=IngestJob.Source.UPLOAD, filename="ok.jsonl"
    )
    some = pipeline.ingest_bytes(
        team,
        make_envelope_log(2, bad_lines=2, seed="s"),
        source=IngestJob.Source.UPLOAD,
        filename="some.jsonl",
    )
    garbage = pipeline.ingest_bytes(
        team, b'{"not": "an envelope"\n{broken\n', source=IngestJob.Source.UPLOAD, filename="bad.jsonl"
    )
    garbage.refresh_from_db()
    # A file in no known format fails with the reason and keeps none of its lines.
    assert garbage.status == "failed" and garbage.quarantined == 0
    assert "cannot tell the log format" in garbage.error

    def status(job):
        return _status(alice_client.get(reverse("ingest_job", args=[team.slug, job.code])).content.decode())

    assert '<span class="badge ok">done</span>' in status(clean)
    assert (
        'class="badge warning"' in status(some)
        and "done, " in status(some)
        and " quarantined" in status(some)
    )
    assert 'class="badge error"' in status(garbage) and "failed" in status(garbage)


def test_the_ingest_page_names_five_ways_in(alice_client, team):
    html = alice_client.get(reverse("ingest_home", args=[team.slug])).content.decode()
    assert "comes in five ways" in html and "manage.py ingest FILE" in html
    assert "OpenTelemetry logs" in html and "four ways" not in html
