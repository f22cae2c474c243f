"""The price table: overriding a global example price, editing it (the figures are re-priced),
validation, who may edit, and removing the team's own price."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from dashboard.teams.models import Membership
from ingest.capture.models import Agent, BulkArgument
from ingest.fidelity.models import ModelPrice

pytestmark = [pytest.mark.timeout(300)]


def test_price_table_edits_reprice_the_figures(alice_client, fidelity_team, user_factory):
    team = fidelity_team
    url = reverse("fidelity_prices", args=[team.slug])
    new = Agent.objects.get(team=team, version="2.0.15")
    before = alice_client.get(reverse("fidelity_agents", args=[team.slug]))
    cost_before = {r.agent.pk: r.tally.cost_usd for g in before.context["page"] for r in g.versions}[new.pk]
    assert cost_before > 0

    # Override the global claude-code price for the team, then double it.
    global_price = ModelPrice.objects.get(team=None, model="claude-sonnet-4", agent_family="claude-code")
    response = alice_client.post(reverse("fidelity_price_override", args=[team.slug, global_price.pk]))
    own = ModelPrice.objects.get(team=team, agent_family="claude-code")
    assert response.status_code == 302 and response.url == reverse(
        "fidelity_price_edit", args=[team.slug, own.pk]
    )
    data = {
        "model": own.model,
        "agent_family": "claude-code",
        "input_usd_per_mtok": "3",
        "output_usd_per_mtok": "30",
        "note": "contract",
    }
    response = alice_client.post(reverse("fidelity_price_edit", args=[team.slug, own.pk]), data)
    assert response.status_code == 302
    after = alice_client.get(reverse("fidelity_agents", args=[team.slug]))
    cost_after = {r.agent.pk: r.tally.cost_usd for g in after.context["page"] for r in g.versions}[new.pk]
    assert cost_after == pytest.approx(cost_before * 2)

    # Validation: a negative price is refused with a message.
    data["output_usd_per_mtok"] = "-1"
    response = alice_client.post(reverse("fidelity_price_edit", args=[team.slug, own.pk]), data)
    assert response.status_code == 400 and "cannot be negative" in response.content.decode()

    # A plain member sees the table but cannot edit it.
    bob = user_factory("bob")
    Membership.objects.create(team=team, user=bob, role=Membership.Role.MEMBER)
    alice_client.force_login(bob)
    assert alice_client.get(url).status_code == 200
    assert alice_client.post(url, data).status_code == 404
    assert alice_client.get(reverse("fidelity_price_edit", args=[team.slug, own.pk])).status_code == 404


def _cost_of(client, team, agent: Agent) -> Decimal:
    page = client.get(reverse("fidelity_agents", args=[team.slug])).context["page"]
    return {r.agent.pk: r.tally.cost_usd for g in page for r in g.versions}[agent.pk]


def test_removing_the_teams_price_brings_back_the_global_one(alice_client, fidelity_team):
    team = fidelity_team
    new = Agent.objects.get(team=team, version="2.0.15")
    pasted = sum(BulkArgument.objects.filter(team=team, call__agent=new).values_list("tokens", flat=True))
    # The seeded global claude-code price: 15 USD per million output tokens (billed = pasted here).
    global_cost = (Decimal(pasted) * 15 / 1_000_000).quantize(Decimal("0.000001"))
    assert _cost_of(alice_client, team, new) == global_cost
    own = ModelPrice.objects.create(
        team=team, model="house", agent_family="claude-code", input_usd_per_mtok=1, output_usd_per_mtok=60
    )
    assert _cost_of(alice_client, team, new) == 4 * global_cost

    response = alice_client.post(reverse("fidelity_price_delete", args=[team.slug, own.pk]), follow=True)
    assert response.redirect_chain == [(reverse("fidelity_prices", args=[team.slug]), 302)]
    assert (
        "Removed the team&#x27;s price for house; the global price applies again."
        in response.content.decode()
    )
    assert not ModelPrice.objects.filter(pk=own.pk).exists()
    assert response.context["team_prices"] == []
    assert [(family, price.model) for family, price in response.context["applied"]] == [
        ("claude-code", "claude-sonnet-4")
    ]
    # The rollups were re-priced back to the global price.
    assert _cost_of(alice_client, team, new) == global_cost
    # Deleting it again: gone, so not found.
    assert alice_client.post(reverse("fidelity_price_delete", args=[team.slug, own.pk])).status_code == 404


def test_a_global_price_is_not_the_teams_to_delete(alice_client, team):
    global_price = ModelPrice.objects.filter(team=None).first()
    response = alice_client.post(reverse("fidelity_price_delete", args=[team.slug, global_price.pk]))
    assert response.status_code == 404
    assert ModelPrice.objects.filter(pk=global_price.pk).exists()


def test_a_price_model_name_with_cr_or_lf_is_refused(alice_client, team):
    url = reverse("fidelity_prices", args=[team.slug])
    for model in ("gpt-5\r\nX-Injected: 1", "gpt-5\nsecond line"):
        data = {"model": model, "agent_family": "", "input_usd_per_mtok": "1", "output_usd_per_mtok": "2"}
        response = alice_client.post(url, data)
        assert response.status_code == 400, model
        assert "control characters" in response.content.decode()
    assert not ModelPrice.objects.filter(team=team).exists()
