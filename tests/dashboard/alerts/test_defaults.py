"""Default budgets: a new team starts guarded; the rules are ordinary, editable and marked."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from dashboard.alerts.budgets import evaluate_server
from dashboard.alerts.models import Alert, Budget, Level, Measure
from dashboard.teams.models import Membership
from dashboard.teams.services import create_team
from tests.dashboard.factories import http_server, page_text, record, tool

pytestmark = pytest.mark.django_db

SMALL = [tool("read", "Read a file.")]
QUADRUPLED = [
    tool("read", "Read a file. " + "It reads the whole file and returns its text in one piece. " * 6),
    tool("write", "Write a file.", {"path": {"type": "string"}, "text": {"type": "string"}}),
]


def _rules(team):
    return {(t.measure, t.level): (t.limit, t.is_default) for t in Budget.objects.filter(team=team)}


def test_a_new_team_gets_the_default_budgets(alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        team = create_team("Fresh", alice, context_window=128_000)
    assert Membership.objects.get(team=team, user=alice).role == Membership.Role.OWNER
    assert _rules(team) == {
        (Measure.RELEASE_GROWTH_PCT, Level.WARNING): (10.0, True),
        (Measure.RELEASE_GROWTH_PCT, Level.ERROR): (25.0, True),
        (Measure.STACK_FIXED_TAX_TOKENS, Level.WARNING): (12_800.0, True),  # 10% of 128,000
    }


def test_defaults_fire_on_a_quadrupled_release(alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        team = create_team("Fresh", alice)
    server = http_server(team, "files")
    record(server, SMALL, "1.0")
    record(server, QUADRUPLED, "2.0")
    evaluate_server(server)
    alert = Alert.objects.open().get(team=team, measure=Measure.RELEASE_GROWTH_PCT)
    assert alert.level == Level.ERROR and alert.limit == 25.0


def test_defaults_are_marked_and_editable_on_the_budgets_page(
    client, alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        team = create_team("Fresh", alice)
    client.force_login(alice)
    html = client.get(reverse("budgets", args=[team.slug])).content.decode()
    budget = Budget.objects.get(team=team, measure=Measure.RELEASE_GROWTH_PCT, level=Level.WARNING)
    row = page_text(html.split(f'id="budget-{budget.pk}"')[1].split("</tr>")[0])
    assert "default" in row and "Growth per release (%)" in row
    response = client.post(
        reverse("budget_update", args=[team.slug, budget.pk]), {"action": "limit", "limit": "15"}
    )
    assert response.status_code == 302
    budget.refresh_from_db()
    assert budget.limit == 15.0


def test_a_team_made_without_the_service_gets_none_until_the_command(team):
    assert not Budget.objects.filter(team=team).exists()
    out = StringIO()
    call_command("default_budgets", team.slug, stdout=out)
    assert "Added Growth per release (%) warning 10" in out.getvalue()
    assert len(_rules(team)) == 3
    again = StringIO()
    call_command("default_budgets", team.slug, stdout=again)
    assert "nothing added" in again.getvalue()
    assert Budget.objects.filter(team=team).count() == 3
    with pytest.raises(CommandError, match="No team with the slug 'nope'"):
        call_command("default_budgets", "nope")


def test_the_admin_announces_a_new_team(admin_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            reverse("admin:dashboard_team_add"),
            {
                "name": "From admin",
                "slug": "from-admin",
                "context_window": "200000",
                "protocol_era": "handshake",
                "loading_client": "claude-code",
                "created_0": "2026-12-01",
                "created_1": "10:00:00",
                "memberships-TOTAL_FORMS": "0",
                "memberships-INITIAL_FORMS": "0",
            },
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Budget.objects.filter(team__slug="from-admin", is_default=True).count() == 3


def test_the_budget_form_creates_every_fidelity_rule_kind(alice_client, team):
    url = reverse("budgets", args=[team.slug])
    server = http_server(team, "files")
    posts = [
        {
            "scope": "team",
            "measure": Measure.AGENT_EXACT_RATE,
            "level": "warning",
            "limit": "90",
            "window": "40",
        },
        {
            "scope": f"server:{server.pk}",
            "measure": Measure.DAMAGED_ARRIVALS,
            "level": "error",
            "limit": "0",
            "window": "20",
        },
        {"scope": "team", "measure": Measure.PASTE_COST_PER_DAY, "level": "warning", "limit": "2.5"},
    ]
    for data in posts:
        assert alice_client.post(url, data).status_code == 302, data
    got = {(t.measure, t.server_id, t.limit, t.window) for t in Budget.objects.filter(team=team)}
    assert got == {
        (Measure.AGENT_EXACT_RATE, None, 90.0, 40),
        (Measure.DAMAGED_ARRIVALS, server.pk, 0.0, 20),
        (Measure.PASTE_COST_PER_DAY, None, 2.5, 50),
    }
    refused = alice_client.post(
        url,
        {
            "scope": f"server:{server.pk}",
            "measure": Measure.AGENT_EXACT_RATE,
            "level": "error",
            "limit": "80",
        },
    )
    assert "exact rate and paste cost are team-wide" in refused.content.decode()
    too_high = alice_client.post(
        url, {"scope": "team", "measure": Measure.AGENT_EXACT_RATE, "level": "error", "limit": "120"}
    )
    assert "0 to 100" in too_high.content.decode()
    html = page_text(alice_client.get(url).content.decode())
    assert "over the last 40 bulk calls" in html and "$2.50" not in html  # editors see the input
