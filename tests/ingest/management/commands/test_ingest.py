"""`manage.py ingest` (ingest/management/commands/ingest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ingest.capture.models import LineRecord
from tests.conftest import ROOT
from tests.ingest.capture.logs import (
    EnvelopeLog,
)


@pytest.mark.django_db
def test_management_command_prints_counts(team, tmp_path):
    path = EnvelopeLog().initialize().call("w", {"content": "x"}).write(tmp_path / "c.jsonl")
    out = StringIO()
    call_command("ingest", str(path), "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["read"] == 5 and summary["stored"] == 2 and summary["ignored"] == 3
    assert summary["calls_stored"] == 1 and summary["reconciles"] and summary["status"] == "done"
    assert summary["verdict_counts"] == {"unverifiable": 1}
    assert summary["ok"] is True and summary["failure"] == ""


@pytest.mark.django_db
def test_an_undetectable_format_fails_with_the_reason(team, tmp_path):
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(b"this is not a log\nneither is this\n")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="cannot tell the log format"):
        call_command("ingest", str(path), "--json", stdout=out, stderr=err)
    summary = json.loads(out.getvalue())
    assert summary["ok"] is False and "cannot tell the log format" in summary["failure"]
    # A wrong file is a failed job with the reason, not a "done" job of quarantined lines.
    assert summary["status"] == "failed" and summary["error"].startswith("cannot tell the log format")
    assert (summary["read"], summary["quarantined"], summary["stored"]) == (0, 0, 0)
    assert not LineRecord.objects.exists()


@pytest.mark.django_db
def test_a_log_whose_every_line_is_quarantined_fails(team, tmp_path):
    log = EnvelopeLog()
    log.frame("c2s", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "w"}})
    log.lines = [line.replace(b'"direction": "c2s"', b'"direction": "sideways"') for line in log.lines]
    path = log.write(tmp_path / "bad.jsonl")
    with pytest.raises(CommandError, match=r"every line was quarantined \(invalid_field:direction 1\)"):
        call_command("ingest", str(path), stdout=StringIO(), stderr=StringIO())


@pytest.mark.django_db
def test_an_empty_file_fails(team, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(CommandError, match="cannot tell the log format"):
        call_command("ingest", str(path), stdout=StringIO(), stderr=StringIO())


SETUP = "import django; django.setup(); from dashboard.teams.models import Team; Team.objects.create(name='T', slug='t')"


@pytest.mark.slow
def test_exit_status_of_the_command_in_a_process(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("REDIS_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300
    )
    subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True, timeout=60)
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"not a log at all\n")
    good = EnvelopeLog().initialize().call("w", {"content": "x"}).write(tmp_path / "good.jsonl")

    def ingest(path) -> subprocess.CompletedProcess:
        argv = [sys.executable, "manage.py", "ingest", str(path), "--team", "t"]
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    failed = ingest(garbage)
    assert failed.returncode == 1, failed
    assert "cannot tell the log format" in failed.stderr
    passed = ingest(good)
    assert passed.returncode == 0, passed
    assert "1 calls stored" in passed.stdout


LOGS = ROOT / "tests" / "data" / "logs"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "fmt", "expected"),
    [
        (
            "codex_exec.jsonl",
            "auto",
            {
                ("context7", "resolve-library-id", False),
                ("files", "write_file", False),
                ("grafana", "query_prometheus", True),
                ("context7", "get-library-docs", False),
            },
        ),
        (
            "cline_ui_messages.json",
            "cline",
            {("figma", "get_file", True), ("jira", "create_issue", True), ("jira", "search", True)},
        ),
        ("roo_ui_messages.json", "auto", {("sqlite", "import_csv", False)}),
    ],
)
def test_codex_exec_and_cline_logs_ingest_with_their_calls_and_errors(team, name, fmt, expected):
    from ingest.capture.models import ToolCall

    out = StringIO()
    call_command("ingest", str(LOGS / name), "--format", fmt, "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["reconciles"] and summary["calls_stored"] == len(expected), summary
    stored = {(c.server_label, c.tool, c.is_error) for c in ToolCall.objects.filter(team=team)}
    assert stored == expected
    assert set(ToolCall.objects.values_list("source_format", flat=True)) == {
        "codex-exec" if name.startswith("codex") else "cline"
    }
