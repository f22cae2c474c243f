"""Apprise channels under the outbound policy, against real local receivers: no redirect is
followed, every host a URL reaches is checked (mailto's ``smtp=`` too), and a failed send reads
the same whatever listens on the port.

What got past before: a 302 made the worker GET 127.0.0.1 and a 307 made it POST the alert body
there; ``mailto://...?smtp=127.0.0.1&port=...`` opened SMTP to loopback because only the
address's domain was checked; "Test sent" against "test failed: HTTP ..." mapped open ports.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dashboard.alerts.notify.apprise_sender import AppriseSender, validate_url
from dashboard.alerts.notify.base import Message, SendError
from tests.helpers import Receiver, free_port

MESSAGE = Message(payload={"alert": "fixed tax"}, subject="Budget breached", text="files: 4,593 tokens")


class Redirector:
    """A real HTTP server answering every request with ``status`` and a Location."""

    def __init__(self, status: int, location: str) -> None:
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.hits += 1
                self.send_response(status)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status", [302, 307])
@pytest.mark.parametrize("asked", ["", "?redirect=yes"])
def test_a_redirect_is_never_followed(status, asked):
    with Receiver() as target:
        redirector = Redirector(status, f"http://127.0.0.1:{target.port}/stolen")
        try:
            sender = AppriseSender({"url": f"json://127.0.0.1:{redirector.port}/hook{asked}"})
            with pytest.raises(SendError):
                sender.send(MESSAGE)
            assert redirector.hits == 1
            assert target.requests == []  # neither the GET (302) nor the alert's POST (307) arrived
        finally:
            redirector.close()


def test_mailto_smtp_server_is_checked_and_never_contacted(settings):
    settings.OUTBOUND_ALLOW_NETWORKS = []  # the default: nothing inward
    accepted: list[object] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"mailto://alerts:pw@93.184.216.34?smtp=127.0.0.1&port={port}&to=ops@93.184.216.34"
    try:
        problem = validate_url(url)
        assert problem is not None and "127.0.0.1" in problem and "loopback" in problem
        with pytest.raises(SendError) as refused:
            AppriseSender({"url": url}).send(MESSAGE)
        assert refused.value.permanent and "127.0.0.1" in str(refused.value)
        assert accepted == []
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def test_a_failure_reads_the_same_for_a_closed_port_and_a_listening_service():
    with Receiver(statuses=[500]) as listening:
        errors = []
        for port in (free_port(), listening.port):
            with pytest.raises(SendError) as failed:
                AppriseSender({"url": f"json://127.0.0.1:{port}/hook"}).send(MESSAGE)
            errors.append(str(failed.value))
        assert listening.requests  # the listening one did answer, with a 500
    assert errors[0] == errors[1]
    assert "500" not in errors[1] and "refused" not in errors[0].lower()
