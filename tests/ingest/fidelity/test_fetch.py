"""Reference URL fetching against a real local HTTP server."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ingest.fidelity.fetch import FetchRefused, fetch_reference, host_allowed, normalize_url
from mcptax.outbound import OutboundPolicy
from tests.helpers import LOOPBACK_NETWORKS

DOC = ("# Skill\n\n" + "Use the reference, not a pasted copy.\n" * 300).encode()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        port = self.server.server_address[1]
        if self.path == "/doc.md":
            self._send(DOC, length=True)
        elif self.path == "/chunked.md":
            self._send(DOC, length=False)
        elif self.path == "/hop":
            self._redirect("/doc.md")
        elif self.path == "/away":
            self._redirect(f"http://localhost:{port}/doc.md")
        elif self.path == "/loop":
            self._redirect("/loop")
        else:
            self.send_response(404)
            self.end_headers()

    def _redirect(self, where: str):
        self.send_response(302)
        self.send_header("Location", where)
        self.end_headers()

    def _send(self, body: bytes, *, length: bool):
        self.send_response(200)
        self.send_header("Content-Type", "text/markdown")
        if length:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 1000):
                part = body[i : i + 1000]
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(scope="module")
def origin():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


LOOPBACK = OutboundPolicy.from_entries(LOOPBACK_NETWORKS)
LAB = {"allowed_hosts": ["127.0.0.1"], "outbound": LOOPBACK}


def test_fetch_records_sha_bytes_and_lines(origin):
    doc = fetch_reference(f"{origin}/doc.md", **LAB)
    assert doc.content == DOC
    assert doc.sha256 == hashlib.sha256(DOC).hexdigest()
    assert doc.bytes == len(DOC) and doc.lines == DOC.count(b"\n")


def test_redirects_are_followed_only_on_the_list(origin):
    assert fetch_reference(f"{origin}/hop", **LAB).final_url.endswith("/doc.md")
    with pytest.raises(FetchRefused, match="'localhost' is not on the allow-list"):
        fetch_reference(f"{origin}/away", **LAB)
    with pytest.raises(FetchRefused, match="redirects"):
        fetch_reference(f"{origin}/loop", **LAB)


@pytest.mark.parametrize("path", ["/doc.md", "/chunked.md"])
def test_size_limit_refuses_one_byte_over_and_accepts_exactly(origin, path):
    assert fetch_reference(f"{origin}{path}", max_bytes=len(DOC), **LAB).bytes == len(DOC)
    with pytest.raises(FetchRefused, match="limit"):
        fetch_reference(f"{origin}{path}", max_bytes=len(DOC) - 1, **LAB)


def test_private_addresses_and_unlisted_hosts_are_refused(origin):
    with pytest.raises(FetchRefused, match="loopback"):
        fetch_reference(f"{origin}/doc.md", allowed_hosts=["127.0.0.1"])  # loopback not allowed
    with pytest.raises(FetchRefused, match="not on the allow-list"):
        fetch_reference(f"{origin}/doc.md", allowed_hosts=["github.com"], outbound=LOOPBACK)
    with pytest.raises(FetchRefused, match="http"):
        fetch_reference("file:///etc/passwd", **LAB)
    with pytest.raises(FetchRefused, match="HTTP 404"):
        fetch_reference(f"{origin}/missing", **LAB)


def test_github_blob_urls_become_raw_urls():
    assert (
        normalize_url("https://github.com/acme/skills/blob/main/docs/SKILL.md")
        == "https://raw.githubusercontent.com/acme/skills/main/docs/SKILL.md"
    )
    assert normalize_url("https://example.com/a") == "https://example.com/a"
    assert host_allowed("raw.githubusercontent.com", ["*.githubusercontent.com"])
    assert not host_allowed("evilgithubusercontent.com", ["*.githubusercontent.com"])


def test_a_refused_reference_fetch_sends_nothing():
    from tests.helpers import Receiver

    with Receiver() as target:
        url = f"http://127.0.0.1:{target.port}/doc.md"
        with pytest.raises(FetchRefused, match="127.0.0.1 is a loopback address"):
            fetch_reference(url, allowed_hosts=["127.0.0.1"])
        assert target.requests == []
        assert fetch_reference(url, allowed_hosts=["127.0.0.1"], outbound=LOOPBACK).content == b"ok"
        assert len(target.requests) == 1


def test_a_reference_fetch_checks_the_answer_it_connects_to():
    from tests.helpers import Receiver

    # The first answer (127.0.0.1, allowed) decides that plain http may be used; the connection
    # resolves for itself, gets 10.0.0.5, and is refused instead of going anywhere.
    answers = iter([["127.0.0.1"], ["10.0.0.5"]])
    asked = []

    def rebinding(host, port):
        asked.append(host)
        return next(answers)

    outbound = OutboundPolicy.from_entries(["127.0.0.1/32"], resolver=rebinding)
    with Receiver() as target:
        with pytest.raises(FetchRefused, match="docs.rebind.test resolves to 10.0.0.5, a private address"):
            fetch_reference(
                f"http://docs.rebind.test:{target.port}/doc.md",
                allowed_hosts=["docs.rebind.test"],
                outbound=outbound,
            )
        assert target.requests == []
    assert asked == ["docs.rebind.test", "docs.rebind.test"]
