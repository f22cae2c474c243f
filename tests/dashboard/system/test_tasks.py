"""The worker heartbeat task on a real worker."""

from __future__ import annotations

import os

import pytest

from tests.helpers import wait_until


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_real_celery_worker_on_redis_writes_to_postgresql(postgres_and_redis, celery_worker_process):
    from dashboard.system.models import WorkerHeartbeat
    from dashboard.tasks import worker_heartbeat

    name = f"ci-probe-{os.getpid()}"
    worker_heartbeat.delay(name)
    wait_until(
        lambda: WorkerHeartbeat.objects.filter(hostname=name).exists(), timeout=30, message="the heartbeat"
    )
    assert WorkerHeartbeat.objects.get(hostname=name).last_seen is not None
