"""Celery tasks of the alerts sub-package: delivering notifications and the periodic sweep.

The task names keep their original `dashboard.tasks.*` spelling: messages in flight and the queue
routes in config/celery.py refer to them by name.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery import Task, shared_task

from dashboard.alerts.budgets import expire_silences
from dashboard.alerts.notify.delivery import deliver, sweep_pending
from dashboard.system import broker

log = logging.getLogger(__name__)


@shared_task(name="dashboard.tasks.deliver_notification", bind=True, ignore_result=True, max_retries=None)
def deliver_notification(self: Task[Any, str], delivery_id: int) -> str:
    outcome = deliver(delivery_id)
    if outcome.status == "retry":
        # The row counts attempts and decides when to give up; Celery only waits.
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


def enqueue_delivery(delivery_id: int) -> None:
    deliver_notification.delay(delivery_id)


def on_deliveries_created(sender: Any, delivery_ids: list[int], **kwargs: Any) -> None:
    """Receiver of `deliveries_created` (connected in DashboardConfig.ready)."""
    for pk in delivery_ids:
        try:
            # A broker outage is recorded and must not break the poll: the sweep sends it later.
            broker.send(functools.partial(enqueue_delivery, pk), f"sending delivery {pk}")
        except Exception:
            log.exception("could not enqueue delivery %s", pk)


@shared_task(name="dashboard.tasks.sweep_notifications", ignore_result=True)
def sweep_notifications() -> int:
    return len(sweep_pending(enqueue=enqueue_delivery)) + expire_silences()
