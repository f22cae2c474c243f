"""Celery tasks: thin wrappers over plain functions, so tests call the logic directly too."""

import socket

from celery import shared_task

from dashboard.models import WorkerHeartbeat


@shared_task(name="dashboard.tasks.worker_heartbeat", ignore_result=True)
def worker_heartbeat(hostname: str | None = None) -> str:
    name = hostname or socket.gethostname()
    WorkerHeartbeat.beat(name)
    return name
