"""Every fidelity page is scoped to a team of the user and needs a login."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ingest.capture.models import ToolCall
from ingest.fidelity.models import ModelPrice, ReferenceDocument

pytestmark = [pytest.mark.timeout(300)]


def test_another_teams_fidelity_objects_are_not_found(client, fidelity_team, user_factory, team_factory):
    team = fidelity_team
    mallory = user_factory("mallory")
    team_factory("Other", mallory)
    client.force_login(mallory)
    call = ToolCall.objects.filter(team=team).first()
    doc = ReferenceDocument.objects.get(team=team)
    own_price = ModelPrice.objects.create(
        team=team, model="m", input_usd_per_mtok=1, output_usd_per_mtok=1, agent_family="x"
    )
    urls = [
        reverse("fidelity_agents", args=[team.slug]),
        reverse("fidelity_agent", args=[team.slug, "claude-code"]),
        reverse("fidelity_call", args=[team.slug, call.pk]),
        reverse("fidelity_references", args=[team.slug]),
        reverse("fidelity_prices", args=[team.slug]),
        reverse("fidelity_price_edit", args=[team.slug, own_price.pk]),
    ]
    for url in urls:
        assert client.get(url).status_code == 404, url
    other = team_factory("Mine", mallory)
    # Through their own team's URLs, another team's call, agent and document are still 404.
    assert client.get(reverse("fidelity_call", args=[other.slug, call.pk])).status_code == 404
    assert client.get(reverse("fidelity_agent", args=[other.slug, "claude-code"])).status_code == 404
    assert client.post(reverse("fidelity_reference_delete", args=[other.slug, doc.code])).status_code == 404
    assert client.post(reverse("fidelity_price_delete", args=[other.slug, own_price.pk])).status_code == 404


def test_pages_need_login(client, team):
    for name, args in [("fidelity_agents", []), ("fidelity_references", []), ("fidelity_prices", [])]:
        response = client.get(reverse(name, args=[team.slug, *args]))
        assert response.status_code == 302 and "/login/" in response.url
