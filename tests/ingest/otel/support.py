"""What the telemetry tests share: running a stored body's job to its end."""

from __future__ import annotations

from ingest.capture import pipeline
from ingest.capture.models import IngestJob
from tests.helpers import CONNECT_BUDGET, wait_until


def run_to_end(job_id: int) -> IngestJob:
    """The worker's part: run the job here or, when a worker of the session took it first (the
    PostgreSQL leg runs one on the same queue), wait for that run to end. Either way the figures
    read afterwards are one whole run's."""
    pipeline.run_job(job_id)
    wait_until(
        lambda: IngestJob.objects.get(pk=job_id).status in ("done", "failed"),
        timeout=CONNECT_BUDGET,
        message="the telemetry job to end",
    )
    return IngestJob.objects.get(pk=job_id)
