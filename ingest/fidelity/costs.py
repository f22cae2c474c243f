"""Paste cost: what re-typing bulk content into tool arguments cost, and what a reference would have.

- **Pasted tokens**: cl100k_base tokens of each pasted value (``BulkArgument.tokens``).
- **Output tokens**: where a transcript gives the producing turn's output tokens, the call's share
  of them (``ToolCall.output_tokens``, split across calls of the turn by the ingest), split again
  across the call's bulk arguments in proportion to their pasted tokens.
- **Billed tokens**: the output tokens where known, else the pasted tokens (the model had to
  write at least those). Where a Claude Code turn's recorded figure was below the tokens of the
  tool inputs it wrote, the ingest counted those instead (``ToolCall.output_tokens_estimated``);
  the rollups count such calls in ``estimated_calls`` so the pages can say "estimated".
- **Money**: billed tokens × the output price per million tokens of the agent's model, from the
  editable ``ModelPrice`` table (captures rarely name the model, so a price is chosen per agent
  family; see :class:`PriceBook`). Editing a price re-prices the rollups (one UPDATE per family).
- **Had they passed the reference**: the tokens of a reference argument (``"path":"<where>"``) in
  place of each pasted value — the matched reference document's URL or name where known, else a
  typical repository URL — priced the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import DecimalField, ExpressionWrapper, F, Q, Sum, Value

from dashboard.teams.models import Team
from ingest.capture.models import Agent, BulkArgument, ToolCall
from ingest.fidelity.models import FidelityDaily, ModelPrice
from mcptax.bulk import count_tokens
from mcptax.tokens import canonical

# What a reference usually looks like when nothing better is known (about 20 tokens).
TYPICAL_REFERENCE = "https://github.com/acme/handbook/blob/main/docs/reference-document.md"
MILLION = Decimal(1_000_000)
MONEY_PLACES = Decimal("0.000001")


@functools.lru_cache(maxsize=4096)
def reference_argument_tokens(reference: str) -> int:
    """Tokens of ``"path":"<reference>"``: what the argument costs when passed by reference."""
    return count_tokens(canonical({"path": reference})[1:-1])


def reference_for(argument: BulkArgument) -> str:
    document = (argument.evidence or {}).get("document") or {}
    return document.get("url") or document.get("name") or TYPICAL_REFERENCE


class PriceBook:
    """The prices that apply to one team, resolved per agent family.

    Order: the team's row for the family, the team's default row, the global row for the family,
    the global default. No row at all: money figures are zero (tokens are still counted).
    """

    def __init__(self, team: Team | int) -> None:
        team_id = team if isinstance(team, int) else team.pk
        rows = list(ModelPrice.objects.filter(Q(team_id=team_id) | Q(team=None)).order_by("-updated", "-pk"))
        self._order = [
            [r for r in rows if r.team_id is not None and r.agent_family],
            [r for r in rows if r.team_id is not None and r.is_default],
            [r for r in rows if r.team_id is None and r.agent_family],
            [r for r in rows if r.team_id is None and r.is_default],
        ]

    def price_for(self, family: str | None) -> ModelPrice | None:
        for level, rows in enumerate(self._order):
            for row in rows:
                if level in (1, 3) or row.agent_family == family:
                    return row
        return None

    def output_rate(self, family: str | None) -> Decimal:
        """USD per token of output for an agent family."""
        price = self.price_for(family)
        return price.output_usd_per_mtok / MILLION if price else Decimal(0)

    def usd(self, tokens: int, family: str | None) -> Decimal:
        return (Decimal(tokens) * self.output_rate(family)).quantize(MONEY_PLACES)


@dataclass
class ArgumentCost:
    """The cost figures of one bulk argument (for the rollup and the call list)."""

    pasted_tokens: int
    output_tokens: int
    billed_tokens: int
    reference_tokens: int


def split_output_tokens(total: int | None, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (equal shares when all are 0); sums to ``total``."""
    if not weights:
        return []
    if total is None:
        return [0] * len(weights)
    weight_sum = sum(weights)
    if weight_sum <= 0:
        weights, weight_sum = [1] * len(weights), len(weights)
    shares = [total * w // weight_sum for w in weights]
    shares[0] += total - sum(shares)
    return shares


def argument_costs(call: ToolCall, arguments: Sequence[BulkArgument]) -> list[ArgumentCost]:
    """Per argument, in the given order: pasted, output (the call's share), billed and reference tokens."""
    output = split_output_tokens(call.output_tokens, [a.tokens for a in arguments])
    costs = []
    for argument, out in zip(arguments, output, strict=True):
        known = call.output_tokens is not None
        costs.append(
            ArgumentCost(
                pasted_tokens=argument.tokens,
                output_tokens=out,
                billed_tokens=out if known else argument.tokens,
                reference_tokens=reference_argument_tokens(reference_for(argument)),
            )
        )
    return costs


def call_cost(call: ToolCall, arguments: Sequence[BulkArgument], prices: PriceBook) -> dict[str, Any]:
    """Cost of one call for the call list: tokens, USD, and USD had it passed a reference."""
    costs = argument_costs(call, arguments)
    family = call.agent.family if call.agent_id and call.agent else None
    billed = sum(c.billed_tokens for c in costs)
    reference = sum(c.reference_tokens for c in costs)
    return {
        "pasted_tokens": sum(c.pasted_tokens for c in costs),
        "output_tokens": call.output_tokens,
        "estimated": call.output_tokens_estimated,
        "billed_tokens": billed,
        "reference_tokens": reference,
        "cost_usd": prices.usd(billed, family),
        "reference_cost_usd": prices.usd(reference, family),
    }


# -- from the rollups ---------------------------------------------------------------------------------


def summary(
    team: Team, *, agent: Agent | int | None = None, since: Any = None, until: Any = None
) -> dict[str, Any]:
    """Paste tokens and money over the rollups (one query): pasted, output and billed tokens, USD,
    USD had every paste been a reference, and the difference (``saving_usd``)."""
    rows = FidelityDaily.objects.filter(team=team)
    if agent is not None:
        rows = rows.filter(agent=agent)
    if since is not None:
        rows = rows.filter(day__gte=since)
    if until is not None:
        rows = rows.filter(day__lte=until)
    totals = rows.aggregate(
        pasted_tokens=Sum("pasted_tokens"),
        output_tokens=Sum("output_tokens"),
        billed_tokens=Sum("billed_tokens"),
        reference_tokens=Sum("reference_tokens"),
        cost_usd=Sum("cost_usd"),
        reference_cost_usd=Sum("reference_cost_usd"),
        arguments=Sum("arguments"),
        estimated_calls=Sum("estimated_calls"),
    )
    result = {k: (v or 0) for k, v in totals.items()}
    result["cost_usd"] = Decimal(result["cost_usd"]).quantize(MONEY_PLACES)
    result["reference_cost_usd"] = Decimal(result["reference_cost_usd"]).quantize(MONEY_PLACES)
    result["saving_usd"] = result["cost_usd"] - result["reference_cost_usd"]
    return result


def reprice(teams: Iterable[Team] | None = None) -> int:
    """Recompute the money columns of the rollups from their tokens and the current prices.

    One UPDATE per (team, agent family); returns the number of rows updated.
    """
    if teams is None:
        team_ids = list(FidelityDaily.objects.values_list("team_id", flat=True).distinct())
    else:
        team_ids = [t.pk for t in teams]
    updated = 0
    money = DecimalField(max_digits=16, decimal_places=6)
    for team_id in team_ids:
        book = PriceBook(team_id)
        families = set(
            Agent.objects.filter(team_id=team_id, daily__isnull=False)
            .values_list("family", flat=True)
            .distinct()
        )
        groups: list[tuple[str | None, Q]] = [(f, Q(agent__family=f)) for f in families]
        groups.append((None, Q(agent=None)))
        for family, condition in groups:
            rate = Value(book.output_rate(family), output_field=money)
            updated += FidelityDaily.objects.filter(condition, team_id=team_id).update(
                cost_usd=ExpressionWrapper(F("billed_tokens") * rate, output_field=money),
                reference_cost_usd=ExpressionWrapper(F("reference_tokens") * rate, output_field=money),
            )
    return updated


def on_price_changed(sender: Any, instance: ModelPrice, **kwargs: Any) -> None:
    """A price was added, edited or removed: re-price the rollups it can affect."""
    if kwargs.get("raw"):
        return  # loading fixtures
    reprice(None if instance.team is None else [instance.team])
