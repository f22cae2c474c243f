"""FidelityDaily rollups: maintained at ingest, corrected on re-judging, read by the pages.

One row per team × day × agent × server label × tool × verdict × size bucket (see the model).
Each call adds to exactly one row with ``calls=1`` (its first bulk argument's, or ``by_reference``
or ``no_bulk``), and each bulk argument to its verdict's row with ``arguments=1`` and its bytes
and tokens. A call is added once: ``ToolCall.in_rollups`` is claimed in the same transaction that
adds it, so a batch signalled twice adds nothing the second time. Only calls that
``counts_in_rollups`` (a transcript call linked to its proxy capture does not) are added; when a
link is made after the transcript call was added, it is taken out again.

Nothing here scans the call table: additions come from the batch just stored, corrections from
the arguments whose verdicts changed; reads aggregate the rollup table.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, date, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import F, Sum, Value
from django.db.models.fields import DecimalField
from django.utils import timezone

from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
from ingest.capture.models import BulkArgument, ToolCall
from ingest.fidelity.costs import PriceBook, argument_costs
from ingest.fidelity.models import FidelityDaily, SizeBucket
from mcptax import verdict_rules as fidelity

if TYPE_CHECKING:
    from ingest.fidelity.verdicts import Change

BY_REFERENCE = fidelity.BY_REFERENCE
NO_BULK = "no_bulk"
KB = 1024
# Upper bounds (exclusive) of the size buckets, in bytes.
BUCKET_BOUNDS: tuple[tuple[int, str], ...] = (
    (1 * KB, SizeBucket.UNDER_1K),
    (10 * KB, SizeBucket.K1_10),
    (50 * KB, SizeBucket.K10_50),
    (100 * KB, SizeBucket.K50_100),
)
BUCKET_ORDER: tuple[str, ...] = tuple(b.value for b in SizeBucket if b.value)
COUNTS = (
    "calls",
    "arguments",
    "bytes",
    "pasted_tokens",
    "output_tokens",
    "billed_tokens",
    "reference_tokens",
    "server_errors",
)
# Verdicts that are judgements of the agent (exact-match rates are over these).
JUDGED = tuple(v for v in fidelity.VERDICTS if v not in (fidelity.UNVERIFIABLE, fidelity.CAPTURE_TRUNCATED))
DAMAGED = (fidelity.TRUNCATED, fidelity.ELEMENTS_DROPPED)
_MONEY = DecimalField(max_digits=16, decimal_places=6)

Key = tuple[date, int | None, str, str, str, str]  # day, agent_id, server_label, tool, verdict, bucket


def size_bucket(nbytes: int) -> str:
    for bound, bucket in BUCKET_BOUNDS:
        if nbytes < bound:
            return bucket
    return SizeBucket.OVER_100K


def call_day(call: ToolCall) -> date:
    ts = call.request_ts or call.created
    return ts.astimezone(UTC).date()


def contributions(
    call: ToolCall, arguments: Sequence[BulkArgument], verdicts: dict[int, str] | None = None
) -> list[tuple[int | None, Key, Counter]]:
    """What one call adds to the rollups: ``(argument id or None, key, counts)`` per row touched.

    ``arguments`` are all of the call's bulk arguments; ``verdicts`` overrides their verdicts (to
    compute what an earlier verdict had added).
    """
    day, agent, label, tool = call_day(call), call.agent_id, call.server_label, call.tool
    error = 1 if call.is_error else 0
    if not arguments:
        verdict = BY_REFERENCE if call.is_reference_call else NO_BULK
        output = call.output_tokens or 0
        counts = Counter(calls=1, output_tokens=output, billed_tokens=output, server_errors=error)
        return [(None, (day, agent, label, tool, verdict, ""), counts)]
    ordered = sorted(arguments, key=lambda a: (a.pointer, a.pk))
    rows = []
    for index, (argument, cost) in enumerate(zip(ordered, argument_costs(call, ordered), strict=True)):
        verdict = (verdicts or {}).get(argument.pk, argument.verdict) or "pending"
        counts = Counter(
            calls=1 if index == 0 else 0,
            arguments=1,
            bytes=argument.bytes,
            pasted_tokens=cost.pasted_tokens,
            output_tokens=cost.output_tokens,
            billed_tokens=cost.billed_tokens,
            reference_tokens=cost.reference_tokens,
            server_errors=error if index == 0 else 0,
        )
        rows.append((argument.pk, (day, agent, label, tool, verdict, size_bucket(argument.bytes)), counts))
    return rows


class _Deltas:
    def __init__(self) -> None:
        self.rows: dict[Key, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))

    def add(self, key: Key, counts: Counter, sign: int = 1) -> None:
        row = self.rows[key]
        for name in COUNTS:
            row[name] += sign * counts.get(name, 0)


def _apply(team: Team, deltas: _Deltas, families: dict[int | None, str | None]) -> None:
    book = PriceBook(team)
    for key, counts in deltas.rows.items():
        if not any(counts.values()):
            continue
        day, agent_id, label, tool, verdict, bucket = key
        rate = book.output_rate(families.get(agent_id))
        cost = (Decimal(counts["billed_tokens"]) * rate).quantize(Decimal("0.000001"))
        reference_cost = (Decimal(counts["reference_tokens"]) * rate).quantize(Decimal("0.000001"))
        where = {
            "team": team,
            "day": day,
            "agent_id": agent_id,
            "server_label": label,
            "tool": tool,
            "verdict": verdict,
            "size_bucket": bucket,
        }
        increments: dict[str, Any] = {name: F(name) + value for name, value in counts.items() if value}
        increments["cost_usd"] = F("cost_usd") + Value(cost, output_field=_MONEY)
        increments["reference_cost_usd"] = F("reference_cost_usd") + Value(
            reference_cost, output_field=_MONEY
        )
        if FidelityDaily.objects.filter(**where).update(**increments):
            continue
        try:
            with transaction.atomic():
                FidelityDaily.objects.create(
                    **where, **counts, cost_usd=cost, reference_cost_usd=reference_cost
                )
        except IntegrityError:
            # Another worker created the row between our update and insert.
            FidelityDaily.objects.filter(**where).update(**increments)


def _arguments_by_call(call_ids: Iterable[int]) -> dict[int, list[BulkArgument]]:
    grouped: dict[int, list[BulkArgument]] = defaultdict(list)
    for argument in BulkArgument.objects.filter(call_id__in=list(call_ids)).only(
        "pk", "call_id", "pointer", "bytes", "tokens", "verdict", "evidence"
    ):
        grouped[argument.call_id].append(argument)
    return grouped


def _families(calls: Iterable[ToolCall]) -> dict[int | None, str | None]:
    return {c.agent_id: (c.agent.family if c.agent_id else None) for c in calls}


_CALL_FIELDS = (
    "pk",
    "team_id",
    "agent_id",
    "agent__family",
    "server_label",
    "tool",
    "request_ts",
    "created",
    "is_error",
    "is_reference_call",
    "output_tokens",
    "linked_call_id",
)


def add_calls(team: Team, call_ids: Sequence[int]) -> int:
    """Add these calls to the rollups (those not in yet, and counting); returns how many were added.

    Also takes out a previously added call that a call of this batch has just been linked to
    (the transcript copy of a proxy capture). Runs in one transaction.
    """
    with transaction.atomic():
        claimable = ToolCall.objects.filter(
            pk__in=list(call_ids), team=team, in_rollups=False, counts_in_rollups=True
        )
        calls = list(claimable.select_for_update(of=("self",)).select_related("agent").only(*_CALL_FIELDS))
        ToolCall.objects.filter(pk__in=[c.pk for c in calls]).update(in_rollups=True)
        linked_ids = set(
            ToolCall.objects.filter(pk__in=list(call_ids), linked_call__isnull=False).values_list(
                "linked_call_id", flat=True
            )
        )
        detached = list(
            ToolCall.objects.filter(pk__in=linked_ids, team=team, in_rollups=True, counts_in_rollups=False)
            .select_for_update(of=("self",))
            .select_related("agent")
            .only(*_CALL_FIELDS)
        )
        if detached:
            ToolCall.objects.filter(pk__in=[c.pk for c in detached]).update(in_rollups=False)
        if not calls and not detached:
            return 0
        arguments = _arguments_by_call([c.pk for c in calls + detached])
        deltas = _Deltas()
        for call in calls:
            for _, key, counts in contributions(call, arguments.get(call.pk, [])):
                deltas.add(key, counts)
        for call in detached:
            for _, key, counts in contributions(call, arguments.get(call.pk, [])):
                deltas.add(key, counts, sign=-1)
        _apply(team, deltas, _families(calls + detached))
    return len(calls)


def apply_verdict_changes(team: Team, changes: Sequence[Change]) -> None:
    """Move the counts of re-judged arguments from their old verdict's row to the new one's."""
    if not changes:
        return
    old = {c.argument.pk: c.old for c in changes}
    call_ids = {c.argument.call_id for c in changes}
    calls = list(
        ToolCall.objects.filter(pk__in=call_ids, in_rollups=True).select_related("agent").only(*_CALL_FIELDS)
    )
    if not calls:
        return
    arguments = _arguments_by_call([c.pk for c in calls])
    deltas = _Deltas()
    for call in calls:
        args = arguments.get(call.pk, [])
        before = {pk: key for pk, key, _ in contributions(call, args, old)}
        for pk, key, counts in contributions(call, args):
            if pk in old and before[pk] != key:
                deltas.add(before[pk], counts, sign=-1)
                deltas.add(key, counts)
    _apply(team, deltas, _families(calls))


# -- reading --------------------------------------------------------------------------------------------


def days_ago(days: int) -> date:
    return timezone.now().astimezone(UTC).date() - timedelta(days=days - 1)


def exact_rate(exact: int, judged: int) -> float | None:
    """Percent of judged arguments that arrived exact; None when nothing could be judged."""
    return round(100.0 * exact / judged, 2) if judged else None


def agent_table(team: Team, *, since: date | None = None) -> dict[int | None, dict[str, Any]]:
    """Per agent id: arguments, judged, exact, exact_rate, calls, by_reference, damaged (one query)."""
    rows = FidelityDaily.objects.filter(team=team)
    if since is not None:
        rows = rows.filter(day__gte=since)
    table: dict[int | None, dict[str, Any]] = {}
    for row in rows.values("agent_id", "verdict").annotate(calls=Sum("calls"), arguments=Sum("arguments")):
        entry = table.setdefault(
            row["agent_id"],
            {"arguments": 0, "judged": 0, "exact": 0, "calls": 0, "by_reference": 0, "damaged": 0},
        )
        entry["calls"] += row["calls"]
        entry["arguments"] += row["arguments"]
        verdict = row["verdict"]
        if verdict in JUDGED:
            entry["judged"] += row["arguments"]
        if verdict == fidelity.EXACT:
            entry["exact"] += row["arguments"]
        if verdict == BY_REFERENCE:
            entry["by_reference"] += row["calls"]
        if verdict in DAMAGED:
            entry["damaged"] += row["arguments"]
    for entry in table.values():
        entry["exact_rate"] = exact_rate(entry["exact"], entry["judged"])
    return table


def exact_rate_series(
    team: Team, *, agent_ids: Sequence[int] | None = None, since: date | None = None
) -> dict[int | None, list[dict[str, Any]]]:
    """Per agent id, per day (ascending): ``{"day", "exact", "judged", "rate"}`` (one query)."""
    rows = FidelityDaily.objects.filter(team=team, verdict__in=JUDGED)
    if agent_ids is not None:
        rows = rows.filter(agent_id__in=list(agent_ids))
    if since is not None:
        rows = rows.filter(day__gte=since)
    per: dict[int | None, dict[date, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for row in rows.values("agent_id", "day", "verdict").annotate(n=Sum("arguments")):
        cell = per[row["agent_id"]][row["day"]]
        cell[1] += row["n"]
        if row["verdict"] == fidelity.EXACT:
            cell[0] += row["n"]
    return {
        agent: [
            {"day": day, "exact": e, "judged": j, "rate": exact_rate(e, j)}
            for day, (e, j) in sorted(days.items())
        ]
        for agent, days in per.items()
    }


def breakdown(
    team: Team,
    by: str,
    *,
    agent: int | None = None,
    since: date | None = None,
    server_label: str | None = None,
) -> list[dict[str, Any]]:
    """Counts grouped by ``verdict``, ``tool`` (with server label) or ``size_bucket`` × verdict.

    Rows: ``{<group...>, "verdict", "calls", "arguments", "bytes", "pasted_tokens", "cost_usd"}``.
    """
    groups = {
        "verdict": ["verdict"],
        "tool": ["server_label", "tool", "verdict"],
        "size": ["size_bucket", "verdict"],
    }
    rows = FidelityDaily.objects.filter(team=team)
    if agent is not None:
        rows = rows.filter(agent_id=agent)
    if since is not None:
        rows = rows.filter(day__gte=since)
    if server_label is not None:
        rows = rows.filter(server_label=server_label)
    if by == "size":
        rows = rows.exclude(size_bucket="")
    return list(
        rows.values(*groups[by])
        .annotate(
            calls=Sum("calls"),
            arguments=Sum("arguments"),
            bytes=Sum("bytes"),
            pasted_tokens=Sum("pasted_tokens"),
            cost_usd=Sum("cost_usd"),
        )
        .order_by(*groups[by])
    )


def reference_adoption(team: Team, *, agent: int | None = None, since: date | None = None) -> dict[str, Any]:
    """Reference calls / all calls to tools that took both a reference and a paste (one query).

    A tool "accepts both" when the captured traffic shows both kinds of call to it (in the
    period, by anyone in the team); ``tools`` lists them with their own figures.
    """
    rows = FidelityDaily.objects.filter(team=team).exclude(verdict=NO_BULK)
    if since is not None:
        rows = rows.filter(day__gte=since)
    per_tool: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"reference": 0, "paste": 0, "mine": 0}
    )
    mine_ref: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows.values("server_label", "tool", "verdict", "agent_id").annotate(calls=Sum("calls")):
        tool = (row["server_label"], row["tool"])
        kind = "reference" if row["verdict"] == BY_REFERENCE else "paste"
        per_tool[tool][kind] += row["calls"]
        if agent is None or row["agent_id"] == agent:
            mine_ref[tool][0 if kind == "reference" else 1] += row["calls"]
    both = [tool for tool, c in per_tool.items() if c["reference"] and c["paste"]]
    reference = sum(mine_ref[t][0] for t in both)
    total = reference + sum(mine_ref[t][1] for t in both)
    return {
        "reference_calls": reference,
        "calls": total,
        "rate": round(100.0 * reference / total, 2) if total else None,
        "tools": [
            {
                "server_label": t[0],
                "tool": t[1],
                "reference_calls": mine_ref[t][0],
                "paste_calls": mine_ref[t][1],
            }
            for t in sorted(both)
        ],
    }


def calls_per_tool(team: Team, server_label: str, *, since: date | None = None) -> dict[str, int]:
    rows = FidelityDaily.objects.filter(team=team, server_label=server_label)
    if since is not None:
        rows = rows.filter(day__gte=since)
    return {r["tool"]: r["calls"] for r in rows.values("tool").annotate(calls=Sum("calls")) if r["calls"]}


def unused_tools(server: McpServer, days: int = 30) -> list[dict[str, Any]]:
    """Tools of the server's current snapshot never called in the captured traffic of the last ``days``.

    Each with ``name``, ``tokens`` and ``share`` (its fraction of the fixed tax, 0..1): what it costs
    every request while nobody uses it. Read from the rollups (calls matched by server label =
    server name). Empty when the server has no snapshot yet.
    """
    snapshot = server.current_snapshot
    if snapshot is None:
        return []
    called = set(calls_per_tool(server.team, server.name, since=days_ago(days)))
    total = snapshot.fixed_tax_tokens or 0
    return [
        {"name": tool.name, "tokens": tool.tokens, "share": (tool.tokens / total) if total else 0.0}
        for tool in snapshot.tools.order_by("position")
        if tool.name not in called
    ]


def cost_by_day(team: Team, days: Iterable[date]) -> dict[date, Decimal]:
    """Paste cost (USD) per day for these days (one query)."""
    rows = (
        FidelityDaily.objects.filter(team=team, day__in=list(days))
        .values("day")
        .annotate(cost=Sum("cost_usd"))
    )
    return {r["day"]: Decimal(r["cost"] or 0) for r in rows}
