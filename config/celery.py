"""The Celery app: three queues that scale independently, tasks acknowledged late.

Tasks are written to be idempotent (claims by conditional UPDATE, dedupe keys), so acking late
and re-delivering after a lost worker is safe.
"""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# The dispatcher's tick; settings.POLL_DISPATCH_EVERY repeats it for the dispatcher's look-ahead
# (this module loads before Django's settings are configured, so it cannot read them here).
DISPATCH_EVERY = 15.0

app = Celery("mcp_tax")
app.config_from_object("django.conf:settings", namespace="CELERY")

app.conf.update(
    # Each queue needs its own routing key: left out, Celery binds every queue with the default
    # key "celery" on the same direct exchange, and one message would land in all of them.
    task_queues=[Queue(name, routing_key=name) for name in ("poll", "ingest", "notify", "celery")],
    task_default_queue="celery",
    task_routes={
        "dashboard.tasks.poll_server": {"queue": "poll"},
        "dashboard.tasks.dispatch_due_polls": {"queue": "poll"},
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
        "worker-heartbeat": {"task": "dashboard.tasks.worker_heartbeat", "schedule": 30.0},
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
