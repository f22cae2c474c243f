"""A real S3-compatible server for the tests: moto's server mode (`python -m moto.server`, from the
`moto[server]` package of the test extra) in its own process on a free loopback port.

MinIO's server binary comes from no package registry this project installs from, so the
PostgreSQL leg runs the ingest storage against moto's S3 API instead: real HTTP, real boto3 and
django-storages on both sides, the same S3 calls MinIO answers in the compose stack.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import free_port, stop_process, wait_for_port

BUCKET = "mcptax-test-ingest"
ACCESS_KEY = "test-access-key"
SECRET_KEY = "test-secret-key"


class S3Server:
    """One moto server process; ``env`` is what a process needs to use it as INGEST_S3_*."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for_port(self.port, self.proc, timeout=60)
        except BaseException:
            self.stop()
            raise
        self.client().create_bucket(Bucket=BUCKET)

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )

    @property
    def env(self) -> dict[str, str]:
        return {
            "INGEST_S3_BUCKET": BUCKET,
            "INGEST_S3_ENDPOINT_URL": self.endpoint,
            "INGEST_S3_ACCESS_KEY_ID": ACCESS_KEY,
            "INGEST_S3_SECRET_ACCESS_KEY": SECRET_KEY,
        }

    def storage_setting(self) -> dict[str, Any]:
        """STORAGES["ingest"] as config/settings.py builds it from ``env``."""
        return {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": self.endpoint,
                "access_key": ACCESS_KEY,
                "secret_key": SECRET_KEY,
                "region_name": "us-east-1",
                "location": "",
                "addressing_style": "path",
                "max_memory_size": 2 * 1024 * 1024,
            },
        }

    def empty(self) -> None:
        client = self.client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys})

    def keys(self) -> list[str]:
        client = self.client()
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def stop(self) -> None:
        stop_process(self.proc, timeout=10)
        self._log.close()


def wanted() -> bool:
    """The PostgreSQL leg runs the ingest storage on S3 (TEST_S3=1 asks for it on SQLite too)."""
    return os.environ.get("DATABASE_URL", "").startswith("postgres") or os.environ.get("TEST_S3") == "1"
