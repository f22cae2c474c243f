"""Real servers installed from npm and PyPI and polled for real through the product's commands.

The set-up phase of `make test` (scripts/test_setup.py, through scripts/capture_servers.py)
installs them under var/servers; the test itself never reaches a registry, so it runs the same with
the network cut. Without the installs it skips locally and fails with CI=true (`need`).
"""

from __future__ import annotations

import json
import shlex
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from dashboard.servers.models import Snapshot
from tests.corpus.conftest import oracle_tax
from tests.helpers import need

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import capture_servers  # noqa: E402
import test_setup  # noqa: E402

LIVE = test_setup.LIVE_SERVERS
pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(scope="module")
def installed() -> list[capture_servers.CorpusServer]:
    missing = test_setup.live_servers_missing()
    if missing:
        need(f"not installed under var/servers: {', '.join(missing)}; run scripts/test_setup.py")
    return [s for s in capture_servers.CORPUS if s.name in LIVE]


@pytest.mark.parametrize("name", LIVE)
def test_a_real_server_polls_to_a_snapshot_whose_tax_is_the_formula(
    name, installed, team, tmp_path, monkeypatch
):
    monkeypatch.setenv("VAR_DIR", str(ROOT / "var"))
    server = next(s for s in installed if s.name == name)
    target = capture_servers.target_for(server, tmp_path)
    call_command(
        "add_server",
        "--name",
        name,
        "--team",
        team.slug,
        "--stdio",
        shlex.join([target.command, *target.args]),
        "--cwd",
        str(tmp_path),
        *(f"--env={key}={value}" for key, value in target.env.items()),
    )
    out = StringIO()
    call_command("poll", name, "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["outcome"] == "ok", result
    snapshot = Snapshot.objects.get(server__name=name)
    assert snapshot.analysis_errors == []
    assert snapshot.tool_count == len(snapshot.tools_raw) > 0
    assert snapshot.fixed_tax_tokens == result["fixed_tax_tokens"] == oracle_tax(snapshot.tools_raw)
