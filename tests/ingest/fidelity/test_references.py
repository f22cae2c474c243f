"""Registering reference documents by upload and by URL (a loopback site under the operator's
settings), and re-judging the pastes a new document explains.

Run: VAR_DIR=/tmp/x-var .venv/bin/pytest tests/ingest/fidelity/test_references.py -q
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ingest.fidelity import references
from ingest.fidelity.models import ReferenceDocument
from mcptax import verdict_rules
from tests.helpers import sha
from tests.ingest.capture.logs import EnvelopeLog
from tests.ingest.fidelity.traffic import doc, ingest, only_argument

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


def test_upload_records_figures_and_refuses_what_is_not_text(team, settings):
    text = "line one\r\nline two\r\n"
    document, created = references.register_upload(team, text.encode(), name="/tmp/x/notes.txt")
    assert created and document.name == "notes.txt"
    assert (document.sha256, document.bytes, document.lines, document.crlf_count) == (sha(text), 20, 2, 2)
    assert document.ends_with_newline and document.tokens > 0
    again, created = references.register_upload(team, text.encode(), name="copy.txt")
    assert again.pk == document.pk and not created
    with pytest.raises(references.ReferenceRefused, match="not UTF-8"):
        references.register_upload(team, b"\xff\xfe binary", name="b.bin")
    settings.REFERENCE_MAX_BYTES = 10
    with pytest.raises(references.ReferenceRefused, match="limit"):
        references.register_upload(team, b"x" * 11, name="big.txt")


class _Handler(BaseHTTPRequestHandler):
    body = doc(8).encode()

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "http://evil.invalid/doc.md")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/markdown")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def loopback_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_url_registration_follows_the_operator_settings(team, settings, loopback_site, tmp_path):
    url = f"{loopback_site}/docs/eight.md"
    # Defaults: GitHub only.
    with pytest.raises(references.ReferenceRefused, match="not on the allow-list"):
        references.register_url(team, url)
    settings.REFERENCE_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.OUTBOUND_ALLOW_NETWORKS = []
    with pytest.raises(references.ReferenceRefused, match="loopback address"):
        references.register_url(team, url)  # loopback, not allowed by the outbound policy
    settings.OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8"]
    with pytest.raises(references.ReferenceRefused):
        references.register_url(team, f"{loopback_site}/moved")  # a redirect off the list
    settings.REFERENCE_MAX_BYTES = 100
    with pytest.raises(references.ReferenceRefused, match="limit"):
        references.register_url(team, url)
    settings.REFERENCE_MAX_BYTES = 1_000_000

    # A paste ingested before the registration is judged when the document arrives.
    log = EnvelopeLog().initialize()
    log.call("write", {"content": doc(8).replace("paragraph", "paragraf", 1)})
    ingest(team, log, tmp_path)
    assert only_argument(team).verdict == "unverifiable"
    document, created = references.register_url(team, url)
    assert created and document.source == "url" and document.name == "eight.md"
    assert document.fetched_url == url and document.sha256 == sha(doc(8))
    assert document.rejudged == 1
    argument = only_argument(team)
    assert argument.verdict == verdict_rules.MUTATED and argument.evidence["document"]["url"] == url
    assert ReferenceDocument.objects.filter(team=team).count() == 1
