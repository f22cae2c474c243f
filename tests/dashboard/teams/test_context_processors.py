"""The navigation context every page gets."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.alerts.models import AlertState
from dashboard.teams.context_processors import ACTIVE_ALERT_STATE
from tests.dashboard.alerts.factories import open_alert

pytestmark = pytest.mark.django_db


def test_nav_counts_the_current_teams_active_alerts(alice_client, team, team_factory, alice):
    # The processor spells the state itself (teams sits below alerts); it must be the model's.
    assert ACTIVE_ALERT_STATE == AlertState.ACTIVE
    other = team_factory("Other", alice)
    open_alert(team, rule_key="server:1:fixed_tax_tokens")
    acknowledged = open_alert(team, rule_key="server:2:fixed_tax_tokens").alert
    assert acknowledged.acknowledge(alice, "")
    page = alice_client.get(reverse("team_settings", args=[team.slug]))
    assert page.context["nav_team"] == team and page.context["nav_active_alerts"] == 1
    page = alice_client.get(reverse("team_settings", args=[other.slug]))
    assert page.context["nav_team"] == other and page.context["nav_active_alerts"] == 0
