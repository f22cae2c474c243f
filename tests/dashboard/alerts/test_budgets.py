"""Thresholds and alerts on real polls of the example servers, with a real webhook receiver."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.alerts.models import Alert, AlertState, Budget, Level, Measure
from dashboard.alerts.notify.models import Channel, ChannelKind, Delivery, EventKind, NotificationEvent
from dashboard.servers.models import McpServer, Snapshot, Stack
from tests.dashboard.alerts.factories import (
    SPRAWL_V14,
    SPRAWL_V15,
    Receiver,
    poll,
    record,
    set_grown,
    stdio_server,
)
from tests.dashboard.factories import send_sentinels_through_every_queue
from tests.helpers import wait_until, webhook_signature


@pytest.mark.slow
def test_grown_release_sends_one_signed_webhook_then_the_resolution(
    team,
    tmp_path,
    django_capture_on_commit_callbacks,
    eager_celery,  # noqa: F811
):
    Budget.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=3500)
    server = stdio_server(team, tmp_path=tmp_path)
    with Receiver() as hook:
        channel = Channel.objects.create(
            team=team, name="ci-hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url}
        )
        secret = channel.config["secret"]

        first = poll(server, django_capture_on_commit_callbacks)
        snapshot = Snapshot.objects.get(pk=first.snapshot_id)
        assert snapshot.server_version == "1.4.0" and snapshot.fixed_tax_tokens == SPRAWL_V14
        assert snapshot.budget_checks["fixed_tax_tokens"] == {
            "limit": 3500.0,
            "level": "error",
            "value": float(SPRAWL_V14),
            "breached": False,
            "levels": {"error": 3500.0},
        }
        assert hook.requests == []

        set_grown(server, True)
        grown = poll(server, django_capture_on_commit_callbacks)
        assert grown.changed
        grown_snapshot = Snapshot.objects.get(pk=grown.snapshot_id)
        assert grown_snapshot.server_version == "1.5.0" and grown_snapshot.fixed_tax_tokens == SPRAWL_V15
        assert grown_snapshot.budget_checks["fixed_tax_tokens"]["breached"] is True
        assert len(hook.requests) == 1
        request = hook.requests[0]
        assert request["headers"]["X-MCP-Tax-Signature"] == webhook_signature(request["body"], secret)
        opened = hook.json()
        assert opened["event"] == "alert.opened"
        assert opened["alert"]["measure"] == "fixed_tax_tokens" and opened["alert"]["value"] == SPRAWL_V15
        assert opened["alert"]["snapshot"]["version"] == "1.5.0"
        alert = Alert.objects.get(team=team)
        assert alert.state == AlertState.ACTIVE and alert.snapshot_id == grown_snapshot.pk

        again = poll(server, django_capture_on_commit_callbacks)
        assert not again.changed
        assert len(hook.requests) == 1, "an identical poll must not notify again"

        set_grown(server, False)
        shrunk = poll(server, django_capture_on_commit_callbacks)
        assert shrunk.changed
        assert len(hook.requests) == 2
        resolved = hook.json()
        assert resolved["event"] == "alert.resolved" and resolved["alert"]["id"] == str(alert.code)
        resolved_request = hook.requests[1]
        assert resolved_request["headers"]["X-MCP-Tax-Signature"] == webhook_signature(
            resolved_request["body"], secret
        )
        alert.refresh_from_db()
        assert alert.state == AlertState.RESOLVED and alert.resolved_snapshot_id == shrunk.snapshot_id
        assert not Delivery.objects.filter(processed=None).exists()


def test_growth_largest_tool_and_instructions_rules(team):
    server = stdio_server(team)
    Budget.objects.create(team=team, measure=Measure.RELEASE_GROWTH_PCT, level=Level.WARNING, limit=10)
    Budget.objects.create(team=team, measure=Measure.RELEASE_GROWTH_TOKENS, level=Level.ERROR, limit=900)
    Budget.objects.create(team=team, measure=Measure.MAX_TOOL_TOKENS, level=Level.WARNING, limit=290)
    Budget.objects.create(team=team, measure=Measure.INSTRUCTIONS_TOKENS, level=Level.WARNING, limit=1000)

    first = record(server, "sprawling", False)
    # No previous release yet: growth is not judged, the others are within limits.
    assert set(first.budget_checks) == {"max_tool_tokens", "instructions_tokens"}
    assert (
        first.budget_checks["max_tool_tokens"]["value"] == 285
        and not first.budget_checks["max_tool_tokens"]["breached"]
    )
    assert not Alert.objects.exists()

    grown = record(server, "sprawling", True)
    growth = SPRAWL_V15 - SPRAWL_V14
    assert (
        grown.budget_checks["release_growth_tokens"]["value"] == growth
        and grown.budget_checks["release_growth_tokens"]["breached"]
    )
    assert grown.budget_checks["release_growth_pct"]["value"] == round(100 * growth / SPRAWL_V14, 2)
    alerts = {a.measure: a for a in Alert.objects.open()}
    assert set(alerts) == {Measure.RELEASE_GROWTH_PCT, Measure.RELEASE_GROWTH_TOKENS, Measure.MAX_TOOL_TOKENS}
    assert alerts[Measure.RELEASE_GROWTH_TOKENS].level == Level.ERROR
    assert "since 1.4.0" in alerts[Measure.RELEASE_GROWTH_PCT].message
    largest = max(grown.tools.all(), key=lambda t: t.tokens)
    assert alerts[Measure.MAX_TOOL_TOKENS].subject_label == f"files-sprawl / {largest.name}"


def test_server_rule_overrides_team_default_and_stack_budget(team):
    sprawl = stdio_server(team)
    lean = stdio_server(team, name="files-lean", module="lean")
    stack = Stack.objects.create(team=team, name="coding-agent")
    stack.servers.set([sprawl, lean])
    Budget.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, limit=600)
    Budget.objects.create(
        team=team, server=sprawl, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, limit=5000
    )

    record(lean, "lean", False)
    lean_tax = lean.snapshots.get().fixed_tax_tokens
    Budget.objects.create(
        team=team,
        stack=stack,
        measure=Measure.STACK_FIXED_TAX_TOKENS,
        level=Level.ERROR,
        limit=lean_tax + SPRAWL_V14 + 100,
    )
    snapshot = record(sprawl, "sprawling", False)
    assert snapshot.budget_checks["fixed_tax_tokens"]["limit"] == 5000  # the server's own rule won
    assert not Alert.objects.filter(server=sprawl).exists()
    assert lean_tax > 600 and Alert.objects.get(server=lean).limit == 600  # lean: the team default
    assert not Alert.objects.filter(stack=stack).exists()

    record(sprawl, "sprawling", True)  # the stack now pays 4125 + lean
    stack_alert = Alert.objects.get(stack=stack)
    assert stack_alert.value == lean_tax + SPRAWL_V15 and stack_alert.level == Level.ERROR
    assert stack_alert.subject_label == "stack coding-agent"
    record(sprawl, "sprawling", False)
    stack_alert.refresh_from_db()
    assert stack_alert.state == AlertState.RESOLVED


def _events(alert: Alert) -> list[str]:
    return list(NotificationEvent.objects.filter(alert=alert).order_by("pk").values_list("kind", flat=True))


def test_open_or_update_alert_is_idempotent_escalates_and_wakes_from_silence(team, alice):
    from dashboard.alerts.budgets import expire_silences, open_or_update_alert, resolve_alert

    args = ("agent:1:agent_exact_rate", Measure.AGENT_EXACT_RATE)
    first = open_or_update_alert(team, *args, Level.WARNING, 92.0, 95.0, "exact 92%", "claude-code 2.1")
    assert first.change == "opened"
    assert (
        open_or_update_alert(team, *args, Level.WARNING, 91.0, 95.0, "exact 91%", "claude-code 2.1").change
        == "updated"
    )
    alert = Alert.objects.get()
    assert alert.value == 91.0 and _events(alert) == [EventKind.OPENED]

    assert alert.acknowledge(alice, "looking")
    escalated = open_or_update_alert(team, *args, Level.ERROR, 70.0, 80.0, "exact 70%", "claude-code 2.1")
    assert escalated.change == "escalated" and escalated.alert.state == AlertState.ACTIVE
    assert _events(alert) == [EventKind.OPENED, EventKind.ESCALATED]

    alert.refresh_from_db()
    assert alert.silence(until=timezone.now() + timedelta(days=1))
    open_or_update_alert(team, *args, Level.ERROR, 60.0, 80.0, "exact 60%", "claude-code 2.1")
    assert len(_events(alert)) == 2, "silenced: no reminder"
    Alert.objects.filter(pk=alert.pk).update(silenced_until=timezone.now() - timedelta(minutes=1))
    assert expire_silences() == 1
    assert _events(alert)[-1] == EventKind.REOPENED

    assert resolve_alert(team, args[0]).state == AlertState.RESOLVED
    assert resolve_alert(team, args[0]) is None
    assert _events(alert)[-1] == EventKind.RESOLVED
    # A new breach after resolution is a new alert: the constraint allows one open per rule.
    assert open_or_update_alert(team, *args, Level.WARNING, 90.0, 95.0, "x", "y").alert.pk != alert.pk


def test_silence_until_next_release(team):
    Budget.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, limit=3000)
    server = stdio_server(team)
    record(server, "sprawling", False)
    alert = Alert.objects.get()
    assert alert.silence(until_release=True) and alert.silenced_at_version == "1.4.0"
    record(server, "sprawling", True)  # 1.5.0: still over, a new release wakes it
    alert.refresh_from_db()
    assert alert.state == AlertState.ACTIVE and _events(alert) == [EventKind.OPENED, EventKind.REOPENED]


@pytest.mark.slow
def test_demo_budgets_alert_on_the_grown_sprawling_release(
    db, settings, tmp_path, django_capture_on_commit_callbacks
):
    from io import StringIO

    from django.core.management import call_command

    settings.VAR_DIR = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        call_command("demo", "--json", stdout=StringIO())
    sprawl = McpServer.objects.get(name="files-sprawl")
    assert sprawl.current_snapshot.budget_checks["fixed_tax_tokens"]["breached"] is True
    alert = Alert.objects.get(server=sprawl, measure=Measure.FIXED_TAX_TOKENS)
    assert alert.is_open and alert.value == SPRAWL_V15
    assert Channel.objects.filter(kind=ChannelKind.EMAIL).exists()
    # Every historical snapshot carries its band, so the chart can draw it across the history.
    assert all("fixed_tax_tokens" in s.budget_checks for s in Snapshot.objects.filter(server=sprawl))
    # The demo's captured traffic breaks the fidelity rules: Claude Code 2.0.14 damaged pastes,
    # its 2.0.15 upgrade did not, and both tools saw truncated arrivals.
    fidelity = Alert.objects.filter(measure=Measure.AGENT_EXACT_RATE).open()
    assert "claude-code 2.0.14" in {a.subject_label for a in fidelity}
    assert "claude-code 2.0.15" not in {a.subject_label for a in fidelity}
    damaged = Alert.objects.filter(measure=Measure.DAMAGED_ARRIVALS).open()
    assert {a.subject_label for a in damaged} == {"files-sprawl/write_file", "files-lean/write"}


@pytest.mark.slow
@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_grown_release_through_the_real_worker(postgres_and_redis, celery_worker_process, team, tmp_path):
    """Poll task on the `poll` queue, evaluation on commit, delivery on the `notify` queue."""
    from dashboard.tasks import poll_server as poll_server_task

    Budget.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=3500)
    server = stdio_server(team, tmp_path=tmp_path)

    def poll_and_wait(expected_requests: int, hook: Receiver) -> None:
        before = server.poll_runs.count()
        poll_server_task.delay(server.pk, trigger="test")
        wait_until(
            lambda: server.poll_runs.count() > before and len(hook.requests) >= expected_requests,
            timeout=60,
            message=f"the poll and {expected_requests} webhook request(s)",
        )
        # Anything the poll set off (an evaluation, a delivery) was queued before these sentinels.
        send_sentinels_through_every_queue("budgets")
        wait_until(
            lambda: not Delivery.objects.filter(processed=None).exists(),
            timeout=60,
            message="every delivery finished",
        )

    with Receiver() as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        poll_and_wait(0, hook)
        assert hook.requests == []
        set_grown(server, True)
        poll_and_wait(1, hook)
        assert [hook.json(i)["event"] for i in range(len(hook.requests))] == ["alert.opened"]
        poll_and_wait(1, hook)
        assert len(hook.requests) == 1
        set_grown(server, False)
        poll_and_wait(2, hook)
        assert [hook.json(i)["event"] for i in range(len(hook.requests))] == [
            "alert.opened",
            "alert.resolved",
        ]
