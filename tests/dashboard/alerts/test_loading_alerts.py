"""Loading modes in the rules: a release that moves a stack across Claude Code's deferral threshold
alerts through the team's channels (a real webhook receiver), a budget on a stack's upfront figure,
and the CI gate's answer. Expected figures are tiktoken's count of the claude rendering of the tools
a real fetch of the example server returned, written out here."""

from __future__ import annotations

import pytest

from dashboard.alerts.models import Alert, AlertState, Budget, Level, Measure
from dashboard.alerts.notify.models import Channel, ChannelKind
from dashboard.servers.models import Stack
from dashboard.teams.models import ApiToken
from mcptax.loading import CLAUDE_CODE_TOOL_SEARCH
from tests.dashboard.alerts.factories import (
    Receiver,
    fetch_example,
    poll,
    post_check,
    record,
    set_grown,
    stdio_server,
    tools_list,
)
from tests.dashboard.factories import ENCODING
from tests.helpers import compact

pytestmark = pytest.mark.django_db


def n(text: str) -> int:
    import tiktoken

    return len(tiktoken.get_encoding(ENCODING).encode_ordinary(text))


def claude_tax(server: str, grown: bool) -> int:
    tools = fetch_example("sprawling", grown).tools
    return n(
        compact(
            [
                {
                    "name": f"mcp__{server}__{t['name']}",
                    **({"description": t["description"]} if "description" in t else {}),
                    "input_schema": t.get("inputSchema", {"type": "object"}),
                }
                for t in tools
            ]
        )
    )


def deferred_upfront(server: str, grown: bool, with_instructions: bool = True) -> int:
    result = fetch_example("sprawling", grown)
    names = "".join(f"mcp__{server}__{t['name']}\n" for t in result.tools)
    instructions = n(result.instructions) if result.instructions and with_instructions else 0
    return (
        n("<available-deferred-tools>\n" + names + "</available-deferred-tools>")
        + n(compact(CLAUDE_CODE_TOOL_SEARCH))
        + instructions
    )


@pytest.fixture
def crossing_team(team):
    """A team whose window puts auto:10's threshold between the two releases' claude figures."""
    before, after = claude_tax("files-sprawl", False), claude_tax("files-sprawl", True)
    assert before < after
    team.context_window = (before + after) // 2 * 10  # 10% of it: halfway between the releases
    team.tool_search = "auto"
    team.save()
    return team


@pytest.mark.slow
def test_a_release_across_the_deferral_threshold_alerts_through_the_channels(
    crossing_team, tmp_path, django_capture_on_commit_callbacks, eager_celery
):
    team = crossing_team
    server = stdio_server(team, tmp_path=tmp_path)
    stack = Stack.objects.create(team=team, name="agent")
    stack.servers.set([server])
    with Receiver() as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        poll(server, django_capture_on_commit_callbacks)
        assert hook.requests == []  # the first snapshot is no release across anything

        set_grown(server, True)
        poll(server, django_capture_on_commit_callbacks)
        (request,) = hook.requests
        opened = hook.json()
        assert opened["event"] == "alert.opened" and opened["alert"]["measure"] == "deferral_crossing"
        alert = Alert.objects.get(team=team, measure=Measure.DEFERRAL_CROSSING)
        threshold = team.context_window // 10
        assert (alert.value, alert.limit) == (claude_tax("files-sprawl", True), threshold)
        assert "across Claude Code's deferral threshold" in alert.message
        assert (
            f"from {claude_tax('files-sprawl', False):,} to {claude_tax('files-sprawl', True):,}"
            in alert.message
        )

        poll(server, django_capture_on_commit_callbacks)  # unchanged: nothing more
        assert len(hook.requests) == 1
        alert.state = AlertState.RESOLVED
        alert.save()
        set_grown(server, False)
        poll(server, django_capture_on_commit_callbacks)
        assert len(hook.requests) == 2
        back = Alert.objects.filter(team=team, measure=Measure.DEFERRAL_CROSSING).exclude(pk=alert.pk).get()
        assert "back under" in back.message and "loads every MCP tool schema again" in back.message


def test_a_budget_on_the_stacks_upfront_and_the_gate_answer(client, crossing_team):
    team = crossing_team
    server = stdio_server(team)
    record(server, "sprawling", False)
    stack = Stack.objects.create(team=team, name="agent")
    stack.servers.set([server])
    Budget.objects.create(
        team=team, stack=stack, measure=Measure.STACK_UPFRONT_TOKENS, level=Level.ERROR, limit=300
    )
    _, token = ApiToken.issue(team, "ci")
    answer = post_check(
        client, token, {"server": server.name, "tools_list": tools_list("sprawling", True)}
    ).json()
    loading = answer["loading"]
    assert loading["client"] == "claude-code"
    # The candidate is a bare tools/list: no instructions came with it.
    deferred = deferred_upfront("files-sprawl", True, with_instructions=False)
    assert loading["server"]["upfront"] == {"eager": claude_tax("files-sprawl", True), "deferred": deferred}
    assert loading["server"]["baseline_upfront"]["eager"] == claude_tax(
        "files-sprawl", False
    ) + _instructions(False)
    (row,) = loading["stacks"]
    # auto: the release stays eager before, defers after.
    assert (row["baseline_mode"], row["mode"]) == ("eager", "deferred")
    assert row["upfront"] == deferred
    assert row["threshold"]["crosses"] is True and row["baseline_crosses"] is False
    (rule,) = [r for r in answer["rules"] if r["measure"] == "stack_upfront_tokens"]
    assert deferred > 300 and rule["value"] == deferred and rule["breached"] is True
    assert answer["verdict"] == "fail"
    assert "moves stack `agent` across Claude Code's deferral threshold" in answer["report"]
    assert "| Stack `agent`, deferred |" in answer["report"]


def _instructions(grown: bool) -> int:
    text = fetch_example("sprawling", grown).instructions
    return n(text) if text else 0


def test_the_crossing_alert_shows_on_the_alerts_page_and_a_stack_upfront_budget_is_a_form_choice(
    alice_client, crossing_team
):
    from django.urls import reverse

    team = crossing_team
    server = stdio_server(team)
    stack = Stack.objects.create(team=team, name="agent")
    stack.servers.set([server])
    record(server, "sprawling", False)
    grown = record(server, "sprawling", True)
    alert = Alert.objects.get(team=team, measure=Measure.DEFERRAL_CROSSING)
    assert alert.snapshot_id == grown.pk and alert.stack_id == stack.pk and alert.level == Level.WARNING
    html = alice_client.get(reverse("alert_list", args=[team.slug])).content.decode()
    assert (
        "across Claude Code&#x27;s deferral threshold" in html
        or "across Claude Code's deferral threshold" in html
    )
    # Evaluating the same release again (a threshold edit) opens nothing new.
    from dashboard.alerts.budgets import evaluate_team

    alert.state = AlertState.RESOLVED
    alert.save()
    evaluate_team(team)
    assert Alert.objects.filter(team=team, measure=Measure.DEFERRAL_CROSSING).count() == 1

    from dashboard.alerts.forms import BudgetForm

    form = BudgetForm(
        team,
        {"scope": f"stack:{stack.pk}", "measure": "stack_upfront_tokens", "level": "warning", "limit": "400"},
    )
    assert form.is_valid(), form.errors
    refused = BudgetForm(
        team, {"scope": f"stack:{stack.pk}", "measure": "max_tool_tokens", "level": "warning", "limit": "400"}
    )
    assert not refused.is_valid()
