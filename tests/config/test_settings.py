"""The skeleton: settings from the environment, deploy checks, teams, tokens, the real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from tests.conftest import ROOT

PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "x" * 64 + "-not-a-real-key-but-long-and-random-enough-0123456789",
    "ALLOWED_HOSTS": "tax.example.com",
    "DATABASE_URL": "postgres://app:secret@db.internal:5433/taxdb",
    "REDIS_URL": "redis://cache.internal:6380/2",
}


def _settings_in_subprocess(env_overrides: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "db = s.DATABASES['default']; "
        "print(json.dumps({'debug': s.DEBUG, 'hosts': s.ALLOWED_HOSTS, 'engine': db['ENGINE'], "
        "'db_name': db['NAME'], 'db_host': db['HOST'], 'db_port': db['PORT'], 'db_user': db['USER'], "
        "'broker': s.CELERY_BROKER_URL, 'ssl_redirect': s.SECURE_SSL_REDIRECT, 'secret': s.SECRET_KEY}))"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY"}
    }
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "VAR_DIR": str(tmp_path)}, **env_overrides)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


def test_settings_come_from_the_environment(tmp_path):
    result = _settings_in_subprocess(PRODUCTION_ENV, tmp_path)
    assert result.returncode == 0, result.stderr
    s = json.loads(result.stdout)
    assert s["debug"] is False
    assert s["hosts"] == ["tax.example.com"]
    assert s["engine"] == "django.db.backends.postgresql"
    assert (s["db_name"], s["db_host"], s["db_port"], s["db_user"]) == ("taxdb", "db.internal", 5433, "app")
    assert s["broker"] == "redis://cache.internal:6380/2"
    assert s["ssl_redirect"] is True
    assert s["secret"] == PRODUCTION_ENV["SECRET_KEY"]


def test_embedded_defaults_use_sqlite_a_filesystem_broker_and_a_kept_secret(tmp_path):
    first = _settings_in_subprocess({}, tmp_path)
    assert first.returncode == 0, first.stderr
    s = json.loads(first.stdout)
    assert s["engine"] == "django.db.backends.sqlite3"
    assert s["db_name"] == str(tmp_path / "db.sqlite3")
    assert s["broker"] == "filesystem://localhost/"
    assert s["debug"] is True
    # The generated key is kept under var/, so sessions survive a restart.
    assert (tmp_path / "secret_key").read_text().strip() == s["secret"]
    again = json.loads(_settings_in_subprocess({}, tmp_path).stdout)
    assert again["secret"] == s["secret"]


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    result = _settings_in_subprocess(env, tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_bad_boolean_is_a_clear_error(tmp_path):
    result = _settings_in_subprocess({"DEBUG": "maybe"}, tmp_path)
    assert result.returncode != 0
    assert "DEBUG must be a boolean" in result.stderr


def test_a_bad_outbound_network_and_the_removed_reference_switch_stop_the_start(tmp_path):
    bad = _settings_in_subprocess({"OUTBOUND_ALLOW_NETWORKS": "10.0.0.0/8,gateway.internal"}, tmp_path)
    assert bad.returncode != 0
    assert "OUTBOUND_ALLOW_NETWORKS: 'gateway.internal' is not a network" in bad.stderr
    removed = _settings_in_subprocess({"REFERENCE_ALLOW_PRIVATE": "true"}, tmp_path)
    assert removed.returncode != 0
    assert (
        "REFERENCE_ALLOW_PRIVATE was removed" in removed.stderr
        and "OUTBOUND_ALLOW_NETWORKS" in removed.stderr
    )
    assert (
        _settings_in_subprocess({"OUTBOUND_ALLOW_NETWORKS": "10.20.0.0/16, fd00::/8"}, tmp_path).returncode
        == 0
    )


def test_check_deploy_passes_with_production_settings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(PRODUCTION_ENV, VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.django_db
def test_no_missing_migrations():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits non-zero when a migration is missing
        pytest.fail(f"Missing migrations (exit {exc.code}):\n{out.getvalue()}")


def _storage_and_routes(env_overrides: dict[str, str], tmp_path) -> dict:
    code = (
        "import json, django; django.setup(); from django.core.files.storage import storages; "
        "from config.celery import app; s = storages['ingest']; r = app.amqp.router; "
        "print(json.dumps({'backend': type(s).__name__, 'location': str(getattr(s, 'location', '')), "
        "'bucket': getattr(s, 'bucket_name', None), 'endpoint': getattr(s, 'endpoint_url', None), "
        "'style': getattr(s, 'addressing_style', None), "
        "'scan': r.route({}, 'ingest.tasks.scan_watched_folders')['queue'].name, "
        "'job': r.route({}, 'ingest.tasks.run_ingest_job')['queue'].name}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INGEST_S3_", "INGEST_WATCH_QUEUE"))}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "VAR_DIR": str(tmp_path)}, **env_overrides)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_ingest_storage_is_local_by_default_and_an_s3_bucket_when_one_is_named(tmp_path):
    local = _storage_and_routes({}, tmp_path)
    assert (local["backend"], local["location"]) == ("FileSystemStorage", str(tmp_path / "media"))
    assert local["scan"] == local["job"] == "ingest"
    s3 = _storage_and_routes(
        {
            "INGEST_S3_BUCKET": "jobs",
            "INGEST_S3_ENDPOINT_URL": "http://minio:9000",
            "INGEST_S3_PREFIX": "/tax/",
            "INGEST_WATCH_QUEUE": "watch-logs1",
        },
        tmp_path,
    )
    assert (s3["backend"], s3["bucket"], s3["endpoint"]) == ("S3Storage", "jobs", "http://minio:9000")
    assert (s3["location"], s3["style"]) == ("tax", "path")
    # Watched folders are scanned on the host whose worker consumes their queue; jobs go anywhere.
    assert (s3["scan"], s3["job"]) == ("watch-logs1", "ingest")
