"""Celery tasks of the servers sub-package: thin wrappers over `dashboard.servers.polling`.

The task names keep their original `dashboard.tasks.*` spelling: messages in flight and the queue
routes in config/celery.py refer to them by name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from celery import Task, shared_task

from dashboard.servers.polling import dispatch_due, poll_server


@shared_task(name="dashboard.tasks.poll_server", ignore_result=True, acks_late=True, bind=True)
def poll_server_task(self: Task, server_id: int, trigger: str = "schedule") -> dict[str, Any]:
    # The task id is the lease: redelivered after its worker died, the same task takes its lock back.
    return poll_server(server_id, trigger=trigger, lease=self.request.id or "").to_dict()


def enqueue_poll(server_id: int, eta: datetime) -> None:
    poll_server_task.apply_async((server_id,), eta=eta)


@shared_task(name="dashboard.tasks.dispatch_due_polls", ignore_result=True)
def dispatch_due_polls() -> int:
    return len(dispatch_due(enqueue=enqueue_poll))
