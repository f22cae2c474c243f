"""The Celery app: three queues that scale independently, tasks acknowledged late.

Tasks are written to be idempotent (claims by conditional UPDATE, dedupe keys), so acking late
and re-delivering after a lost worker is safe.
"""

import os
import warnings
from typing import Any

from celery import Celery
from celery.exceptions import SecurityWarning
from celery.signals import worker_process_shutdown, worker_shutdown, worker_shutting_down
from kombu import Queue

from mcptax.procgroup import kill_tracked_groups

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# The embedded run (`make run`, `make serve`) is one person's own machine, often a root container:
# celery's running-as-root warning tells them nothing they can act on. A deployment keeps it.
if os.environ.get("MCPTAX_EMBEDDED") == "1":
    warnings.filterwarnings("ignore", category=SecurityWarning)

# The dispatcher's tick; settings.POLL_DISPATCH_EVERY repeats it for the dispatcher's look-ahead
# (this module loads before Django's settings are configured, so it cannot read them here).
DISPATCH_EVERY = 15.0
# Watched folders are read on the disk of the worker that scans them: INGEST_WATCH_QUEUE names the
# queue the scan goes to, so only the worker of the host holding the logs consumes it (for
# example `-Q ingest,watch-logs1`). Read here, from the environment, for the same reason.
WATCH_QUEUE = os.environ.get("INGEST_WATCH_QUEUE", "").strip() or "ingest"
QUEUES = ["poll", "ingest", "notify", "celery"] + ([WATCH_QUEUE] if WATCH_QUEUE != "ingest" else [])

app = Celery("mcp_tax")
app.config_from_object("django.conf:settings", namespace="CELERY")

app.conf.update(
    # Each queue needs its own routing key: left out, Celery binds every queue with the default
    # key "celery" on the same direct exchange, and one message would land in all of them.
    task_queues=[Queue(name, routing_key=name) for name in QUEUES],
    task_default_queue="celery",
    task_routes={
        "dashboard.tasks.poll_server": {"queue": "poll"},
        "dashboard.tasks.dispatch_due_polls": {"queue": "poll"},
        # An exact name wins over the pattern below.
        "ingest.tasks.scan_watched_folders": {"queue": WATCH_QUEUE},
        "ingest.tasks.*": {"queue": "ingest"},
        "dashboard.tasks.deliver_notification": {"queue": "notify"},
        "dashboard.tasks.sweep_notifications": {"queue": "notify"},
    },
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_time_limit=15 * 60,
    task_soft_time_limit=14 * 60,
    broker_connection_retry_on_startup=True,
    timezone="UTC",
    # Periodic work lives here, in code, so every deployment runs the same schedule.
    beat_schedule={
        "dispatch-due-polls": {"task": "dashboard.tasks.dispatch_due_polls", "schedule": DISPATCH_EVERY},
        "sweep-notifications": {"task": "dashboard.tasks.sweep_notifications", "schedule": 60.0},
        "scan-watched-folders": {"task": "ingest.tasks.scan_watched_folders", "schedule": 10.0},
        "resume-stalled-ingest-jobs": {"task": "ingest.tasks.resume_stalled_jobs", "schedule": 60.0},
        "purge-expired-content": {"task": "ingest.tasks.purge_expired_content", "schedule": 3600.0},
    },
)
# Tasks live beside the code they wrap, in each sub-package's tasks.py.
app.autodiscover_tasks(
    [
        "dashboard.servers",
        "dashboard.alerts",
        "dashboard.system",
        "ingest.capture",
        "ingest.fidelity",
    ]
)


@app.task(name="config.ping")
def ping() -> str:
    return "pong"


# Stdio servers run in their own process groups (so a stuck server and its helpers can be stopped
# whole), which also means they outlive a worker that dies: nothing reaps them with it. Every
# way a worker process ends kills the groups it started (mcptax.procgroup keeps the registry).
# - worker_shutting_down: the main process begins a warm or cold shutdown. With the thread or solo
#   pool (the embedded run) the polls run in it, so a poll waiting on a slow server ends now
#   instead of holding the shutdown up until its timeout (long enough for a supervisor to SIGKILL
#   the worker and orphan the server); the poll is recorded as internal_error, not blamed on the
#   server.
# - worker_shutdown / worker_process_shutdown: the main process or a prefork child is exiting;
#   whatever is still tracked then is killed.
# A prefork child that gets SIGTERM (a cold shutdown, or a stop of every process) needs nothing
# more: billiard turns it into SystemExit, so the poll's own shielded stop runs on the way out.
def _kill_stdio_groups(**_: Any) -> None:
    kill_tracked_groups()


for _name, _signal in (
    ("shutting_down", worker_shutting_down),
    ("shutdown", worker_shutdown),
    ("process_shutdown", worker_process_shutdown),
):
    _signal.connect(_kill_stdio_groups, weak=False, dispatch_uid=f"config.celery.stdio.{_name}")
