"""Outages made for real without touching the machine's shared services: the app pointed at a port
where nothing listens, or at a redis-server of the test's own that the test then kills."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import free_port, wait_for_port


def closed_redis_url() -> str:
    """A Redis URL on a loopback port nothing listens on (connection refused at once)."""
    return f"redis://127.0.0.1:{free_port()}/0"


def _reset_pools(app: Any) -> None:
    # Dropped, not closed: kombu keeps one pool per broker in a global registry, and the app's own
    # broker gets its (still open) pool back afterwards.
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def celery_broker(url: str, transport_options: dict[str, Any] | None = None) -> Iterator[None]:
    """The test process's Celery app publishes to `url` inside the block (the real app, its real
    connection pool rebuilt), and back to its own broker after."""
    from config.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    _reset_pools(app)
    app.conf.broker_url = url
    app.conf.broker_transport_options = transport_options or {}
    try:
        yield
    finally:
        _reset_pools(app)
        app.conf.broker_url, app.conf.broker_transport_options = saved


@contextmanager
def own_redis() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test alone (no persistence), on a free port: (url, process)."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        yield f"redis://127.0.0.1:{port}/0", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def filesystem_broker_options(root: Path) -> dict[str, str]:
    """Transport options of an embedded (filesystem) broker under `root/broker/`, folders made."""
    folders = {name: root / "broker" / name for name in ("in", "processed", "control")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(folders["in"]),
        "data_folder_out": str(folders["in"]),
        "processed_folder": str(folders["processed"]),
        "control_folder": str(folders["control"]),
    }
