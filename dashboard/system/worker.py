"""The worker's own reports: its heartbeat (the overview's "no worker" banner reads it) and the
outages its tasks ran into. Receivers of Celery's worker signals, connected in
`DashboardConfig.ready` (extension points of Celery's, listed in docs/architecture.md).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from celery import current_app
from django.db import connection

from dashboard.system import outages
from dashboard.system.models import HEARTBEAT_EVERY, WorkerHeartbeat

logger = logging.getLogger(__name__)


def consumed_queues(app: Any) -> list[str]:
    """The queues this worker process consumes (its -Q; every declared queue without one)."""
    return sorted(app.amqp.queues.consume_from or app.amqp.queues)


def announce_worker(sender: Any = None, **kwargs: Any) -> None:
    """Receiver of Celery's `worker_ready` (connected in DashboardConfig.ready): record the worker
    and its queues now, then every HEARTBEAT_EVERY seconds from a thread of its main process.

    The worker itself writes its heartbeat, not a task on some queue: a worker started for one
    queue still reports, and the page can name a queue that nobody consumes.
    """
    hostname = getattr(sender, "hostname", None) or socket.gethostname()
    app = getattr(sender, "app", None) or current_app
    queues = consumed_queues(app)

    def beat_forever() -> None:
        # A daemon thread: it ends with the worker process.
        while True:
            try:
                WorkerHeartbeat.beat(hostname, queues)
            except Exception as exc:  # the database may be down or not migrated yet: try again next time
                if outages.record_exception(exc, f"heartbeat of {hostname}") is None:
                    logger.warning("could not record the worker's heartbeat", exc_info=True)
            finally:
                connection.close()
            time.sleep(HEARTBEAT_EVERY)

    threading.Thread(target=beat_forever, name="mcp-tax-heartbeat", daemon=True).start()


def retire_worker(sender: Any = None, **kwargs: Any) -> None:
    """Receiver of Celery's `worker_shutdown`: however the worker ends (a stop, or a fault such as
    "Unrecoverable error"), its heartbeat goes now, so the health page flags its queues at once
    instead of two minutes later. Never raises: the worker is on its way out."""
    hostname = getattr(sender, "hostname", None) or socket.gethostname()
    try:
        WorkerHeartbeat.objects.filter(hostname=hostname).delete()
    except Exception:
        logger.warning("could not remove the heartbeat of %s", hostname, exc_info=True)
    finally:
        connection.close()


def on_task_trouble(sender: Any = None, **kwargs: Any) -> None:
    """Receiver of Celery's `task_failure` and `task_retry`: a task that failed (or retries) because
    the database or the broker is down is recorded as that outage, so the health page shows what
    the worker saw. Never raises: a signal handler must not take the worker down."""
    exc = kwargs.get("exception") or kwargs.get("reason")
    if not isinstance(exc, BaseException):
        return
    name = getattr(sender, "name", None) or getattr(getattr(kwargs.get("request"), "task", None), "name", "")
    try:
        outages.record_exception(exc, f"task {name or 'unknown'}")
    except Exception:
        logger.exception("could not record the outage a task ran into")
