"""Push sink: POSTs envelope lines as JSONL batches to the dashboard's `/api/v1/ingest`.

Lines are buffered in memory up to `max_buffer_bytes`. When the dashboard is slow or
down the oldest lines are dropped to make room, and every loss is reported on stderr
with a count: a push log with holes must never look complete.

Each batch becomes its own ingest job, and a job pairs requests with responses only within
itself. So a batch is cut just before the first request whose response has not been written
yet; that request waits (up to `hold_seconds`) for its answer to travel in the same batch.
Order is never changed: everything after a waiting request waits with it.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable

import httpx

from mcptax.proxy.writer import PROXY_NAME, PROXY_VERSION, warn

DEFAULT_BATCH_LINES = 500
DEFAULT_FLUSH_INTERVAL = 1.0
DEFAULT_MAX_BUFFER_BYTES = 64 * 1024 * 1024
DEFAULT_DRAIN_TIMEOUT = 10.0
DEFAULT_HOLD_SECONDS = 60.0
MAX_BATCH_BYTES = 8 * 1024 * 1024
BACKOFF_START = 0.5
BACKOFF_MAX = 30.0


class PushRejected(Exception):
    """The dashboard refused a batch for a reason a retry cannot fix (bad token, bad request)."""


class PushSink:
    """Background batcher with retry/backoff; `write_lines` never blocks on the network."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        batch_lines: int = DEFAULT_BATCH_LINES,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        request_timeout: float = 30.0,
        hold_seconds: float = DEFAULT_HOLD_SECONDS,
        report: Callable[[str], None] = warn,
    ) -> None:
        self.url = url
        self._headers = {
            "Content-Type": "application/x-ndjson",
            "User-Agent": f"{PROXY_NAME}/{PROXY_VERSION}",
        }
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._batch_lines = batch_lines
        self._flush_interval = flush_interval
        self._max_buffer_bytes = max_buffer_bytes
        self._drain_timeout = drain_timeout
        self._request_timeout = request_timeout
        self._report = report
        self._cond = threading.Condition()
        self._buffer: deque[bytes] = deque()
        # Parallel to _buffer: (request pair key or None, monotonic time the line arrived).
        self._pairing: deque[tuple[str | None, float]] = deque()
        self._answered: set[str] = set()
        self._hold_seconds = hold_seconds
        self._buffered_bytes = 0
        self._lost = 0
        self._lost_reported = 0
        self._sent_lines = 0
        self._closing = False
        self._drain_deadline = 0.0
        self._thread = threading.Thread(target=self._run, name="envelope-push", daemon=True)
        self._thread.start()

    @property
    def sent_lines(self) -> int:
        with self._cond:
            return self._sent_lines

    @property
    def lost_lines(self) -> int:
        with self._cond:
            return self._lost

    def write_lines(self, lines: list[bytes]) -> None:
        now = time.monotonic()
        keys = [_pair_keys(line) for line in lines]
        with self._cond:
            for line, (request_key, response_key) in zip(lines, keys, strict=True):
                self._buffer.append(line)
                self._pairing.append((request_key, now))
                self._buffered_bytes += len(line)
                if response_key is not None:
                    self._answered.add(response_key)
            while self._buffered_bytes > self._max_buffer_bytes and self._buffer:
                self._buffered_bytes -= len(self._buffer.popleft())
                key, _ = self._pairing.popleft()
                self._answered.discard(key)
                self._lost += 1
            self._cond.notify()

    def _ready(self, index: int, now: float) -> bool:
        """May line `index` leave now? Not while it is a request still waiting for its answer."""
        key, arrived = self._pairing[index]
        return key is None or key in self._answered or self._closing or now - arrived >= self._hold_seconds

    def _report_losses(self) -> None:
        with self._cond:
            newly = self._lost - self._lost_reported
            self._lost_reported = self._lost
        if newly:
            self._report(
                f"push buffer overflow: {newly} envelope(s) LOST (not delivered to {self.url}); "
                f"the dashboard is unreachable or too slow"
            )

    def _take_batch(self) -> list[bytes]:
        batch: list[bytes] = []
        size = 0
        now = time.monotonic()
        while self._buffer and len(batch) < self._batch_lines and self._ready(0, now):
            if batch and size + len(self._buffer[0]) > MAX_BATCH_BYTES:
                break
            line = self._buffer.popleft()
            key, _ = self._pairing.popleft()
            self._answered.discard(key)
            self._buffered_bytes -= len(line)
            size += len(line)
            batch.append(line)
        return batch

    def _run(self) -> None:
        with httpx.Client(timeout=self._request_timeout, follow_redirects=False) as client:
            while True:
                with self._cond:
                    # Wait for a full batch, the flush interval, or shutdown.
                    deadline = time.monotonic() + self._flush_interval
                    while not self._closing and len(self._buffer) < self._batch_lines:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        self._cond.wait(remaining)
                    if not self._buffer and self._closing:
                        break
                    batch = self._take_batch()
                    if not batch and self._buffer and not self._closing:
                        # Everything buffered waits behind an unanswered request.
                        self._cond.wait(self._flush_interval)
                self._report_losses()
                if batch:
                    self._deliver(client, batch)
        self._report_losses()

    def _deliver(self, client: httpx.Client, batch: list[bytes]) -> None:
        body = b"".join(batch)
        delay = BACKOFF_START
        first_failure = True
        while True:
            try:
                self._post(client, body)
                with self._cond:
                    self._sent_lines += len(batch)
                return
            except PushRejected as exc:
                self._lose(batch, f"dashboard rejected the batch: {exc}")
                return
            except (httpx.HTTPError, OSError) as exc:
                if first_failure:
                    self._report(f"push to {self.url} failed ({exc}); retrying with backoff")
                    first_failure = False
            with self._cond:
                if self._closing and time.monotonic() + delay > self._drain_deadline:
                    self._lose(batch, "gave up at shutdown, dashboard still unreachable")
                    return
                # Sleep on the condition so close() can cut a long backoff short.
                self._cond.wait(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    def _lose(self, batch: list[bytes], why: str) -> None:
        with self._cond:
            self._lost += len(batch)
            self._lost_reported += len(batch)
        self._report(f"{len(batch)} envelope(s) LOST, not delivered to {self.url}: {why}")

    def _post(self, client: httpx.Client, body: bytes) -> None:
        response = client.post(self.url, content=body, headers=self._headers)
        if response.is_success:
            return
        if response.status_code in (408, 425, 429) or response.status_code >= 500:
            raise httpx.HTTPStatusError(
                f"HTTP {response.status_code}", request=response.request, response=response
            )
        raise PushRejected(f"HTTP {response.status_code} {response.text[:200]!r}")

    def close(self) -> None:
        """Flush what is buffered, retrying until the drain timeout; report anything left."""
        with self._cond:
            self._closing = True
            self._drain_deadline = time.monotonic() + self._drain_timeout
            self._cond.notify_all()
        self._thread.join(self._drain_timeout + self._request_timeout + 1)
        with self._cond:
            leftover = len(self._buffer)
            self._buffer.clear()
            self._pairing.clear()
            self._lost += leftover
            self._lost_reported += leftover
        self._report_losses()
        if leftover:
            self._report(f"{leftover} envelope(s) LOST, not delivered to {self.url} before exit")


def _pair_keys(line: bytes) -> tuple[str | None, str | None]:
    """(key if the line is a request awaiting a response, key if it is a response).

    A request and its response share the HTTP exchange (conn_id) or, on stdio, the session; plus
    the JSON-RPC id. Anything else (notifications, batches, stderr, meta) needs no pairing.
    """
    try:
        envelope = json.loads(line)
    except ValueError:
        return None, None
    raw = envelope.get("raw") if isinstance(envelope, dict) else None
    if not isinstance(raw, dict) or "id" not in raw:
        return None, None
    scope = envelope.get("conn_id") or envelope.get("session_id")
    direction = envelope.get("direction")
    # Clients and servers number their requests independently: the key names who asked.
    if "method" in raw:
        return json.dumps([scope, raw["id"], direction]), None
    if "result" in raw or "error" in raw:
        asker = {"s2c": "c2s", "c2s": "s2c"}.get(direction)
        return None, json.dumps([scope, raw["id"], asker])
    return None, None
