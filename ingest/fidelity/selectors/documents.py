"""The reference documents page (a page of documents with the pastes that expected each) and the
price table (the team's rows, the global examples, and the price each agent family gets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Q

from dashboard.teams.models import Team
from ingest.capture.models import Agent, BulkArgument
from ingest.fidelity.costs import PriceBook
from ingest.fidelity.models import ModelPrice, ReferenceDocument
from ingest.fidelity.selectors.common import PENDING, VERDICT_ORDER
from mcptax import verdict_rules

DOCUMENTS_PER_PAGE = 25


@dataclass
class DocumentRow:
    document: ReferenceDocument
    # verdict -> pastes that expected this document's hash
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def pastes(self) -> int:
        return sum(self.counts.values())

    @property
    def exact_pastes(self) -> int:
        return self.counts.get(verdict_rules.EXACT, 0)

    @property
    def verdicts(self) -> list[tuple[str, int]]:
        order = {verdict: index for index, verdict in enumerate(VERDICT_ORDER)}
        return sorted(self.counts.items(), key=lambda kv: order.get(kv[0], len(order)))


def documents_page(team: Team, number: str | None) -> tuple[Page[ReferenceDocument], list[DocumentRow]]:
    """A page of the team's documents, and a row per document with the verdicts of the pastes that
    expected it: one grouped query over the indexed expected_sha256 column, for this page only."""
    documents = ReferenceDocument.objects.filter(team=team).select_related("created_by").defer("text")
    page = Paginator(documents, DOCUMENTS_PER_PAGE).get_page(number)
    rows = {d.sha256: DocumentRow(d) for d in page}
    if rows:
        for row in (
            BulkArgument.objects.filter(team=team, expected_sha256__in=list(rows))
            .values("expected_sha256", "verdict")
            .annotate(n=Count("pk"))
            .order_by()
        ):
            rows[row["expected_sha256"]].counts[row["verdict"] or PENDING] = row["n"]
    return page, list(rows.values())


def price_table(team: Team) -> dict[str, Any]:
    """The team's own prices, the global examples, and per agent family of the team the price
    that applies to it."""
    prices = list(
        ModelPrice.objects.filter(Q(team=team) | Q(team=None)).order_by("team_id", "agent_family", "model")
    )
    book = PriceBook(team)
    families = sorted(set(Agent.objects.filter(team=team).values_list("family", flat=True)))
    return {
        "team_prices": [p for p in prices if p.team_id],
        "global_prices": [p for p in prices if not p.team_id],
        "applied": [(family, book.price_for(family)) for family in families],
    }
