"""`mcp-tax check` against the real dashboard: a live server, a team token, the gate's verdicts."""

from __future__ import annotations

import json

import pytest

from dashboard.teams.models import ApiToken
from tests.dashboard.alerts.factories import tools_list
from tests.helpers import free_port
from tests.mcptax.cli.support import mcp_tax

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def live_gate(transactional_db, live_server, gated):
    server, token = gated
    return live_server.url, server, token


def _write(tmp_path, grown: bool):
    path = tmp_path / ("grown.json" if grown else "base.json")
    path.write_text(json.dumps(tools_list("sprawling", grown)))
    return path


def test_check_exits_with_the_gates_verdict(live_gate, tmp_path):
    url, server, token = live_gate
    passing = mcp_tax(
        "check", str(_write(tmp_path, False)), "--server", server.name, "--url", url, "--token", token
    )
    assert passing.returncode == 0, passing.stderr
    assert passing.stdout.startswith(f"<!-- mcp-tax-report:{server.name} -->")

    failing = mcp_tax(
        "check",
        str(_write(tmp_path, True)),
        "--server",
        server.name,
        "--url",
        url,
        "--token",
        token,
        "--json",
    )
    assert failing.returncode == 1, failing.stderr
    result = json.loads(failing.stdout)
    assert result["verdict"] == "fail" and result["server"] == server.name


def test_check_reads_url_and_token_from_the_environment(live_gate, tmp_path):
    url, server, token = live_gate
    run = mcp_tax(
        "check",
        str(_write(tmp_path, False)),
        "--server",
        server.name,
        env={"MCP_TAX_URL": url, "MCP_TAX_TOKEN": token},
    )
    assert run.returncode == 0, run.stderr


def test_http_failures_are_clear_and_exit_2(live_gate, tmp_path):
    url, server, token = live_gate
    base = str(_write(tmp_path, False))
    wrong_token = mcp_tax("check", base, "--server", server.name, "--url", url, "--token", "mcpt_wrong")
    assert wrong_token.returncode == 2
    assert "answered HTTP 401" in wrong_token.stderr

    unknown = mcp_tax("check", base, "--server", "nope", "--url", url, "--token", token)
    assert unknown.returncode == 2
    assert "HTTP 404: no server named 'nope'" in unknown.stderr

    down = mcp_tax(
        "check", base, "--server", server.name, "--url", f"http://127.0.0.1:{free_port()}", "--token", token
    )
    assert down.returncode == 2
    assert "cannot reach" in down.stderr

    not_json = tmp_path / "x.json"
    not_json.write_text("{")
    bad = mcp_tax("check", str(not_json), "--server", server.name, "--url", url, "--token", token)
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr


def test_another_teams_token_does_not_reach_this_teams_server(live_gate, tmp_path, team_factory, alice):
    url, server, _ = live_gate
    _, other = ApiToken.issue(team_factory("other", alice), "ci")
    run = mcp_tax(
        "check", str(_write(tmp_path, False)), "--server", server.name, "--url", url, "--token", other
    )
    assert run.returncode == 2
    assert "HTTP 404" in run.stderr
