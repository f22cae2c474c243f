"""Hypothesis tool lists whose arguments are named like JSON Schema keywords (`type`, `properties`,
`items`, `$ref`, `enum`), through the stored snapshot, the server page, the release diff and the gate."""

from __future__ import annotations

import itertools
import json

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings

from dashboard.servers.models import McpServer, Transport
from dashboard.servers.polling import record_snapshot
from dashboard.teams.models import ApiToken
from tests.corpus.conftest import oracle_tax
from tests.corpus.schemas import tool_lists
from tests.dashboard.factories import fetch_result

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
_names = itertools.count()


@hyp_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=tool_lists(), after=tool_lists())
def test_snapshot_page_diff_and_gate_take_any_schema(team, alice_client, client, before, after):
    server = McpServer.objects.create(
        team=team, name=f"tricky-{next(_names)}", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    a, _ = record_snapshot(server, fetch_result(server.name, before, "1"))
    b, _ = record_snapshot(server, fetch_result(server.name, after, "2"))
    assert (a.fixed_tax_tokens, b.fixed_tax_tokens) == (oracle_tax(before), oracle_tax(after))
    assert a.analysis_errors == [] and b.analysis_errors == []

    page = alice_client.get(reverse("server_detail", args=[team.slug, server.code]))
    assert page.status_code == 200
    diff = alice_client.get(reverse("snapshot_diff", args=[team.slug, server.code]), {"a": a.pk, "b": b.pk})
    assert diff.status_code == 200
    assert diff.context["diff"].delta == oracle_tax(after) - oracle_tax(before)

    _, token = ApiToken.issue(team, f"ci-{server.name}")
    response = client.post(
        "/api/v1/check",
        data=json.dumps({"server": server.name, "tools_list": {"tools": before}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["status"] == "ok", result["errors"]
    assert result["totals"]["delta_tokens"] == oracle_tax(before) - oracle_tax(after)
