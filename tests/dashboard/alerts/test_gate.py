"""The CI gate: API and command, on real tools/list results of the example servers."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from dashboard.alerts.models import Budget, Level, Measure
from dashboard.servers.models import Stack
from dashboard.teams.models import ApiToken
from tests.dashboard.alerts.factories import (
    SPRAWL_V14,
    SPRAWL_V15,
    post_check,
    record,
    stdio_server,
    tools_list,
)


def test_gate_fails_a_list_over_budget_and_passes_the_previous_one(client, gated):
    server, token = gated
    over = post_check(
        client,
        token,
        {
            "server": server.name,
            "tools_list": tools_list("sprawling", True),
            "version": "1.5.0",
            "git_ref": "feature/more-tools",
        },
    )
    assert over.status_code == 200, over.content
    result = over.json()
    assert result["verdict"] == "fail"
    assert result["totals"]["fixed_tax_tokens"] == SPRAWL_V15
    assert result["totals"]["baseline_fixed_tax_tokens"] == SPRAWL_V14
    assert result["totals"]["delta_tokens"] == SPRAWL_V15 - SPRAWL_V14
    rule = result["rules"][0]
    assert (rule["measure"], rule["level"], rule["limit"], rule["breached"]) == (
        "fixed_tax_tokens",
        "error",
        3500,
        True,
    )
    added = [t["name"] for t in result["tools"] if t["status"] == "added"]
    assert len(added) == 4
    # Per-tool deltas account for the growth, up to the list's own bracket/comma overhead.
    assert abs(sum(t["delta"] for t in result["tools"]) - (SPRAWL_V15 - SPRAWL_V14)) <= 10
    report = result["report"]
    assert report.splitlines()[0] == "<!-- mcp-tax-report:files-sprawl -->"
    assert "**fail**" in report and "feature/more-tools" in report
    for name in added:
        assert f"`{name}` | added" in report
    assert result["findings"], "the sprawling server has bloat findings"

    same = post_check(client, token, {"server": server.name, "tools_list": tools_list("sprawling", False)})
    assert same.status_code == 200
    assert same.json()["verdict"] == "pass"
    assert same.json()["totals"]["delta_tokens"] == 0
    assert "No tool changed." in same.json()["report"]


def test_report_is_byte_identical_for_identical_input(client, gated):
    server, token = gated
    body = {"server": server.name, "tools_list": tools_list("sprawling", True), "version": "1.5.0"}
    first = post_check(client, token, body).json()["report"]
    second = post_check(client, token, body).json()["report"]
    assert first.encode() == second.encode()
    other_ref = post_check(client, token, {**body, "git_ref": "abc123"}).json()["report"]
    assert other_ref != first


def test_grown_tools_are_named_in_the_report(client, team):
    """A tool whose description grew is reported as grown, with its token delta."""
    server = stdio_server(team)
    record(server, "sprawling", False)
    _, token = ApiToken.issue(team, "ci")
    tools = json.loads(json.dumps(tools_list("sprawling", False)))
    target = tools["tools"][2]
    target["description"] += " It is important that you read this whole paragraph carefully." * 5
    result = post_check(client, token, {"server": server.name, "tools_list": tools}).json()
    grown = [t for t in result["tools"] if t["status"] == "grown"]
    assert [t["name"] for t in grown] == [target["name"]] and grown[0]["delta"] > 40
    assert f"`{target['name']}` | grown | " in result["report"]
    assert result["verdict"] == "pass"  # no budgets


def test_warn_and_stack_budget_in_the_gate(client, team):
    server = stdio_server(team)
    record(server, "sprawling", False)
    stack = Stack.objects.create(team=team, name="agent")
    stack.servers.set([server])
    Budget.objects.create(team=team, measure=Measure.RELEASE_GROWTH_PCT, level=Level.WARNING, limit=10)
    Budget.objects.create(
        team=team, stack=stack, measure=Measure.STACK_FIXED_TAX_TOKENS, level=Level.WARNING, limit=4000
    )
    _, token = ApiToken.issue(team, "ci")
    result = post_check(
        client, token, {"server": server.name, "tools_list": tools_list("sprawling", True)}
    ).json()
    assert result["verdict"] == "warn"
    scopes = {(r["measure"], r["scope"]): r for r in result["rules"]}
    assert scopes[("stack_fixed_tax_tokens", "stack agent")]["value"] == SPRAWL_V15
    assert scopes[("release_growth_pct", "server")]["breached"]


def test_api_refuses_missing_or_bad_tokens_and_other_teams_servers(client, gated, team_factory, user_factory):
    server, token = gated
    body = {"server": server.name, "tools_list": tools_list("sprawling", False)}
    assert (
        client.post("/api/v1/check", data=json.dumps(body), content_type="application/json").status_code
        == 401
    )
    assert post_check(client, token + "x", body).status_code == 401
    assert client.get("/api/v1/servers").status_code == 401

    other = team_factory("Other", user_factory("bob"))
    _, other_token = ApiToken.issue(other, "ci")
    refused = post_check(client, other_token, body)
    assert refused.status_code == 404 and "no server named" in refused.json()["detail"]
    assert (
        client.get(
            f"/api/v1/servers/{server.name}/snapshots", HTTP_AUTHORIZATION=f"Bearer {other_token}"
        ).status_code
        == 404
    )
    assert client.get("/api/v1/servers", HTTP_AUTHORIZATION=f"Bearer {other_token}").json() == []

    malformed = post_check(client, token, {"server": server.name, "tools_list": {"nope": 1}})
    assert malformed.status_code == 422 and "tools" in malformed.json()["detail"]


def test_check_budget_command_exit_status(gated, tmp_path, capsys):
    server, _ = gated
    over = tmp_path / "over.json"
    over.write_text(json.dumps(tools_list("sprawling", True)))
    fine = tmp_path / "fine.json"
    fine.write_text(json.dumps(tools_list("sprawling", False)))

    with pytest.raises(SystemExit) as failed:
        call_command("check_budget", str(over), "--server", server.name)
    assert failed.value.code == 1
    out = capsys.readouterr().out
    assert out.startswith("<!-- mcp-tax-report:files-sprawl -->") and "**fail**" in out

    call_command("check_budget", str(fine), "--server", server.name, "--json")
    assert json.loads(capsys.readouterr().out)["verdict"] == "pass"


def test_check_budget_warn_exits_0_and_usage_errors_exit_2(team, tmp_path, capsys):
    from django.core.management.base import CommandError

    server = stdio_server(team)
    record(server, "sprawling", False)
    Budget.objects.create(team=team, measure=Measure.RELEASE_GROWTH_PCT, level=Level.WARNING, limit=1)
    over = tmp_path / "over.json"
    over.write_text(json.dumps(tools_list("sprawling", True)))
    call_command("check_budget", str(over), "--server", server.name, "--team", team.slug)  # no SystemExit: 0
    assert "**warn**" in capsys.readouterr().out
    with pytest.raises(CommandError) as missing:
        call_command("check_budget", str(over), "--server", "nope")
    assert missing.value.returncode == 2 and "no server named 'nope'" in str(missing.value)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CommandError) as bad:
        call_command("check_budget", str(tmp_path / "bad.json"), "--server", server.name)
    assert bad.value.returncode == 2 and "not JSON" in str(bad.value)


def _broken_analysis(*args, **kwargs):
    raise TypeError("unhashable type: 'dict'")  # stands in for a findings bug


def test_an_analysis_failure_is_an_error_not_a_verdict(client, gated, monkeypatch, tmp_path, capsys):
    server, token = gated
    monkeypatch.setattr("mcptax.findings.analyze", _broken_analysis)
    body = {"server": server.name, "tools_list": tools_list("sprawling", True)}
    response = post_check(client, token, body)
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["status"] == "error"
    assert result["errors"] == ["findings: TypeError: unhashable type: 'dict'"]
    # The exact figures and the budget verdict are still there, marked as incomplete.
    assert result["totals"]["fixed_tax_tokens"] == SPRAWL_V15
    assert result["verdict"] == "fail" and result["findings"] == []
    assert "findings could not be computed" in result["report"]

    candidate = tmp_path / "over.json"
    candidate.write_text(json.dumps(tools_list("sprawling", True)))
    with pytest.raises(SystemExit) as failed:
        call_command("check_budget", str(candidate), "--server", server.name)
    assert failed.value.code == 2
    assert "TypeError: unhashable type: 'dict'" in capsys.readouterr().err


def test_check_budget_names_a_missing_team_not_the_server(gated, tmp_path):
    from django.core.management.base import CommandError

    server, _ = gated
    candidate = tmp_path / "fine.json"
    candidate.write_text(json.dumps(tools_list("sprawling", False)))
    with pytest.raises(CommandError) as missing:
        call_command("check_budget", str(candidate), "--server", server.name, "--team", "nope")
    assert missing.value.returncode == 2
    assert str(missing.value) == "no team 'nope'"


def test_the_gate_shows_every_tracked_encoding_beside_the_main_one(client, team):
    from tests.helpers import compact, tiktoken_reference

    team.token_encodings = ["cl100k_base", "o200k_base"]
    team.save()
    server = stdio_server(team)
    record(server, "sprawling", False)
    _, token = ApiToken.issue(team, "ci")
    candidate = tools_list("sprawling", True)
    result = post_check(client, token, {"server": server.name, "tools_list": candidate}).json()

    def oracle(tools: list[dict], encoding: str) -> int:
        visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in tools]
        return len(tiktoken_reference(encoding).encode_ordinary(compact(visible)))

    baseline = tools_list("sprawling", False)["tools"]
    by_encoding = result["totals"]["by_encoding"]
    assert list(by_encoding) == ["cl100k_base", "o200k_base"]
    for name in by_encoding:
        figures = by_encoding[name]
        assert figures["fixed_tax_tokens"] == oracle(candidate["tools"], name)
        assert figures["baseline_fixed_tax_tokens"] == oracle(baseline, name)
        assert figures["delta_tokens"] == oracle(candidate["tools"], name) - oracle(baseline, name)
    # The budgets are judged in the main encoding, whose figure is the one in `totals` itself.
    assert result["encoding"] == "cl100k_base"
    assert result["totals"]["fixed_tax_tokens"] == by_encoding["cl100k_base"]["fixed_tax_tokens"]
    o200k = by_encoding["o200k_base"]
    assert (
        f"| Fixed tax, `o200k_base` | {o200k['baseline_fixed_tax_tokens']:,} | {o200k['fixed_tax_tokens']:,} "
        f"| +{o200k['delta_tokens']:,} |" in result["report"]
    )
