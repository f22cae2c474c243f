"""Handling alerts: manual and bulk actions, past-tense resolutions, banners, the live count, links."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from dashboard.alerts.budgets import evaluate_server
from dashboard.alerts.models import Alert, AlertState, Budget, Level, Measure
from dashboard.alerts.notify.delivery import alert_payload, render
from dashboard.alerts.notify.models import EventKind, NotificationEvent
from dashboard.origin import DEFAULT_SITE_URL
from tests.dashboard import factories
from tests.dashboard.factories import http_server, independent_tax, page_text, record, tool

pytestmark = pytest.mark.django_db

SMALL = [tool("read", "Read a file.")]
BIG = [tool("read", "Read a file. " + "Every line of it, in order, as text. " * 10), tool("write", "Write.")]


def _breach(team, name="files", limit=None):
    """A server whose snapshot is over a fixed-tax warning, judged as a poll judges it."""
    limit = limit if limit is not None else (independent_tax(SMALL) + independent_tax(BIG)) // 2
    Budget.objects.get_or_create(
        team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, defaults={"limit": limit}
    )
    server = http_server(team, name)
    record(server, BIG, "1.0")
    evaluate_server(server)
    return server, Alert.objects.open().get(server=server)


def _htmx(client, url, data=None):
    return client.post(url, data or {}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="alert-x")


def test_resolve_by_hand_reads_in_the_past_and_updates_the_count_out_of_band(alice_client, team):
    server, alert = _breach(team)
    response = _htmx(alice_client, reverse("alert_resolve", args=[team.slug, alert.code]))
    assert response.status_code == 200
    html = response.content.decode()
    alert.refresh_from_db()
    assert alert.state == AlertState.RESOLVED and alert.resolved_by.username == "alice"
    tax = independent_tax(BIG)
    assert (
        f"was {tax:,} tokens, over the warning limit of {alert.limit:,.0f} tokens; resolved by hand by alice"
        in page_text(html)
    )
    # The navigation count comes along out of band, now empty; banners hear alertsChanged.
    count = re.search(r'<span id="nav-alert-count"[^>]*hx-swap-oob="true"[^>]*>(.*?)</span>', html, re.S)
    assert count is not None and "badge" not in count.group(1)
    assert "alertsChanged" in response["HX-Trigger"]
    assert list(
        NotificationEvent.objects.filter(alert=alert).order_by("pk").values_list("kind", flat=True)
    ) == [
        EventKind.OPENED,
        EventKind.RESOLVED,
    ]
    again = _htmx(alice_client, reverse("alert_resolve", args=[team.slug, alert.code]))
    assert "already resolved" in again.content.decode()


def test_an_automatic_resolution_names_the_value_that_resolved_it_on_the_page_and_in_the_mail(
    alice_client, team
):
    server, alert = _breach(team)
    back = record(server, SMALL, "1.1")
    evaluate_server(server)
    alert.refresh_from_db()
    big, small = independent_tax(BIG), independent_tax(SMALL)
    assert alert.state == AlertState.RESOLVED and alert.value == big and alert.resolved_value == small
    expected = (
        f"{server.name}: Fixed tax (tokens) was {big:,} tokens, over the warning limit of {alert.limit:,.0f} "
        f"tokens; resolved: back to {small:,} tokens in {back.label}."
    )
    html = page_text(
        alice_client.get(reverse("alert_list", args=[team.slug]), {"state": "resolved"}).content.decode()
    )
    assert expected in html
    assert f"was {big:,} tokens now {small:,} tokens" in html
    mail = render(alert_payload(alert, EventKind.RESOLVED))
    assert expected in mail.text and " is " not in mail.text.split("\n")[0]
    assert f"Now: {small:,} tokens" in mail.text


def test_bulk_acknowledge_silence_and_resolve(alice_client, team):
    alerts = [_breach(team, name)[1] for name in ("a", "b", "c")]
    url = reverse("alert_bulk", args=[team.slug])
    codes = [str(a.code) for a in alerts]
    response = alice_client.post(url, {"action": "acknowledge", "alert": codes[:2]}, follow=True)
    assert "2 alerts acknowledged." in page_text(response.content.decode())
    assert [Alert.objects.get(pk=a.pk).state for a in alerts] == ["acknowledged", "acknowledged", "active"]
    alice_client.post(url, {"action": "silence", "alert": codes[2:], "until": ""})
    silenced = Alert.objects.get(pk=alerts[2].pk)
    assert silenced.state == "silenced" and silenced.silenced_until_release
    response = alice_client.post(url, {"action": "resolve", "alert": codes}, follow=True)
    assert "3 alerts resolved." in page_text(response.content.decode())
    assert set(Alert.objects.filter(team=team).values_list("state", flat=True)) == {"resolved"}
    refused = alice_client.post(url, {"action": "acknowledge", "alert": codes[:1]}, follow=True)
    assert "0 alerts acknowledged; 1 left as they were" in page_text(refused.content.decode())
    nothing = alice_client.post(url, {"action": "resolve"}, follow=True)
    assert "Tick one or more alerts" in page_text(nothing.content.decode())


def test_bulk_through_htmx_swaps_the_list_and_the_count_and_a_plain_post_still_redirects(alice_client, team):
    alerts = [_breach(team, name)[1] for name in ("a", "b", "c")]
    url = reverse("alert_bulk", args=[team.slug])
    back = reverse("alert_list", args=[team.slug]) + "?state=active"
    codes = [str(a.code) for a in alerts]
    response = alice_client.post(
        url,
        {"action": "acknowledge", "alert": codes[:2], "next": back},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="alert-table",
    )
    assert response.status_code == 200 and "HX-Request" in response["Vary"]
    html = response.content.decode()
    # The list's region, as the page it came from shows it (only active alerts: one is left) ...
    assert html.lstrip().startswith('<div id="alert-table">') and "<html" not in html
    assert '<p id="bulk-note" class="ok" role="status">2 alerts acknowledged.</p>' in html
    rows = re.findall(r'<tr id="alert-([0-9a-f-]+)"', html)
    assert rows == [codes[2]]
    assert f'name="next" value="{back}"' in html
    # ... with the navigation count out of band, now 1, and the banners told to refresh.
    count = re.search(
        r'<span id="nav-alert-count"[^>]*hx-swap-oob="true"[^>]*>(.*?)</span></span>', html, re.S
    )
    assert count is not None and '<span class="badge error" title="1 active alert">1</span>' in count.group(0)
    assert "alertsChanged" in response["HX-Trigger"]
    assert [Alert.objects.get(pk=a.pk).state for a in alerts] == ["acknowledged", "acknowledged", "active"]
    # A refusal answers in the same region, changes nothing and triggers nothing.
    refused = alice_client.post(
        url, {"action": "resolve", "next": back}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="alert-table"
    )
    assert 'class="error" role="status">Tick one or more alerts' in refused.content.decode()
    assert "HX-Trigger" not in refused
    # Without JavaScript: a plain post, redirected back to the page it came from.
    plain = alice_client.post(url, {"action": "resolve", "alert": codes[2:], "next": back})
    assert plain.status_code == 302 and plain["Location"] == back
    assert Alert.objects.get(pk=alerts[2].pk).state == "resolved"


def test_banner_lists_the_scopes_open_alerts_and_the_count_endpoint_is_live(alice_client, team):
    files, _ = _breach(team, "files")
    docs, docs_alert = _breach(team, "docs")
    url = reverse("alert_banner", args=[team.slug])
    team_banner = page_text(alice_client.get(url, HTTP_HX_REQUEST="true").content.decode())
    assert "2 open alerts" in team_banner and "files" in team_banner and "docs" in team_banner
    server_banner = page_text(alice_client.get(url, {"server": str(files.code)}).content.decode())
    assert "1 open alert on files" in server_banner and "docs" not in server_banner
    assert f"{independent_tax(BIG):,} tokens" in server_banner
    count_url = reverse("alert_nav_count", args=[team.slug])
    assert (
        '<span class="badge error" title="2 active alerts">2</span>'
        in alice_client.get(count_url).content.decode()
    )
    docs_alert.acknowledge(None)
    assert (
        '<span class="badge error" title="1 active alert">1</span>'
        in alice_client.get(count_url).content.decode()
    )
    # Every page that shows alerts carries the banner slot.
    for page in (
        reverse("team_overview", args=[team.slug]),
        reverse("server_detail", args=[team.slug, files.code]),
    ):
        assert 'id="alert-banner"' in alice_client.get(page).content.decode()


def test_subjects_link_to_the_page_that_explains_them(alice_client, team):
    server, _ = _breach(team)
    Alert.objects.create(
        team=team,
        rule_key="agent:7:agent_exact_rate",
        measure=Measure.AGENT_EXACT_RATE,
        level=Level.WARNING,
        subject_label="claude-code 2.0.1",
        value=80.0,
        limit=90.0,
        message="claude-code 2.0.1: 80.0% exact",
    )
    html = alice_client.get(reverse("alert_list", args=[team.slug])).content.decode()
    assert (
        f'href="{reverse("fidelity_agent", args=[team.slug, "claude-code"])}">claude-code 2.0.1</a>' in html
    )
    assert f'href="{reverse("server_detail", args=[team.slug, server.code])}">files</a>' in html
    assert "80.0%" in html and "90.0%" in html


def test_notification_links_use_site_url_else_the_request_else_the_default(alice_client, team, settings):
    settings.SITE_URL = ""
    settings.ALLOWED_HOSTS = ["testserver", "tax.internal"]
    server, quiet = _breach(team)  # opened outside any request
    assert alert_payload(quiet, EventKind.OPENED)["alert"]["url"].startswith(DEFAULT_SITE_URL + "/t/")
    quiet.delete()
    # A budget added on the page re-judges the server inside that request: the alert remembers it.
    Budget.objects.filter(team=team).delete()
    alice_client.post(
        reverse("budgets", args=[team.slug]),
        {"scope": "team", "measure": Measure.FIXED_TAX_TOKENS, "level": "error", "limit": "1"},
        HTTP_HOST="tax.internal:8123",
    )
    alert = Alert.objects.open().get(server=server)
    assert alert_payload(alert, EventKind.OPENED)["alert"]["url"].startswith("http://tax.internal:8123/t/")
    settings.SITE_URL = "https://tax.example.com/"
    assert alert_payload(alert, EventKind.OPENED)["alert"]["url"].startswith("https://tax.example.com/t/")


def test_a_tool_alert_links_to_the_tool_page_in_the_list_the_payload_and_the_email(
    alice_client, team, settings
):
    settings.SITE_URL = "https://tax.example.com"
    limit = factories.independent_tool_tokens(BIG)["read"] - 1  # the biggest tool, alone, is just over
    Budget.objects.create(team=team, measure=Measure.MAX_TOOL_TOKENS, level=Level.WARNING, limit=limit)
    server = http_server(team, "files")
    record(server, BIG, "1.0")
    evaluate_server(server)
    alert = Alert.objects.open().get(server=server, measure=Measure.MAX_TOOL_TOKENS)
    tool_page = f"/t/{team.slug}/servers/{server.code}/tools/read/"
    assert reverse("fidelity_tool", args=[team.slug, server.code, "read"]) == tool_page

    html = alice_client.get(reverse("alert_list", args=[team.slug])).content.decode()
    assert f'href="{tool_page}">files / read</a>' in html
    payload = alert_payload(alert, EventKind.OPENED)
    assert payload["alert"]["subject_url"] == "https://tax.example.com" + tool_page
    assert f"files / read: https://tax.example.com{tool_page}" in render(payload).text.splitlines()


def test_a_server_alert_links_to_the_server_page_in_the_payload(team):
    server, alert = _breach(team)
    assert alert_payload(alert, EventKind.OPENED)["alert"]["subject_url"].endswith(
        f"/t/{team.slug}/servers/{server.code}/"
    )
