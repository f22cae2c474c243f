"""Celery tasks of the system sub-package: the worker heartbeat the overview's banner reads.

The task name keeps its original `dashboard.tasks.*` spelling: beat's schedule in config/celery.py
refers to it by name.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from celery import shared_task

from dashboard.system.models import WorkerHeartbeat

logger = logging.getLogger(__name__)


def announce_worker(sender: Any = None, **kwargs: Any) -> None:
    """Receiver of Celery's `worker_ready` (connected in DashboardConfig.ready)."""
    # Without this the overview would say "no worker" until beat's first heartbeat, 30 s in.
    try:
        WorkerHeartbeat.beat(getattr(sender, "hostname", None) or socket.gethostname())
    except Exception:  # the database may not be migrated yet; the periodic beat catches up
        logger.warning("could not record the worker's start", exc_info=True)


@shared_task(name="dashboard.tasks.worker_heartbeat", ignore_result=True)
def worker_heartbeat(hostname: str | None = None) -> str:
    name = hostname or socket.gethostname()
    WorkerHeartbeat.beat(name)
    return name
