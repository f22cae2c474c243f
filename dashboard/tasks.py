"""The dashboard's flow, top to bottom, and its Celery tasks (thin wrappers over it).

Beat -> alert, every step a named call into a sub-package:

1. beat's `dispatch_due_polls` hands each due server to the `poll` queue (`polling.dispatch_due`);
2. `poll_server` -> `poll`: claim the server, fetch its tools/list, record the snapshot with its
   counts and findings (`polling.poll_and_record`);
3. a new snapshot, once committed -> `after_new_snapshot`: judge it against the budgets and open,
   escalate or resolve its alerts (`budgets.evaluate_snapshot`); each alert event's deliveries are
   sent to the `notify` queue once committed (`delivery.create_event`);
4. `deliver_notification`: one attempt per delivery, retried by the row's own schedule
   (`delivery.deliver`); beat's `sweep_notifications` re-sends what was lost.

Each task's name is its import path (``dashboard.tasks.poll_server``): messages in flight, the
queue routes and beat's schedule in ``config/settings.py`` name them so, and a test checks that
every name resolves to a function here.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from django.db import transaction

from dashboard.alerts import budgets
from dashboard.alerts.notify.delivery import DELIVER_TASK, deliver, sweep_pending
from dashboard.servers import polling, provider
from dashboard.servers.models import Snapshot
from dashboard.servers.signals import snapshot_recorded
from dashboard.system import broker
from dashboard.system.models import WorkerHeartbeat
from dashboard.system.worker import consumed_queues

log = logging.getLogger(__name__)


def poll(server_id: int, *, trigger: str = "schedule", lease: str = "") -> polling.PollSummary:
    """Poll one server and, when its tool list changed, everything a new snapshot leads to (after
    the poll's rows are committed, so the alert and the notify worker find them)."""
    summary, snapshot = polling.poll_and_record(server_id, trigger=trigger, lease=lease)
    if snapshot is not None:
        new = snapshot
        transaction.on_commit(lambda: after_new_snapshot(new))
    return summary


def after_new_snapshot(snapshot: Snapshot) -> None:
    """Budgets and alerts, then the provider-exact count, then the extension point; each step is
    isolated: a failure is logged and recorded on the snapshot under the step's name, and never
    costs the count or the next step."""
    _isolated(snapshot, "budgets", budgets.evaluate_snapshot)
    _isolated(snapshot, "provider_count", provider.record)
    # Extension point (docs/architecture.md): other code may listen for new snapshots.
    for receiver, response in snapshot_recorded.send_robust(sender=Snapshot, snapshot=snapshot):
        if isinstance(response, Exception):
            # send_robust logs the traceback; the page shows which analysis is missing.
            polling.record_analysis_error(snapshot, getattr(receiver, "__name__", str(receiver)), response)


def _isolated(snapshot: Snapshot, stage: str, step: Callable[[Snapshot], object]) -> None:
    try:
        step(snapshot)
    except Exception as exc:
        log.exception("%s of snapshot %s failed", stage, snapshot.pk)
        polling.record_analysis_error(snapshot, stage, exc)


@shared_task(name=polling.POLL_TASK, ignore_result=True, acks_late=True, bind=True)
def poll_server(self: Task, server_id: int, trigger: str = "schedule") -> dict[str, Any]:
    # The task id is the lease: redelivered after its worker died, the same task takes its lock back.
    return poll(server_id, trigger=trigger, lease=self.request.id or "").to_dict()


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
    return len(sweep_pending(enqueue=enqueue)) + budgets.expire_silences()


@shared_task(name="dashboard.tasks.worker_heartbeat", ignore_result=True, bind=True)
def worker_heartbeat(self: Any, hostname: str | None = None) -> str:
    # Kept for messages already queued by an older beat; workers now report by themselves.
    name = hostname or socket.gethostname()
    WorkerHeartbeat.beat(name, consumed_queues(self.app))
    return name
