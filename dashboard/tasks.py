"""The dashboard's Celery tasks: thin wrappers over the plain functions of its sub-packages.

Each task's name is its import path (``dashboard.tasks.poll_server``): messages in flight, the
queue routes and beat's schedule in ``config/settings.py`` name them so, and a test checks that
every name resolves to a function here.
"""

from __future__ import annotations

import socket
from typing import Any

from celery import Task, shared_task

from dashboard.alerts.budgets import expire_silences
from dashboard.alerts.notify.delivery import DELIVER_TASK, deliver, sweep_pending
from dashboard.servers import polling
from dashboard.system import broker
from dashboard.system.models import WorkerHeartbeat
from dashboard.system.worker import consumed_queues


@shared_task(name=polling.POLL_TASK, ignore_result=True, acks_late=True, bind=True)
def poll_server(self: Task, server_id: int, trigger: str = "schedule") -> dict[str, Any]:
    # The task id is the lease: redelivered after its worker died, the same task takes its lock back.
    return polling.poll_server(server_id, trigger=trigger, lease=self.request.id or "").to_dict()


@shared_task(name="dashboard.tasks.dispatch_due_polls", ignore_result=True)
def dispatch_due_polls() -> int:
    return len(
        polling.dispatch_due(
            enqueue=broker.enqueue(
                polling.POLL_TASK, "dispatching the poll of server {pk}", after_commit=False
            )
        )
    )


@shared_task(name=DELIVER_TASK, bind=True, ignore_result=True, max_retries=None)
def deliver_notification(self: Task[Any, str], delivery_id: int) -> str:
    outcome = deliver(delivery_id)
    if outcome.status == "retry":
        # The row counts attempts and decides when to give up; Celery only waits.
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@shared_task(name="dashboard.tasks.sweep_notifications", ignore_result=True)
def sweep_notifications() -> int:
    enqueue = broker.enqueue(DELIVER_TASK, "sending delivery {pk}", after_commit=False)
    return len(sweep_pending(enqueue=enqueue)) + expire_silences()


@shared_task(name="dashboard.tasks.worker_heartbeat", ignore_result=True, bind=True)
def worker_heartbeat(self: Any, hostname: str | None = None) -> str:
    # Kept for messages already queued by an older beat; workers now report by themselves.
    name = hostname or socket.gethostname()
    WorkerHeartbeat.beat(name, consumed_queues(self.app))
    return name
