"""The skeleton: settings from the environment, deploy checks, teams, tokens, the real worker."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

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
    assert s["broker"] == "filesystem://"
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


def test_login_page_and_demo_user_can_log_in(client, db):
    assert client.get(reverse("home")).status_code == 302
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b'name="password"' in page.content
    out = StringIO()
    call_command("demo", "--json", "--skip-servers", stdout=out)
    demo = json.loads(out.getvalue().strip().splitlines()[-1])
    response = client.post(reverse("login"), {"username": demo["username"], "password": demo["password"]})
    assert response.status_code == 302
    overview = client.get(reverse("home"), follow=True)
    assert overview.status_code == 200
    assert overview.redirect_chain[-1][0] == reverse("team_overview", args=[demo["team"]])


def test_another_teams_pages_are_not_found(alice_client, team, user_factory, team_factory):
    bob = user_factory("bob")
    other = team_factory("Other", bob)
    assert alice_client.get(reverse("team_settings", args=[team.slug])).status_code == 200
    assert alice_client.get(reverse("team_overview", args=[other.slug])).status_code == 404
    assert alice_client.get(reverse("team_settings", args=[other.slug])).status_code == 404
    token_id = other.api_tokens.create(name="x", key_id="abc", secret_hash="0" * 64).pk
    response = alice_client.post(reverse("revoke_api_token", args=[other.slug, token_id]))
    assert response.status_code == 404
    assert other.api_tokens.get(pk=token_id).revoked_at is None


def test_api_tokens_are_shown_once_stored_hashed_and_revocable(alice_client, team, client):
    response = alice_client.post(reverse("create_api_token", args=[team.slug]), {"name": "github-actions"})
    assert response.status_code == 200
    plaintext = response.context["plaintext"]
    assert plaintext.startswith("mcpt_")
    token = team.api_tokens.get(name="github-actions")
    assert plaintext.split("_", 2)[2] not in token.secret_hash and len(token.secret_hash) == 64
    assert plaintext not in alice_client.get(reverse("team_settings", args=[team.slug])).content.decode()

    api = client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert api.status_code == 200 and api.json()["slug"] == team.slug
    assert client.get("/api/v1/team").status_code == 401
    assert client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}x").status_code == 401

    revoke = alice_client.post(
        reverse("revoke_api_token", args=[team.slug, token.pk]), HTTP_HX_REQUEST="true"
    )
    assert revoke.status_code == 200 and b"revoked" in revoke.content
    assert client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 401


def test_members_cannot_create_tokens(client, team, user_factory):
    from dashboard.teams.models import Membership

    carol = user_factory("carol")
    Membership.objects.create(team=team, user=carol, role=Membership.Role.MEMBER)
    client.force_login(carol)
    assert client.post(reverse("create_api_token", args=[team.slug]), {"name": "x"}).status_code == 404
    assert not team.api_tokens.exists()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_real_celery_worker_on_redis_writes_to_postgresql(postgres_and_redis, celery_worker_process):
    from dashboard.system.models import WorkerHeartbeat
    from dashboard.system.tasks import worker_heartbeat

    name = f"ci-probe-{os.getpid()}"
    worker_heartbeat.delay(name)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not WorkerHeartbeat.objects.filter(hostname=name).exists():
        time.sleep(0.2)
    assert WorkerHeartbeat.objects.filter(hostname=name).exists(), "the worker did not run the task"


def test_every_model_has_an_admin_page_that_loads(client, django_user_model, db):
    from django.apps import apps
    from django.contrib import admin

    admin_user = django_user_model.objects.create_superuser("op", "op@localhost", "pw-for-tests-123")
    client.force_login(admin_user)
    for app in ("dashboard", "ingest"):
        for model in apps.get_app_config(app).get_models():
            assert model in admin.site._registry, f"{model.__name__} has no admin"
            url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
            assert client.get(url).status_code == 200, url


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_run_embedded_serves_and_one_signal_stops_everything(tmp_path, signum):
    """`make run`'s last step: web, worker and beat come up; Ctrl-C (or kill) leaves nothing behind."""
    import socket
    import urllib.request

    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY"}
    }
    env.update(VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "run_embedded", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline and status is None:
            try:
                status = urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2).status
            except OSError:
                time.sleep(0.5)
        assert status == 200
        # The worker announces itself when ready, so the overview knows one is running.
        beats = 0
        while time.monotonic() < deadline and not beats:
            with sqlite3.connect(tmp_path / "db.sqlite3") as db:
                beats = db.execute("SELECT count(*) FROM dashboard_workerheartbeat").fetchone()[0]
            time.sleep(0.5)
        assert beats == 1
        children = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(children) == 2, "a web server and a worker"
        proc.send_signal(signum)
        proc.wait(timeout=30)
        time.sleep(1)
        alive = [pid for pid in children if os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid)]
        assert alive == [], "children outlived run_embedded"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _state(pid: str) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
