"""The broker as the web side sees it: sending a task without a 500, and how deep each queue is.

`send` is the one way a request hands work to a worker: a broker outage is recorded (see
dashboard.system.outages) and answered False, so the caller says what happens instead (a saved
upload is picked up by the stalled-job sweep; "Poll now" asks to try again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
