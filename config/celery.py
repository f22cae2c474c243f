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

from config import brokerfix
from config.env import env_bool
from mcptax.procgroup import kill_tracked_groups

brokerfix.install()  # a Redis restart must not stop a worker (see config/brokerfix.py)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# The embedded run (`make run`, `make serve`) is one person's own machine, often a root container:
# celery's running-as-root warning tells them nothing they can act on. A deployment keeps it.
if env_bool("MCPTAX_EMBEDDED", False):
    warnings.filterwarnings("ignore", category=SecurityWarning)

app = Celery("mcp_tax")
# The queues, routes and beat schedule are settings (CELERY_TASK_QUEUES, CELERY_TASK_ROUTES,
# CELERY_BEAT_SCHEDULE in config/settings.py), read from the environment there like any other.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_default_queue="celery",
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_time_limit=15 * 60,
    task_soft_time_limit=14 * 60,
    broker_connection_retry_on_startup=True,
    timezone="UTC",
)
# Each app's tasks live in its tasks.py, the module their names spell (dashboard.tasks.poll_server).
app.autodiscover_tasks(["dashboard", "ingest"])


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
