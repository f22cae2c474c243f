"""The full stack's files hold up across restarts and upgrades (no Docker here: read as data,
and the keys' life cycle run for real through manage.py)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import yaml

from scripts.make_env import ensure_env
from tests.helpers import manage_shell

ROOT = Path(__file__).resolve().parent.parent
APP_SERVICES = ("migrate", "web", "worker-poll", "worker-ingest", "worker-notify", "beat")


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_both_keys_are_required_from_the_environment_never_generated_per_start():
    compose = _compose()
    for name in APP_SERVICES:
        env = compose["services"][name]["environment"]
        for key in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
            # `${KEY:?...}`: compose refuses to start without it, instead of a fresh key each time.
            assert re.fullmatch(r"\$\{" + key + r":\?[^}]+\}", env[key]), (name, key, env.get(key))
    text = (ROOT / "docker-compose.yml").read_text() + (ROOT / "README.md").read_text()
    assert "token_urlsafe" not in text.split("## Full stack")[1].split("\n## ")[0]


def test_static_files_are_built_into_the_image_outside_every_volume():
    dockerfile = (ROOT / "Dockerfile").read_text()
    match = re.search(r"^ENV STATIC_ROOT=(\S+)$", dockerfile, re.M)
    assert match, "the image sets STATIC_ROOT"
    static_root = Path(match.group(1))
    assert dockerfile.index("ENV STATIC_ROOT") < dockerfile.index("collectstatic")
    for name in APP_SERVICES:
        for volume in _compose()["services"][name].get("volumes", []):
            target = Path(volume.split(":")[1])
            assert target not in (static_root, *static_root.parents), (name, volume)


def test_make_env_writes_the_keys_once_owner_only_and_never_replaces_them(tmp_path):
    env = tmp_path / ".env"
    env.write_text("ALLOWED_HOSTS=dash.example.com\nSECRET_KEY=kept-as-it-is")
    assert ensure_env(env) == ["FIELD_ENCRYPTION_KEY", "MINIO_ROOT_PASSWORD"]
    first = _env_file(env)
    assert first["SECRET_KEY"] == "kept-as-it-is" and first["ALLOWED_HOSTS"] == "dash.example.com"
    assert len(first["FIELD_ENCRYPTION_KEY"]) >= 40
    assert ensure_env(env) == [] and _env_file(env) == first

    fresh = tmp_path / "fresh.env"
    old_umask = os.umask(0o022)
    try:
        assert ensure_env(fresh) == ["SECRET_KEY", "FIELD_ENCRYPTION_KEY", "MINIO_ROOT_PASSWORD"]
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600


def test_a_secret_stored_before_a_restart_reads_after_it(tmp_path):
    """Two starts from the same .env, as `docker compose up` twice: the second decrypts the first's."""
    dotenv = tmp_path / ".env"
    ensure_env(dotenv)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env = {
        **base,
        **_env_file(dotenv),
        "DEBUG": "false",
        "ALLOWED_HOSTS": "localhost",
        "VAR_DIR": str(tmp_path / "var"),
        "STATIC_ROOT": str(tmp_path / "static"),
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    manage_shell(
        env,
        "from dashboard.teams.models import Team; from dashboard.servers.models import McpServer;"
        "t = Team.objects.create(name='ops');"
        "McpServer.objects.create(team=t, name='remote', transport='http', url='https://mcp.example.com/mcp',"
        " headers={'Authorization': 'Bearer sk-kept'})",
    )
    out = manage_shell(
        env,
        "from dashboard.servers.models import McpServer; print(McpServer.objects.get(name='remote').headers)",
    )
    assert "sk-kept" in out


def test_every_app_service_keeps_job_files_in_the_minio_bucket_the_stack_creates():
    compose = _compose()
    services = compose["services"]
    minio_user = services["minio"]["environment"]["MINIO_ROOT_USER"]
    minio_password = services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
    for name in APP_SERVICES:
        env = services[name]["environment"]
        assert env["INGEST_S3_ENDPOINT_URL"] == "http://minio:9000", name
        assert (env["INGEST_S3_ACCESS_KEY_ID"], env["INGEST_S3_SECRET_ACCESS_KEY"]) == (
            minio_user,
            minio_password,
        ), name
        # Started only once the bucket exists (directly, or after migrate, which waits for it).
        waits_for, todo = set(), [name]
        while todo:
            waits_for |= (new := set(services[todo.pop()].get("depends_on", {})) - waits_for)
            todo += new
        assert "minio-bucket" in waits_for, name
    bucket = services["web"]["environment"]["INGEST_S3_BUCKET"]
    assert f"local/{bucket}" in " ".join(services["minio-bucket"]["command"])
    assert "miniodata:/data" in services["minio"]["volumes"]


def test_every_long_running_service_restarts_by_itself():
    """A worker that exits on a broker fault (a Redis restart) must come back without a person:
    every service that runs for good has a restart policy; one-shot jobs run once."""
    services = _compose()["services"]
    one_shot = {"migrate", "minio-bucket"}
    for name, service in services.items():
        expected = "no" if name in one_shot else "unless-stopped"
        assert service.get("restart") == expected, (name, service.get("restart"))
    assert {"web", "worker-poll", "worker-ingest", "worker-notify", "beat", "db", "redis"} <= set(services)
