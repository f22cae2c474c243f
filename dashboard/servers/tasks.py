"""Celery tasks of the servers sub-package: thin wrappers over `dashboard.servers.polling`.

The task names keep their original `dashboard.tasks.*` spelling: messages in flight and the queue
routes in config/celery.py refer to them by name.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from dashboard.servers.polling import dispatch_due, poll_server


@shared_task(name="dashboard.tasks.poll_server", ignore_result=True, acks_late=True)
def poll_server_task(server_id: int, trigger: str = "schedule") -> dict[str, Any]:
    return poll_server(server_id, trigger=trigger).to_dict()


def enqueue_poll(server_id: int) -> None:
    poll_server_task.delay(server_id)


@shared_task(name="dashboard.tasks.dispatch_due_polls", ignore_result=True)
def dispatch_due_polls() -> int:
    return len(dispatch_due(enqueue=enqueue_poll))
