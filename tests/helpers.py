"""Helpers every test folder shares. Oracles here are written from the definitions in docs/, never
imported from the code under test, so a bug in the product cannot cancel out in a test."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"
T = TypeVar("T")


def need(reason: str) -> None:
    """The one rule for a missing prerequisite (a service, a binary, a device): skip on a developer's
    machine, fail when CI=true, so CI can never pass without exercising it."""
    if IN_CI:
        pytest.fail(f"CI=true and a prerequisite is missing: {reason}")
    pytest.skip(reason)


def sha(data: str | bytes) -> str:
    """sha256 hex of UTF-8 text or of bytes (what `shasum -a 256` prints)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


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
