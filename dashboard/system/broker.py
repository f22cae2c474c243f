"""The broker: handing work to a worker without a 500, and how deep each queue is.

`send_task` is the one way anything (a view, a flow, a command) hands work to a worker: the task
is named by its import path (`dashboard.tasks.poll_server`), so no view imports the task modules
that sit above it, and it is sent once the surrounding transaction commits, so the worker finds
the rows. A broker outage is recorded (see dashboard.system.outages) and read as
``Sent.ok is False``, so the caller says what happens instead (a saved upload is picked up by the
stalled-job sweep; "Poll now" asks to try again). A service that queues work takes an `Enqueue`
(`enqueue(task_name, where)` builds one), so it never names a task either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction

from dashboard.system import outages
from dashboard.system.models import WORK_QUEUES

logger = logging.getLogger(__name__)

# Every queue the Celery app declares (config/celery.py): the work queues and the default one.
QUEUES = (*WORK_QUEUES, "celery")
# kombu's Redis transport keeps a queue's priorities 3, 6 and 9 in lists of their own.
REDIS_PRIORITY_SEP = "\x06\x16"
REDIS_PRIORITIES = (3, 6, 9)


def send(call: Callable[[], Any], where: str) -> bool:
    """Run `call` (a task's `.delay(...)`); False, with the outage recorded, when the broker is
    down. Any other error is a bug and propagates."""
    try:
        call()
    except outages.BROKER_ERRORS as exc:
        outages.record(outages.BROKER, exc, where)
        return False
    return True


class Sent:
    """What `send_on_commit` did, read once the transaction has committed."""

    def __init__(self) -> None:
        # None: not sent yet (the transaction has not committed); False: the broker is down.
        self.ok: bool | None = None


def send_on_commit(call: Callable[[], Any], where: str) -> Sent:
    """`send` once the surrounding transaction commits (so the worker finds the rows)."""
    sent = Sent()

    def _send() -> None:
        sent.ok = send(call, where)

    transaction.on_commit(_send)
    return sent


class Enqueue(Protocol):
    """Hands a row's id to a worker (at `eta`, else now): the one shape of every service's
    `enqueue` argument. Tests pass a list's `append` or a lambda."""

    def __call__(self, pk: int, /, *, eta: datetime | None = None) -> object: ...


def task_named(name: str) -> Any:
    """The Celery task `name`: its import path (module, then function), checked by a test for
    every route and beat entry."""
    module, _, attribute = name.rpartition(".")
    return getattr(import_module(module), attribute)


def send_task(
    name: str, *args: Any, where: str, eta: datetime | None = None, after_commit: bool = True
) -> Sent:
    """Send the task `name` with `args` once the surrounding transaction commits (at once outside
    one, or with `after_commit=False`: a beat task whose rows are committed already). `where` names
    the sending in a recorded outage."""
    task = task_named(name)

    def call() -> Any:
        return task.delay(*args) if eta is None else task.apply_async(args, eta=eta)

    if after_commit:
        return send_on_commit(call, where)
    sent = Sent()
    sent.ok = send(call, where)
    return sent


def enqueue(name: str, where: str, *, after_commit: bool = True) -> Enqueue:
    """An `Enqueue` sending the task `name` with the id (see `send_task`); `where` may name the id
    as ``{pk}``."""

    def _enqueue(pk: int, /, *, eta: datetime | None = None) -> Sent:
        return send_task(name, pk, where=where.format(pk=pk), eta=eta, after_commit=after_commit)

    return _enqueue


@dataclass(frozen=True)
class BrokerState:
    kind: str  # redis | filesystem
    reachable: bool
    error: str
    # Messages waiting in each queue; None when it cannot be counted (the broker is down).
    depths: dict[str, int | None]
    # Redis only: messages a worker has taken but not acknowledged yet (ETA polls wait there).
    reserved: int | None


def state() -> BrokerState:
    """Reach the broker and count its queues; a failure is recorded as a broker outage."""
    if settings.REDIS_URL:
        return _redis_state()
    return _filesystem_state()


def _redis_state() -> BrokerState:
    client = outages.redis_client()
    assert client is not None
    try:
        client.ping()
        depths: dict[str, int | None] = {}
        for queue in QUEUES:
            keys = [queue, *(f"{queue}{REDIS_PRIORITY_SEP}{p}" for p in REDIS_PRIORITIES)]
            depths[queue] = sum(int(client.llen(key)) for key in keys)
        reserved = int(client.hlen("unacked"))
    except outages.BROKER_ERRORS as exc:
        outages.record(outages.BROKER, exc, "health check")
        return BrokerState("redis", False, f"{type(exc).__name__}: {exc}", dict.fromkeys(QUEUES), None)
    return BrokerState("redis", True, "", depths, reserved)


def _filesystem_state() -> BrokerState:
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    folder = Path(str(options.get("data_folder_in", "")))
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError as exc:
        outages.record(outages.BROKER, exc, "health check")
        return BrokerState("filesystem", False, f"{type(exc).__name__}: {exc}", dict.fromkeys(QUEUES), None)
    # The filesystem transport names each message <time>_<uuid>.<queue>.msg.
    depths: dict[str, int | None] = {
        queue: sum(1 for name in names if name.partition(".")[2] == f"{queue}.msg") for queue in QUEUES
    }
    return BrokerState("filesystem", True, "", depths, None)
