"""Several hosts: the files of ingest jobs live in the shared S3-compatible storage, so a worker
with its own local folders (as on another host) runs an upload or an API body that the web side
received, and a job whose object is missing at first is retried by the worker until it appears.

PostgreSQL + Redis leg: real Celery worker processes, the S3 server of tests/s3server.py.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from ingest.capture.models import IngestJob
from ingest.capture.storage import ingest_storage
from ingest.capture.uploads import upload_dir
from tests.conftest import ROOT, make_envelope_log
from tests.helpers import stop_process, wait_until, worker_environment
from tests.ingest.capture.logs import API, bearer, stored_names

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class Host:
    """A `celery worker` process with its own VAR_DIR and MEDIA_ROOT, as on a host of its own."""

    def __init__(self, name: str, var_dir: Path, extra_env: dict[str, str]) -> None:
        self.var_dir = var_dir
        self.media = var_dir / "media"
        self.name = f"{name}-{os.getpid()}@{os.uname().nodename}"
        env = worker_environment() | {"VAR_DIR": str(var_dir), "MEDIA_ROOT": str(self.media)} | extra_env
        self._log = open(var_dir.parent / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "ingest", "--pool", "threads"]
            + ["--concurrency", "2", "--hostname", self.name, "--without-mingle", "--without-gossip"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def worker(self) -> str:
        """What IngestJob.worker records for a run of this process."""
        return f"{os.uname().nodename}:{self.proc.pid}"

    def local_files(self) -> list[Path]:
        return sorted(p for p in self.media.rglob("*") if p.is_file()) if self.media.exists() else []

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()


def _answering(names: list[str]) -> bool:
    from config.celery import app

    replies = app.control.ping(timeout=1.0)
    seen = {name for reply in replies for name in reply}
    return all(name in seen for name in names)


@contextmanager
def hosts(tmp_path: Path, *names: str, **extra_env: str) -> Iterator[list[Host]]:
    started = []
    try:
        for name in names:
            (tmp_path / name).mkdir()
            started.append(Host(name, tmp_path / name, dict(extra_env)))
        wait_until(lambda: _answering([h.name for h in started]), timeout=90, message="the workers to answer")
        yield started
    finally:
        for host in started:
            host.stop()


@contextmanager
def only_consumer(host: Host) -> Iterator[None]:
    """Every other worker stops consuming `ingest` for the block (Celery's remote control), so the
    job can only be taken by ``host``; they consume it again afterwards."""
    from config.celery import app

    others = [name for reply in app.control.ping(timeout=1.0) for name in reply if name != host.name]
    if others:
        app.control.cancel_consumer("ingest", destination=others, reply=True, timeout=5.0)
    try:
        yield
    finally:
        if others:
            app.control.add_consumer("ingest", destination=others, reply=True, timeout=5.0)


def _ended(job_filter: dict) -> list[IngestJob]:
    jobs = list(IngestJob.objects.filter(**job_filter))
    return jobs if jobs and all(j.status in ("done", "failed") for j in jobs) else []


def test_uploads_and_api_bodies_run_on_whichever_host_takes_them(
    postgres_and_redis, s3_server, alice_client, team, team_token, settings, tmp_path
):
    _, plaintext = team_token
    with hosts(tmp_path, "host-a", "host-b") as (host_a, host_b):
        for round_no, host in enumerate((host_a, host_b)):
            with only_consumer(host):
                upload = make_envelope_log(4, bad_lines=1, session=f"up-{round_no}")
                response = alice_client.post(
                    reverse("ingest_upload", args=[team.slug]),
                    {"file": SimpleUploadedFile(f"u{round_no}.jsonl", upload)},
                )
                assert response.status_code == 302
                queued = alice_client.post(
                    f"{API}?wait=false&filename=api-{round_no}",
                    gzip.compress(make_envelope_log(2, session=f"api-{round_no}")),
                    content_type="application/gzip",
                    **bearer(plaintext),
                )
                assert queued.status_code == 202
                jobs = wait_until(
                    lambda n=round_no: _ended({"team": team, "filename__in": [f"u{n}.jsonl", f"api-{n}"]}),
                    timeout=90,
                    message=f"round {round_no}'s two jobs to end",
                )
            by_source = {job.source: job for job in jobs}
            up, api = by_source["upload"], by_source["api"]
            for job in (up, api):
                assert job.status == "done" and job.worker == host.worker, (job.error, job.worker)
                assert job.storage_name.startswith(upload_dir(team) + "/") and job.path == ""
                assert job.attempts == 1 and job.reconciles
            assert (up.lines_read, up.stored, up.ignored, up.quarantined, up.calls_stored) == (11, 8, 2, 1, 4)
            assert (api.lines_read, api.stored, api.calls_stored) == (6, 4, 2)
            # Read from the bucket: neither the web side nor the host keeps a local copy.
            assert {up.storage_name, api.storage_name} <= set(s3_server.keys())
            assert host.local_files() == [] and not (settings.MEDIA_ROOT / "ingest").exists()
    assert {up.storage_name for up in IngestJob.objects.filter(source="upload")} <= set(stored_names())


def test_a_job_whose_object_is_missing_is_retried_by_the_worker_until_it_appears(
    postgres_and_redis, s3_server, team, tmp_path
):
    from ingest.capture import pipeline
    from ingest.tasks import run_ingest_job

    data = make_envelope_log(3)
    name = f"{upload_dir(team)}/arrives-later.jsonl"
    job = pipeline.create_job(team, source="upload", filename="later", storage_name=name, size=len(data))
    retries = {"INGEST_RETRY_BASE_SECONDS": "2", "INGEST_RETRY_MAX": "4"}
    with hosts(tmp_path, "host-r", **retries) as (host,), only_consumer(host):
        run_ingest_job.delay(job.pk)

        def retrying() -> IngestJob | None:
            job.refresh_from_db()
            return job if job.status == "retrying" else None

        first = wait_until(retrying, timeout=60, message="the first attempt to fail")
        assert first.attempts == 1 and "cannot open" in first.error and first.retry_at is not None
        ingest_storage().save(name, ContentFile(data))  # the object arrives in the bucket
        done = wait_until(lambda: _ended({"pk": job.pk}), timeout=90, message="the retry to finish")[0]
    # Retried by the worker's own delayed message (no beat runs here), on the same host.
    assert done.status == "done" and done.worker == host.worker and done.attempts >= 2
    assert (done.lines_read, done.stored, done.calls_stored, done.error) == (8, 6, 3, "")
