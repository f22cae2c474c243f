"""Fixtures the dashboard tests share."""

from __future__ import annotations

import pytest

from dashboard.alerts.models import Budget, Level, Measure
from dashboard.teams.models import ApiToken
from tests.dashboard.alerts.factories import (
    record,
    stdio_server,
)


@pytest.fixture
def gated(team):
    """A registered server whose latest snapshot is v1.4.0, with an error budget the grown list breaks."""
    server = stdio_server(team)
    record(server, "sprawling", False)
    Budget.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=3500)
    _, token = ApiToken.issue(team, "ci")
    return server, token
