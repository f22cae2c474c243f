"""FidelityDaily rollups: maintained at ingest, corrected on re-judging, read by the pages.

One row per team × day × agent × server label × tool × verdict × size bucket (see the model).
Each call adds to exactly one row with ``calls=1`` (its first bulk argument's, or ``by_reference``
or ``no_bulk``), and each bulk argument to its verdict's row with ``arguments=1`` and its bytes
and tokens. A call is added once: ``ToolCall.in_rollups`` is claimed in the same transaction that
adds it, so a batch signalled twice adds nothing the second time. Only calls that
``counts_in_rollups`` (a transcript call linked to its proxy capture does not) are added; when a
link is made after the transcript call was added, it is taken out again.

Nothing here scans the call table: additions come from the batch just stored, corrections from
the arguments whose verdicts changed. Reading is ``ingest.fidelity.selectors``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date
from decimal import Decimal
from typing import Any

from django.db import connection, transaction

from dashboard.teams.models import Team
from ingest import bulkwrite
from ingest.capture.models import BulkArgument, ToolCall
from ingest.fidelity.costs import PriceBook, argument_costs
from ingest.fidelity.models import BY_REFERENCE, NO_BULK, NO_CONTENT, FidelityDaily, SizeBucket

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
    "estimated_calls",
)

Key = tuple[date, int | None, str, str, str, str]  # day, agent_id, server_label, tool, verdict, bucket


@dataclass
class Change:
    """One argument whose verdict was set or changed (``old`` is "" when it was first judged)."""

    argument: BulkArgument
    old: str


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
) -> list[tuple[int | None, Key, Counter[str]]]:
    """What one call adds to the rollups: ``(argument id or None, key, counts)`` per row touched.

    ``arguments`` are all of the call's bulk arguments; ``verdicts`` overrides their verdicts (to
    compute what an earlier verdict had added).
    """
    day, agent, label, tool = call_day(call), call.agent_id, call.server_label, call.tool
    error = 1 if call.is_error else 0
    estimated = 1 if call.output_tokens_estimated else 0
    if not arguments:
        verdict = BY_REFERENCE if call.is_reference_call else (NO_CONTENT if call.no_content else NO_BULK)
        output = call.output_tokens or 0
        counts = Counter(
            calls=1,
            output_tokens=output,
            billed_tokens=output,
            server_errors=error,
            estimated_calls=estimated,
        )
        return [(None, (day, agent, label, tool, verdict, ""), counts)]
    ordered = sorted(arguments, key=lambda a: (a.pointer, a.pk))
    rows: list[tuple[int | None, Key, Counter[str]]] = []
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
            estimated_calls=estimated if index == 0 else 0,
        )
        rows.append((argument.pk, (day, agent, label, tool, verdict, size_bucket(argument.bytes)), counts))
    return rows


class _Deltas:
    def __init__(self) -> None:
        self.rows: dict[Key, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))

    def add(self, key: Key, counts: Counter[str], sign: int = 1) -> None:
        row = self.rows[key]
        for name in COUNTS:
            row[name] += sign * counts.get(name, 0)


_KEY_FIELDS = ("team", "day", "agent", "server_label", "tool", "verdict", "size_bucket")
_SUMS = (*COUNTS, "cost_usd", "reference_cost_usd")


def _apply(team: Team, deltas: _Deltas, families: dict[int | None, str | None]) -> None:
    """Add the deltas to their rows, creating the missing ones: one ``INSERT ... ON CONFLICT DO
    UPDATE`` for the rows with an agent and one for those without (each unique constraint is
    partial), so concurrent workers adding to the same row both count."""
    book = PriceBook(team)
    with_agent: list[list[Any]] = []
    without_agent: list[list[Any]] = []
    for key, counts in deltas.rows.items():
        if not any(counts.values()):
            continue
        day, agent_id, label, tool, verdict, bucket = key
        rate = book.output_rate(families.get(agent_id))
        cost = (Decimal(counts["billed_tokens"]) * rate).quantize(Decimal("0.000001"))
        reference_cost = (Decimal(counts["reference_tokens"]) * rate).quantize(Decimal("0.000001"))
        values = [team.pk, day, agent_id, label, tool, verdict, bucket]
        values += [counts[name] for name in COUNTS] + [cost, reference_cost]
        (with_agent if agent_id is not None else without_agent).append(values)

    # In a batch: at the end of its transaction (``bulkwrite.deferring``); else now.
    def upsert() -> None:
        _upsert(with_agent, agent=True)
        _upsert(without_agent, agent=False)

    bulkwrite.later(upsert)


def _upsert(rows: list[list[Any]], *, agent: bool) -> None:
    if not rows:
        return
    # In key order: workers adding to the same rows at once (ranges of one file) then take their
    # row locks in the same order, so neither waits on the other in a cycle.
    rows = sorted(rows, key=lambda row: tuple("" if v is None else str(v) for v in row[: len(_KEY_FIELDS)]))
    keys = [bulkwrite.field(FidelityDaily, name) for name in _KEY_FIELDS]
    sums = [bulkwrite.field(FidelityDaily, name) for name in _SUMS]
    fields = keys + sums
    table = connection.ops.quote_name(FidelityDaily._meta.db_table)
    agent_column = bulkwrite.column(FidelityDaily, "agent")
    target = [bulkwrite.column(FidelityDaily, f.name) for f in keys if agent or f.name != "agent"]
    add = ", ".join(
        f"{c} = {table}.{c} + excluded.{c}" for c in (bulkwrite.column(FidelityDaily, f.name) for f in sums)
    )
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # Far below any database's limit on parameters: one statement for any real batch.
    per_statement = 30_000 // len(fields)
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        sql = (
            f"INSERT INTO {table} ({', '.join(bulkwrite.column(FidelityDaily, f.name) for f in fields)}) "
            f"VALUES {', '.join([row_sql] * len(chunk))} "
            f"ON CONFLICT ({', '.join(target)}) WHERE {agent_column} IS {'NOT NULL' if agent else 'NULL'} "
            f"DO UPDATE SET {add}"
        )
        params = [
            f.get_db_prep_save(v, connection) for row in chunk for f, v in zip(fields, row, strict=True)
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def _arguments_by_call(call_ids: Iterable[int]) -> dict[int, list[BulkArgument]]:
    grouped: dict[int, list[BulkArgument]] = defaultdict(list)
    for argument in BulkArgument.objects.filter(call_id__in=list(call_ids)).only(
        "pk", "call_id", "pointer", "bytes", "tokens", "verdict", "evidence"
    ):
        grouped[argument.call_id].append(argument)
    return grouped


def _families(calls: Iterable[ToolCall]) -> dict[int | None, str | None]:
    return {c.agent_id: (c.agent.family if c.agent else None) for c in calls}


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
    "output_tokens_estimated",
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


def add_batch(
    team: Team, calls: Sequence[ToolCall], arguments: Sequence[BulkArgument], *, written: bool
) -> int:
    """Add calls being stored in the current transaction (rows in memory, ``agent`` loaded, their
    arguments judged) and mark them ``in_rollups``: on the rows, and in the table if ``written``.
    Returns how many were added; calls that do not count, or are in already, are left out."""
    adding = [c for c in calls if c.counts_in_rollups and not c.in_rollups]
    if not adding:
        return 0
    grouped: dict[int, list[BulkArgument]] = defaultdict(list)
    for argument in arguments:
        grouped[argument.call_id].append(argument)
    deltas = _Deltas()
    for call in adding:
        for _, key, counts in contributions(call, grouped.get(call.pk, [])):
            deltas.add(key, counts)
    _apply(team, deltas, _families(adding))
    for call in adding:
        call.in_rollups = True
    if written:
        ToolCall.objects.filter(pk__in=[c.pk for c in adding]).update(in_rollups=True)
    return len(adding)


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
