"""Celery tasks: thin wrappers over plain functions, so tests call the logic directly too."""

import logging
import socket

from celery import shared_task
from celery.signals import worker_ready

from dashboard.system.models import WorkerHeartbeat

logger = logging.getLogger(__name__)


@worker_ready.connect
def _announce_worker(sender=None, **kwargs) -> None:
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


@shared_task(name="dashboard.tasks.poll_server", ignore_result=True, acks_late=True)
def poll_server_task(server_id: int, trigger: str = "schedule") -> dict:
    from dashboard.servers.polling import poll_server

    return poll_server(server_id, trigger=trigger).to_dict()


@shared_task(name="dashboard.tasks.dispatch_due_polls", ignore_result=True)
def dispatch_due_polls() -> int:
    from dashboard.servers.polling import dispatch_due

    return len(dispatch_due())


@shared_task(name="dashboard.tasks.deliver_notification", bind=True, ignore_result=True, max_retries=None)
def deliver_notification(self, delivery_id: int) -> str:
    from dashboard.alerts.notify.delivery import deliver

    outcome = deliver(delivery_id)
    if outcome.status == "retry":
        # The row counts attempts and decides when to give up; Celery only waits.
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@shared_task(name="dashboard.tasks.sweep_notifications", ignore_result=True)
def sweep_notifications() -> int:
    from dashboard.alerts.budgets import expire_silences
    from dashboard.alerts.notify.delivery import sweep_pending

    return len(sweep_pending()) + expire_silences()
