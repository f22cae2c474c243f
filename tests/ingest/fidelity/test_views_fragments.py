"""The two fragments the dashboard's pages load from fidelity: the team overview's fidelity panel and
a server's "paid but unused" tools. Each is team-scoped (another team's server is a 404, through
either team's URL) and needs a login."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from dashboard.alerts.models import Alert, Level, Measure
from dashboard.servers.models import McpServer, Transport
from ingest.capture import pipeline

pytestmark = [pytest.mark.timeout(300)]


def test_overview_panel_shows_agents_and_open_fidelity_alerts(alice_client, fidelity_team):
    team = fidelity_team
    Alert.objects.create(
        team=team,
        rule_key="agent:1:agent_exact_rate",
        measure=Measure.AGENT_EXACT_RATE,
        level=Level.ERROR,
        subject_label="claude-code 2.0.15",
        value=0,
        limit=95,
        message="claude-code 2.0.15: exact-match rate 0.0% over the last 3 bulk calls, under 95.0%.",
    )
    response = alice_client.get(reverse("fidelity_overview_panel", args=[team.slug]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card flush" id="fidelity-panel"') and "<html" not in html
    panel = response.context["fidelity"]
    assert [(r.agent.version, r.tally.exact_rate) for r in panel.rows] == [("2.0.15", 0.0), ("2.0.14", 50.0)]
    assert re.findall(r'data-agent="claude-code ([\d.]+)"', html) == ["2.0.15", "2.0.14"]
    assert "exact-match rate 0.0% over the last 3 bulk calls" in html
    assert "HX-Request" in response["Vary"]


def test_overview_panel_without_traffic_says_how_to_get_some(alice_client, team):
    html = alice_client.get(reverse("fidelity_overview_panel", args=[team.slug])).content.decode()
    assert "No captured agent traffic" in html and 'id="fidelity-agents"' in html


@pytest.mark.slow  # polls both example servers through their release history
def test_server_fragment_lists_paid_but_unused_tools(
    alice_client, team, polled_example_servers, captured_log
):
    lean = polled_example_servers["files-lean"]
    pipeline.ingest_path(team, captured_log)
    response = alice_client.get(reverse("fidelity_unused_tools", args=[team.slug, lean.code]))
    assert response.status_code == 200
    unused = response.context["unused_tools"]
    names = [t["name"] for t in unused]
    assert "write" not in names  # called in the capture
    assert names and set(names) < {t.name for t in lean.current_snapshot.tools.all()}
    html = response.content.decode()
    assert (
        html.lstrip().startswith('<section class="card flush" id="unused-tools"')
        and "Paid but unused" in html
    )
    tax = lean.current_snapshot.fixed_tax_tokens
    first = unused[0]
    assert f"{100 * first['tokens'] / tax:.1f}%" in html
    # The footer's total is the sum of the listed tools' tokens, counted here from the snapshot.
    tokens = {t.name: t.tokens for t in lean.current_snapshot.tools.all()}
    assert response.context["unused_tokens"] == sum(tokens[n] for n in names)
    assert re.findall(r'data-tool="([^"]+)"', html) == names


def test_a_server_never_polled_has_no_tools_to_list(alice_client, team):
    server = McpServer.objects.create(
        team=team, name="new", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    response = alice_client.get(reverse("fidelity_unused_tools", args=[team.slug, server.code]))
    assert response.status_code == 200 and response.context["unused_tools"] == []
    assert "No snapshot of this server yet" in response.content.decode()


def test_fragments_are_team_scoped_and_need_login(client, team, alice, user_factory, team_factory):
    server = McpServer.objects.create(
        team=team, name="mine", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    panel = reverse("fidelity_overview_panel", args=[team.slug])
    unused = reverse("fidelity_unused_tools", args=[team.slug, server.code])
    for url in (panel, unused):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response.url, url
    mallory = user_factory("mallory")
    own = team_factory("Mallory's", mallory)
    client.force_login(mallory)
    assert client.get(panel).status_code == 404
    assert client.get(unused).status_code == 404
    # Through her own team's URL, another team's server is still not found.
    assert client.get(reverse("fidelity_unused_tools", args=[own.slug, server.code])).status_code == 404
    assert client.get(reverse("fidelity_overview_panel", args=[own.slug])).status_code == 200
    client.force_login(alice)
    assert client.get(unused).status_code == 200
