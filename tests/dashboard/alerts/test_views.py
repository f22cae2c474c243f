"""The alert pages: the alert list, the budgets editor and the notification channels."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.models import Alert, AlertState, Budget, Level, Measure
from dashboard.alerts.notify.models import Channel, ChannelKind
from dashboard.servers.models import McpServer, Stack, Transport
from dashboard.teams.models import Membership
from tests.dashboard.alerts.factories import (
    Receiver,
    deliveries_for,
    open_alert,
    record,
    stdio_server,
)


def test_alert_page_acknowledge_and_silence_with_htmx(alice_client, team, alice):
    alert = open_alert(team, rule_key="server:1:fixed_tax_tokens").alert
    page = alice_client.get(reverse("alert_list", args=[team.slug]))
    html = page.content.decode()
    assert page.status_code == 200 and f'id="alert-{alert.code}"' in html
    assert 'id="nav-alerts"' in html and 'title="1 active alert">1</span>' in html

    url = reverse("alert_acknowledge", args=[team.slug, alert.code])
    row = alice_client.post(url, {"note": "fix in 1.5.1"}, HTTP_HX_REQUEST="true")
    assert row.status_code == 200
    assert row.content.decode().lstrip().startswith(f'<tr id="alert-{alert.code}"')
    assert "Acknowledged" in row.content.decode() and "fix in 1.5.1" in row.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.ACKNOWLEDGED and alert.acknowledged_by == alice
    page = alice_client.get(reverse("alert_list", args=[team.slug]))
    assert 'title="1 active alert"' not in page.content.decode()

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
    budget = Budget.objects.create(team=other, measure=Measure.FIXED_TAX_TOKENS, limit=1)
    assert (
        alice_client.post(
            reverse("budget_update", args=[team.slug, budget.pk]), {"action": "delete"}
        ).status_code
        == 404
    )
    assert Budget.objects.filter(pk=budget.pk).exists()


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
    assert response.content.decode().count('class="alert-row ') == 12
    assert len(many) == len(few)


def test_budgets_editor_adds_validates_and_reevaluates(alice_client, team):
    server = stdio_server(team)
    stack = Stack.objects.create(team=team, name="agent")
    snapshot = record(server, "sprawling", True)
    assert snapshot.budget_checks == {}

    url = reverse("budgets", args=[team.slug])
    response = alice_client.post(
        url,
        {"scope": f"server:{server.pk}", "measure": "fixed_tax_tokens", "level": "error", "limit": "4000"},
    )
    assert response.status_code == 302
    snapshot.refresh_from_db()
    assert snapshot.budget_checks["fixed_tax_tokens"]["breached"] is True
    alert = Alert.objects.get(server=server)

    duplicate = alice_client.post(
        url, {"scope": f"server:{server.pk}", "measure": "fixed_tax_tokens", "level": "error", "limit": "1"}
    )
    assert "That budget already exists" in duplicate.content.decode()
    wrong = alice_client.post(
        url, {"scope": f"stack:{stack.pk}", "measure": "fixed_tax_tokens", "level": "error", "limit": "1"}
    )
    assert "A stack takes only the stack budgets (fixed tax, upfront per request)." in wrong.content.decode()
    assert Budget.objects.count() == 1

    budget = Budget.objects.get()
    raised = alice_client.post(
        reverse("budget_update", args=[team.slug, budget.pk]),
        {"action": "limit", "limit": "5000"},
        HTTP_HX_REQUEST="true",
    )
    assert raised.status_code == 200 and f'id="budget-{budget.pk}"' in raised.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.RESOLVED
    # The budgets table lists the budget with its new limit (the add form's dropdown would name the
    # measure whatever the table holds, so the row itself is what is checked).
    page = alice_client.get(url).content.decode()
    row = re.search(rf'<tr id="budget-{budget.pk}">.*?</tr>', page, re.S)
    assert row, "the budget's row is missing from the budgets table"
    assert f">{server.name}</a>" in row.group(0) and "Fixed tax (tokens)" in row.group(0)
    assert 'name="limit" value="5000"' in row.group(0)


def test_send_test_button(team, alice_client):
    with Receiver() as hook:
        channel = Channel.objects.create(
            team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url}
        )
        url = reverse("channel_action", args=[team.slug, channel.code])
        response = alice_client.post(url, {"action": "test"}, HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        assert 'id="test-result"' in response.content.decode() and "Test sent" in response.content.decode()
        assert len(hook.requests) == 1 and hook.json()["event"] == "test"
    with Receiver([410]) as gone:
        channel.config = {**channel.config, "url": gone.url}
        channel.save()
        response = alice_client.post(url, {"action": "test"}, HTTP_HX_REQUEST="true")
        assert "Test failed: HTTP 410" in response.content.decode()
    channel.refresh_from_db()
    assert channel.enabled, "a failed test shows the error but does not disable the channel"


def test_channel_pages_are_team_scoped_and_admin_only_for_changes(
    alice_client, team, client, user_factory, team_factory
):

    bob = user_factory("bob")
    other = team_factory("Other", bob)
    theirs = Channel.objects.create(
        team=other, name="theirs", kind=ChannelKind.EMAIL, config={"to": ["b@x.io"]}
    )
    assert alice_client.get(reverse("channel_detail", args=[other.slug, theirs.code])).status_code == 404
    assert alice_client.get(reverse("channel_detail", args=[team.slug, theirs.code])).status_code == 404
    response = alice_client.post(
        reverse("channel_action", args=[team.slug, theirs.code]), {"action": "delete"}
    )
    assert response.status_code == 404 and Channel.objects.filter(pk=theirs.pk).exists()

    response = alice_client.post(
        reverse("channels", args=[team.slug]),
        {"name": "ops", "kind": "email", "target": "ops@example.com, not-an-address", "min_level": "warning"},
    )
    assert response.status_code == 200 and "Not an email address: not-an-address" in response.content.decode()
    response = alice_client.post(
        reverse("channels", args=[team.slug]),
        {"name": "ops", "kind": "webhook", "target": "http://127.0.0.1:9/x", "min_level": "error"},
    )
    created = Channel.objects.get(team=team, name="ops")
    assert response.status_code == 302 and created.min_level == "error" and created.config["secret"]

    carol = user_factory("carol")
    Membership.objects.create(team=team, user=carol, role=Membership.Role.MEMBER)
    client.force_login(carol)
    assert client.get(reverse("channel_detail", args=[team.slug, created.code])).status_code == 200
    assert (
        created.config["secret"]
        not in client.get(reverse("channel_detail", args=[team.slug, created.code])).content.decode()
    )
    assert (
        client.post(reverse("channel_action", args=[team.slug, created.code]), {"action": "test"}).status_code
        == 404
    )


def _budget_row(alice_client, team, budget: Budget, action: str) -> str:
    response = alice_client.post(
        reverse("budget_update", args=[team.slug, budget.pk]), {"action": action}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    return response.content.decode()


def test_budget_toggle_and_delete_reevaluate_the_alerts(alice_client, team):
    server = stdio_server(team)
    snapshot = record(server, "sprawling", True)
    budget = Budget.objects.create(
        team=team, server=server, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=4000
    )
    alice_client.post(
        reverse("budget_update", args=[team.slug, budget.pk]), {"action": "limit", "limit": "4000"}
    )
    alert = Alert.objects.get(server=server, measure=Measure.FIXED_TAX_TOKENS)
    assert alert.is_open

    # Disabling the budget resolves its alert; the row says so and offers to enable it again.
    row = _budget_row(alice_client, team, budget, "toggle")
    assert row.lstrip().startswith(f'<tr id="budget-{budget.pk}">') and ">Enable</button>" in row
    budget.refresh_from_db()
    alert.refresh_from_db()
    assert budget.enabled is False and alert.state == AlertState.RESOLVED

    # Enabling it again breaches again: a new alert opens.
    row = _budget_row(alice_client, team, budget, "toggle")
    assert ">Disable</button>" in row
    budget.refresh_from_db()
    assert budget.enabled is True
    reopened = Alert.objects.open().get(server=server, measure=Measure.FIXED_TAX_TOKENS)
    assert reopened.pk != alert.pk and reopened.limit == 4000

    # Deleting it removes the row (htmx swaps in nothing), the budget, its alert and the band.
    assert _budget_row(alice_client, team, budget, "delete") == ""
    assert not Budget.objects.filter(pk=budget.pk).exists()
    reopened.refresh_from_db()
    assert reopened.state == AlertState.RESOLVED
    snapshot.refresh_from_db()
    assert "fixed_tax_tokens" not in snapshot.budget_checks

    # Without htmx, the same actions land back on the rules page.
    other = Budget.objects.create(team=team, measure=Measure.INSTRUCTIONS_TOKENS, limit=1)
    response = alice_client.post(reverse("budget_update", args=[team.slug, other.pk]), {"action": "delete"})
    assert response.status_code == 302 and response.url == reverse("budgets", args=[team.slug])
    assert not Budget.objects.filter(pk=other.pk).exists()


def test_channel_disable_enable_and_delete(alice_client, team):
    channel = Channel.objects.create(team=team, name="ops", kind=ChannelKind.EMAIL, config={"to": ["o@x.io"]})
    url = reverse("channel_action", args=[team.slug, channel.code])
    detail = reverse("channel_detail", args=[team.slug, channel.code])

    response = alice_client.post(url, {"action": "disable"})
    assert response.status_code == 302 and response.url == detail
    channel.refresh_from_db()
    assert channel.enabled is False and channel.disabled_at is not None
    assert channel.disabled_reason.startswith("Disabled by alice on ")
    # A disabled channel gets no delivery for a new alert.
    assert deliveries_for(open_alert(team, rule_key="server:a:fixed_tax_tokens").alert) == []

    response = alice_client.post(url, {"action": "enable"})
    assert response.status_code == 302 and response.url == detail
    channel.refresh_from_db()
    assert channel.enabled is True and channel.disabled_reason == "" and channel.disabled_at is None
    assert [
        d.channel_id for d in deliveries_for(open_alert(team, rule_key="server:b:fixed_tax_tokens").alert)
    ] == [channel.pk]

    response = alice_client.post(url, {"action": "delete"})
    assert response.status_code == 302 and response.url == reverse("channels", args=[team.slug])
    assert not Channel.objects.filter(pk=channel.pk).exists()
    assert alice_client.get(detail).status_code == 404


def test_webhook_urls_are_masked_on_the_channel_pages_like_the_other_targets(
    alice_client, team, client, user_factory
):
    # Webhook receivers put their credential in the URL (a token path, a key in the query,
    # userinfo); the pages show where it goes, never the credential, to members and admins alike.
    url = "https://hook-user:hook-pass@hooks.example.com:8443/in/7f3c9a1be2d44c0b?key=k-51b7e0aa"
    channel = Channel.objects.create(team=team, name="ops", kind=ChannelKind.WEBHOOK, config={"url": url})
    carol = user_factory("carol")
    Membership.objects.create(team=team, user=carol, role=Membership.Role.MEMBER)
    client.force_login(carol)
    for viewer in (alice_client, client):
        for page in (
            reverse("channels", args=[team.slug]),
            reverse("channel_detail", args=[team.slug, channel.code]),
        ):
            html = viewer.get(page).content.decode()
            assert "https://hooks.example.com:8443/" in html
            for secret in ("7f3c9a1be2d44c0b", "k-51b7e0aa", "hook-pass", "hook-user"):
                assert secret not in html, (page, secret)
    assert channel.target_display.startswith("https://hooks.example.com:8443/in/")
