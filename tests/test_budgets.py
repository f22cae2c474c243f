"""Thresholds and alerts on real polls of the example servers, with a real webhook receiver."""

from __future__ import annotations

import functools
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.models import Alert, AlertState, Level, Measure, Threshold
from dashboard.alerts.notify.models import Channel, ChannelKind, Delivery, EventKind, NotificationEvent
from dashboard.alerts.notify.webhook import SIGNATURE_HEADER, verify
from dashboard.servers.models import McpServer, Snapshot, Stack, Transport
from examples.servers.launch import stdio_command
from mcptax.client import FetchResult, ServerTarget, fetch_tools_sync
from tests.conftest import ROOT
from tests.test_notify import Receiver, eager_celery  # noqa: F401 - fixture

SPRAWL_V14, SPRAWL_V15 = 3188, 4125


@functools.lru_cache(maxsize=8)
def fetch_example(name: str, grown: bool) -> FetchResult:
    """One real fetch per example release per test session (the servers are deterministic)."""
    command, args, env = stdio_command(
        name, "--root", str(ROOT / "examples"), env={"MCP_EXAMPLE_GROWN": "1" if grown else "0"}
    )
    target = ServerTarget(transport="stdio", command=command, args=args, env=env)
    return fetch_tools_sync(target, connect_timeout=15, total_timeout=60, max_bytes=5_000_000)


def stdio_server(team, name="files-sprawl", module="sprawling", tmp_path=None) -> McpServer:
    command, args, env = stdio_command(
        module, "--root", str(tmp_path or ROOT / "examples"), env={"MCP_EXAMPLE_GROWN": "0"}
    )
    return McpServer.objects.create(
        team=team, name=name, transport=Transport.STDIO, command=command, args=args, env=env
    )


def set_grown(server: McpServer, grown: bool) -> None:
    server.env = {**server.env, "MCP_EXAMPLE_GROWN": "1" if grown else "0"}
    server.save(update_fields=["env"])


def poll(server: McpServer, capture):
    """Poll for real; run the on-commit work (evaluation, then delivery) as a commit would."""
    from dashboard.servers.polling import poll_server

    with capture(execute=True):
        summary = poll_server(server.pk, trigger="test")
    assert summary.outcome == "ok", summary.message
    return summary


def record(server: McpServer, name: str, grown: bool) -> Snapshot:
    """Store a snapshot from a real fetch without a subprocess per test, then evaluate it."""
    from dashboard.alerts.budgets import evaluate_snapshot
    from dashboard.servers.polling import record_snapshot

    snapshot, _ = record_snapshot(server, fetch_example(name, grown))
    evaluate_snapshot(snapshot)
    snapshot.refresh_from_db()
    return snapshot


def test_grown_release_sends_one_signed_webhook_then_the_resolution(
    team,
    tmp_path,
    django_capture_on_commit_callbacks,
    eager_celery,  # noqa: F811
):
    Threshold.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=3500)
    server = stdio_server(team, tmp_path=tmp_path)
    with Receiver() as hook:
        channel = Channel.objects.create(
            team=team, name="ci-hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url}
        )
        secret = channel.config["secret"]

        first = poll(server, django_capture_on_commit_callbacks)
        snapshot = Snapshot.objects.get(pk=first.snapshot_id)
        assert snapshot.server_version == "1.4.0" and snapshot.fixed_tax_tokens == SPRAWL_V14
        assert snapshot.limits["fixed_tax_tokens"] == {
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
        assert grown_snapshot.limits["fixed_tax_tokens"]["breached"] is True
        assert len(hook.requests) == 1
        request = hook.requests[0]
        assert verify(request["body"], secret, request["headers"][SIGNATURE_HEADER])
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
        assert verify(hook.requests[1]["body"], secret, hook.requests[1]["headers"][SIGNATURE_HEADER])
        alert.refresh_from_db()
        assert alert.state == AlertState.RESOLVED and alert.resolved_snapshot_id == shrunk.snapshot_id
        assert not Delivery.objects.filter(processed=None).exists()


def test_growth_largest_tool_and_instructions_rules(team):
    server = stdio_server(team)
    Threshold.objects.create(team=team, measure=Measure.RELEASE_GROWTH_PCT, level=Level.WARNING, limit=10)
    Threshold.objects.create(team=team, measure=Measure.RELEASE_GROWTH_TOKENS, level=Level.ERROR, limit=900)
    Threshold.objects.create(team=team, measure=Measure.MAX_TOOL_TOKENS, level=Level.WARNING, limit=290)
    Threshold.objects.create(team=team, measure=Measure.INSTRUCTIONS_TOKENS, level=Level.WARNING, limit=1000)

    first = record(server, "sprawling", False)
    # No previous release yet: growth is not judged, the others are within limits.
    assert set(first.limits) == {"max_tool_tokens", "instructions_tokens"}
    assert first.limits["max_tool_tokens"]["value"] == 285 and not first.limits["max_tool_tokens"]["breached"]
    assert not Alert.objects.exists()

    grown = record(server, "sprawling", True)
    growth = SPRAWL_V15 - SPRAWL_V14
    assert (
        grown.limits["release_growth_tokens"]["value"] == growth
        and grown.limits["release_growth_tokens"]["breached"]
    )
    assert grown.limits["release_growth_pct"]["value"] == round(100 * growth / SPRAWL_V14, 2)
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
    Threshold.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, limit=600)
    Threshold.objects.create(
        team=team, server=sprawl, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, limit=5000
    )

    record(lean, "lean", False)
    lean_tax = lean.snapshots.get().fixed_tax_tokens
    Threshold.objects.create(
        team=team,
        stack=stack,
        measure=Measure.STACK_FIXED_TAX_TOKENS,
        level=Level.ERROR,
        limit=lean_tax + SPRAWL_V14 + 100,
    )
    snapshot = record(sprawl, "sprawling", False)
    assert snapshot.limits["fixed_tax_tokens"]["limit"] == 5000  # the server's own rule won
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
    Threshold.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, limit=3000)
    server = stdio_server(team)
    record(server, "sprawling", False)
    alert = Alert.objects.get()
    assert alert.silence(until_release=True) and alert.silenced_at_version == "1.4.0"
    record(server, "sprawling", True)  # 1.5.0: still over, a new release wakes it
    alert.refresh_from_db()
    assert alert.state == AlertState.ACTIVE and _events(alert) == [EventKind.OPENED, EventKind.REOPENED]


def test_alert_page_acknowledge_and_silence_with_htmx(alice_client, team, alice):
    from dashboard.alerts.budgets import open_or_update_alert

    alert = open_or_update_alert(
        team,
        "server:1:fixed_tax_tokens",
        Measure.FIXED_TAX_TOKENS,
        Level.ERROR,
        4125,
        3500,
        "over",
        "files-sprawl",
    ).alert
    page = alice_client.get(reverse("alert_list", args=[team.slug]))
    html = page.content.decode()
    assert page.status_code == 200 and f'id="alert-{alert.code}"' in html
    assert 'id="nav-alerts"' in html and 'title="active alerts">1</span>' in html

    url = reverse("alert_acknowledge", args=[team.slug, alert.code])
    row = alice_client.post(url, {"note": "fix in 1.5.1"}, HTTP_HX_REQUEST="true")
    assert row.status_code == 200
    assert row.content.decode().lstrip().startswith(f'<tr id="alert-{alert.code}"')
    assert "Acknowledged" in row.content.decode() and "fix in 1.5.1" in row.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.ACKNOWLEDGED and alert.acknowledged_by == alice
    page = alice_client.get(reverse("alert_list", args=[team.slug]))
    assert 'title="active alerts"' not in page.content.decode()

    silence = reverse("alert_silence", args=[team.slug, alert.code])
    bad = alice_client.post(silence, {"until": "2001-01-01"}, HTTP_HX_REQUEST="true")
    assert "Silence until a date in the future." in bad.content.decode()
    day = (timezone.localdate() + timedelta(days=3)).isoformat()
    ok = alice_client.post(silence, {"until": day}, HTTP_HX_REQUEST="true")
    assert "Silenced" in ok.content.decode() and f"until {day}" in ok.content.decode()

    resolved = alice_client.get(
        reverse("alert_list", args=[team.slug]) + "?state=resolved", HTTP_HX_REQUEST="true"
    )
    assert "No resolved alerts." in resolved.content.decode()


def test_alert_pages_are_team_scoped(alice_client, team, user_factory, team_factory):
    from dashboard.alerts.budgets import open_or_update_alert

    other = team_factory("Other", user_factory("bob"))
    theirs = open_or_update_alert(other, "k", Measure.FIXED_TAX_TOKENS, Level.ERROR, 2, 1, "m", "s").alert
    assert alice_client.get(reverse("alert_list", args=[other.slug])).status_code == 404
    for name in ("alert_acknowledge", "alert_silence"):
        assert (
            alice_client.post(
                reverse(name, args=[team.slug, theirs.code]), {"until_release": "1"}
            ).status_code
            == 404
        )
    theirs.refresh_from_db()
    assert theirs.state == AlertState.ACTIVE
    rule = Threshold.objects.create(team=other, measure=Measure.FIXED_TAX_TOKENS, limit=1)
    assert (
        alice_client.post(
            reverse("threshold_update", args=[team.slug, rule.pk]), {"action": "delete"}
        ).status_code
        == 404
    )
    assert Threshold.objects.filter(pk=rule.pk).exists()


def test_alert_list_queries_do_not_grow_with_rows(alice_client, team):
    from dashboard.alerts.budgets import open_or_update_alert

    def add(n, start):
        for i in range(start, start + n):
            server = McpServer.objects.create(
                team=team, name=f"s{i}", transport=Transport.HTTP, url="http://127.0.0.1:9/"
            )
            open_or_update_alert(
                team,
                f"server:{server.pk}:x",
                Measure.FIXED_TAX_TOKENS,
                Level.ERROR,
                2,
                1,
                "m",
                server.name,
                server=server,
            )

    url = reverse("alert_list", args=[team.slug])
    add(2, 0)
    with CaptureQueriesContext(connection) as few:
        alice_client.get(url)
    add(10, 2)
    with CaptureQueriesContext(connection) as many:
        response = alice_client.get(url)
    assert response.content.decode().count('class="alert-row"') == 12
    assert len(many) == len(few)


def test_thresholds_editor_adds_validates_and_reevaluates(alice_client, team):
    server = stdio_server(team)
    stack = Stack.objects.create(team=team, name="agent")
    snapshot = record(server, "sprawling", True)
    assert snapshot.limits == {}

    url = reverse("thresholds", args=[team.slug])
    response = alice_client.post(
        url,
        {"scope": f"server:{server.pk}", "measure": "fixed_tax_tokens", "level": "error", "limit": "4000"},
    )
    assert response.status_code == 302
    snapshot.refresh_from_db()
    assert snapshot.limits["fixed_tax_tokens"]["breached"] is True
    alert = Alert.objects.get(server=server)

    duplicate = alice_client.post(
        url, {"scope": f"server:{server.pk}", "measure": "fixed_tax_tokens", "level": "error", "limit": "1"}
    )
    assert "That rule already exists" in duplicate.content.decode()
    wrong = alice_client.post(
        url, {"scope": f"stack:{stack.pk}", "measure": "fixed_tax_tokens", "level": "error", "limit": "1"}
    )
    assert "A stack takes only the stack fixed-tax budget." in wrong.content.decode()
    assert Threshold.objects.count() == 1

    rule = Threshold.objects.get()
    raised = alice_client.post(
        reverse("threshold_update", args=[team.slug, rule.pk]),
        {"action": "limit", "limit": "5000"},
        HTTP_HX_REQUEST="true",
    )
    assert raised.status_code == 200 and f'id="rule-{rule.pk}"' in raised.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.RESOLVED
    page = alice_client.get(url)
    assert "Largest single tool" in page.content.decode() or "Fixed tax (tokens)" in page.content.decode()


def test_demo_budgets_alert_on_the_grown_sprawling_release(
    db, settings, tmp_path, django_capture_on_commit_callbacks
):
    from io import StringIO

    from django.core.management import call_command

    settings.VAR_DIR = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        call_command("demo", "--json", stdout=StringIO())
    sprawl = McpServer.objects.get(name="files-sprawl")
    assert sprawl.current_snapshot.limits["fixed_tax_tokens"]["breached"] is True
    alert = Alert.objects.get(server=sprawl, measure=Measure.FIXED_TAX_TOKENS)
    assert alert.is_open and alert.value == SPRAWL_V15
    assert Channel.objects.filter(kind=ChannelKind.EMAIL).exists()
    # Every historical snapshot carries its band, so the chart can draw it across the history.
    assert all("fixed_tax_tokens" in s.limits for s in Snapshot.objects.filter(server=sprawl))
    # The demo's captured traffic breaks the fidelity rules: Claude Code 2.0.14 damaged pastes,
    # its 2.0.15 upgrade did not, and both tools saw truncated arrivals.
    fidelity = Alert.objects.filter(measure=Measure.AGENT_EXACT_RATE).open()
    assert "claude-code 2.0.14" in {a.subject_label for a in fidelity}
    assert "claude-code 2.0.15" not in {a.subject_label for a in fidelity}
    damaged = Alert.objects.filter(measure=Measure.DAMAGED_ARRIVALS).open()
    assert {a.subject_label for a in damaged} == {"files-sprawl/write_file", "files-lean/write"}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_grown_release_through_the_real_worker(postgres_and_redis, celery_worker_process, team, tmp_path):
    """Poll task on the `poll` queue, evaluation on commit, delivery on the `notify` queue."""
    import time

    from dashboard.servers.tasks import poll_server_task

    Threshold.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=3500)
    server = stdio_server(team, tmp_path=tmp_path)

    def poll_and_wait(expected_requests: int, hook: Receiver) -> None:
        before = server.poll_runs.count()
        poll_server_task.delay(server.pk, trigger="test")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            server.poll_runs.count() == before or len(hook.requests) < expected_requests
        ):
            time.sleep(0.2)
        time.sleep(1.0)  # anything extra would arrive now

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


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_acknowledge_and_silence_in_chromium(browser_page, live_server, team, alice):
    from dashboard.alerts.budgets import open_or_update_alert

    alice.set_password("pw-for-browser-123")
    alice.save()
    alert = open_or_update_alert(
        team,
        "server:1:fixed_tax_tokens",
        Measure.FIXED_TAX_TOKENS,
        Level.ERROR,
        4125,
        3500,
        "over",
        "files-sprawl",
    ).alert
    page = browser_page
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-for-browser-123")
    page.click("form button")
    page.goto(live_server.url + reverse("alert_list", args=[team.slug]))
    assert page.inner_text("#nav-alerts .badge") == "1"

    row = f"#alert-{alert.code}"
    page.fill(f"{row} input[name=note]", "shrinking it in 1.5.1")
    url_before = page.url
    page.click(f"{row} button:has-text('Acknowledge')")
    page.wait_for_selector(f"{row} :text('shrinking it in 1.5.1')")
    assert page.url == url_before, "acknowledged in place, without a page load"
    page.check(f"{row} input[name=until_release]")
    page.click(f"{row} button:has-text('Silence')")
    page.wait_for_selector(f"{row} :text('until the next release')")
    alert.refresh_from_db()
    assert alert.state == AlertState.SILENCED and alert.acknowledged_by == alice
    assert page.js_errors == []
