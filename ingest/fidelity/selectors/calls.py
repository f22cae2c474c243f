"""The agent page's call list and the single-call drill-down: the only fidelity reads that touch the
call table, each through an indexed lookup (team, agent, -request_ts) or by primary key."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Prefetch, QuerySet

from dashboard.teams.models import Team
from ingest.capture.models import BulkArgument, BulkContent, ToolCall
from ingest.fidelity.models import BY_REFERENCE, NO_BULK, NO_CONTENT, ReferenceDocument
from ingest.fidelity.selectors.agents import FamilyReport
from ingest.fidelity.selectors.common import (
    PASTE_VERDICTS,
    PENDING,
    VERDICT_ORDER,
    verdict_css,
    verdict_label,
)
from mcptax import textdiff, verdict_rules
from mcptax.formats.records import utf8

CALLS_PER_PAGE = 25
# Context either side of the first difference on the drill-down, in characters.
DIFF_RADIUS = 120
CallKey = tuple[datetime | None, int]  # request_ts, call id: the order of the call list


# -- the call list --------------------------------------------------------------------------------


def call_filters(params: Mapping[str, str], report: FamilyReport) -> dict[str, str]:
    """The list's filters from the query string, each dropped unless it names something shown."""
    verdict = params.get("verdict", "")
    tool = params.get("tool", "")
    agent = params.get("agent", "")
    known_tools = {f"{s}/{t}" for s, t, _ in report.by_tool}
    agent_ids = {str(a.pk) for a in report.agents}
    return {
        "verdict": verdict if verdict in VERDICT_ORDER else "",
        "tool": tool if tool in known_tools else "",
        "agent": agent if agent in agent_ids else "",
    }


@dataclass
class Badge:
    argument: BulkArgument
    css: str
    label: str


@dataclass
class CallRow:
    call: ToolCall
    badges: list[Badge]


@dataclass
class CallsPage:
    """One page of the call list. No total count: counting a busy agent's calls would scan them,
    and the rollups already give the totals."""

    rows: list[CallRow]
    number: int
    has_next: bool

    def __iter__(self) -> Iterator[CallRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_other_pages(self) -> bool:
        return self.has_previous or self.has_next

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1


def page_number(raw: str | None) -> int:
    try:
        return max(1, min(int(raw or 1), 100_000))
    except ValueError:
        return 1


def _since_start(since: date) -> datetime:
    return datetime.combine(since, time.min, tzinfo=UTC)


def calls_page(
    team: Team, report: FamilyReport, filters: dict[str, str], since: date | None, number: int
) -> CallsPage:
    """Page ``number`` of the family's calls, newest first, under ``filters``."""
    ids = [int(filters["agent"])] if filters["agent"] else [a.pk for a in report.agents]
    calls = ToolCall.objects.filter(team=team, counts_in_rollups=True)
    if since is not None:
        calls = calls.filter(request_ts__gte=_since_start(since))
    verdict = filters["verdict"]
    if verdict == BY_REFERENCE:
        calls = calls.filter(is_reference_call=True)
    elif verdict == NO_BULK:
        calls = calls.filter(bulk_count=0, is_reference_call=False, no_content=False)
    elif verdict == NO_CONTENT:
        calls = calls.filter(no_content=True)
    pair = None
    if filters["tool"]:
        pair = next(((s, t) for s, t, _ in report.by_tool if f"{s}/{t}" == filters["tool"]), None)
        if pair is not None:
            calls = calls.filter(server_label=pair[0], tool=pair[1])
    offset, limit = (number - 1) * CALLS_PER_PAGE, CALLS_PER_PAGE + 1
    if verdict and verdict not in (BY_REFERENCE, NO_BULK, NO_CONTENT):
        stored = "" if verdict == PENDING else verdict
        pastes = sum(n for v, n in report.total.by_verdict.items() if v in PASTE_VERDICTS)
        if report.total.by_verdict.get(verdict, 0) * 20 < pastes:
            keys = rare_verdict_keys(team, ids, stored, since, pair, offset, limit)
            return _load_calls_page(keys, number)
        calls = calls.filter(Exists(BulkArgument.objects.filter(call_id=OuterRef("pk"), verdict=stored)))
    # Newest first per agent version, each walking its own (team, agent, -request_ts) index, then
    # merged: one ORDER BY over an IN list of agents would sort all of the family's calls.
    per_agent = [
        calls.filter(agent_id=agent_id)
        .order_by("-request_ts", "-pk")
        .values_list("request_ts", "pk")[: offset + limit]
        for agent_id in ids
    ]
    merged: QuerySet[ToolCall, CallKey]
    if len(per_agent) == 1:
        keys = list(per_agent[0][offset : offset + limit])
    elif not connection.features.supports_slicing_ordering_in_compound:
        # SQLite cannot limit the parts of a UNION; the embedded database is small anyway.
        merged = calls.filter(agent_id__in=ids).order_by("-request_ts", "-pk").values_list("request_ts", "pk")
        keys = list(merged[offset : offset + limit])
    else:
        merged = per_agent[0].union(*per_agent[1:], all=True).order_by("-request_ts", "-pk")
        keys = list(merged[offset : offset + limit])
    return _load_calls_page(keys, number)


# The tool page's call list: sort key -> the columns it orders by (then the id, to be stable).
TOOL_CALL_SORTS = {"when": "request_ts", "bytes": "argument_bytes"}
DEFAULT_TOOL_CALL_SORT = "-when"


def tool_calls_page(
    team: Team, server_label: str, tool: str, since: date | None, sort: str, number: int
) -> CallsPage:
    """Page ``number`` of one tool's calls, ordered by ``sort`` (a key of TOOL_CALL_SORTS, "-" first
    for descending); newest first walks the (team, server label, tool, -request_ts) index."""
    calls = ToolCall.objects.filter(team=team, server_label=server_label, tool=tool, counts_in_rollups=True)
    if since is not None:
        calls = calls.filter(request_ts__gte=_since_start(since))
    column = TOOL_CALL_SORTS[sort.lstrip("-")]
    order = (f"-{column}", "-pk") if sort.startswith("-") else (column, "pk")
    offset = (number - 1) * CALLS_PER_PAGE
    keys = list(calls.order_by(*order).values_list("request_ts", "pk")[offset : offset + CALLS_PER_PAGE + 1])
    return _load_calls_page(keys, number)


def rare_verdict_keys(
    team: Team,
    agent_ids: list[int],
    verdict: str,
    since: date | None,
    pair: tuple[str, str] | None,
    offset: int,
    limit: int,
) -> list[CallKey]:
    """Newest calls with a bulk argument of a rare verdict, found from the verdict's index side.

    Walking an agent's calls newest first and probing each for the verdict reads every call when
    matches are rare (a few % of pastes); the few arguments with that verdict are cheaper to join.
    """
    arguments = BulkArgument.objects.filter(
        team=team, verdict=verdict, call__agent_id__in=agent_ids, call__counts_in_rollups=True
    )
    if since is not None:
        arguments = arguments.filter(call__request_ts__gte=_since_start(since))
    if pair is not None:
        arguments = arguments.filter(call__server_label=pair[0], call__tool=pair[1])
    rows = arguments.order_by("-call__request_ts", "-call_id").values_list("call__request_ts", "call_id")
    keys: list[CallKey] = []
    seen: set[int] = set()
    # Two arguments of one call can share a verdict: over-fetch a little and drop repeats.
    for ts, call_id in rows[: offset + limit + 50]:
        if call_id not in seen:
            seen.add(call_id)
            keys.append((ts, call_id))
    return keys[offset : offset + limit]


def _load_calls_page(keys: list[CallKey], number: int) -> CallsPage:
    order = [pk for _, pk in keys[:CALLS_PER_PAGE]]
    arguments = BulkArgument.objects.only("pk", "call_id", "pointer", "verdict", "bytes", "tokens", "kind")
    loaded = (
        ToolCall.objects.filter(pk__in=order)
        .select_related("agent", "server")
        .only(
            "pk",
            "server__code",
            "server__name",
            "agent__family",
            "agent__name",
            "agent__version",
            "server_label",
            "tool",
            "request_ts",
            "created",
            "is_error",
            "is_reference_call",
            "reference_key",
            "argument_bytes",
            "bulk_count",
            "server_reported_sha256",
            "source_format",
        )
        .prefetch_related(Prefetch("bulk_arguments", queryset=arguments))
        .in_bulk()
        if order
        else {}
    )
    rows = [
        CallRow(
            call,
            [
                Badge(a, verdict_css(a.verdict), verdict_label(a.verdict or PENDING))
                for a in call.bulk_arguments.all()
            ],
        )
        for call in (loaded[pk] for pk in order if pk in loaded)
    ]
    return CallsPage(rows, number, len(keys) > CALLS_PER_PAGE)


# -- one call -------------------------------------------------------------------------------------


def _expected_texts(team: Team, arguments: list[BulkArgument]) -> dict[str, str]:
    """``{expected sha256: text}`` from reference documents, else captured copies (two queries)."""
    shas = {a.expected_sha256 for a in arguments if a.expected_sha256}
    if not shas:
        return {}
    known = dict(ReferenceDocument.objects.filter(team=team, sha256__in=shas).values_list("sha256", "text"))
    rest = shas - set(known)
    if rest:
        known.update(BulkContent.objects.filter(team=team, sha256__in=rest).values_list("sha256", "text"))
    return known


def _recover_expected(arrived: str, expected_sha256: str) -> str | None:
    """The expected text when a cheap hypothesis on the arrived one reproduces its hash."""
    for _name, candidate in verdict_rules.text_hypotheses(arrived, from_arrived=True):
        if verdict_rules.content_sha256(candidate) == expected_sha256:
            return candidate
    return None


def _diff_for(argument: BulkArgument, expected_texts: dict[str, str]) -> dict[str, Any] | None:
    """diff_context around the first difference, or None when there is nothing to show."""
    evidence = argument.evidence or {}
    if argument.verdict in (
        "",
        verdict_rules.EXACT,
        verdict_rules.UNVERIFIABLE,
        verdict_rules.CAPTURE_TRUNCATED,
    ):
        return None
    arrived = argument.content.text if argument.content_id and argument.content else None
    if arrived is None:
        return {"missing": "The capture kept only a digest of this argument, so there is no text to show."}
    expected = expected_texts.get(argument.expected_sha256)
    if expected is None and argument.expected_sha256:
        expected = _recover_expected(arrived, argument.expected_sha256)
    if expected is None:
        return {"missing": "No content is known under the expected hash, so only the hashes can be compared."}
    offset = evidence.get("first_diff_offset")
    if offset is None:
        offset = textdiff.first_diff_offset(arrived, expected)
    if offset is None:
        return None
    context = textdiff.diff_context(arrived, expected, offset, radius=DIFF_RADIUS)
    context["line"] = utf8(expected)[:offset].count(b"\n") + 1
    return context


def _document_id(argument: BulkArgument) -> int | None:
    document = (argument.evidence or {}).get("document") or {}
    return document.get("id")


def argument_rows(team: Team, call: ToolCall) -> tuple[list[BulkArgument], list[dict[str, Any]]]:
    """The call's bulk arguments, and per argument what the drill-down shows: its evidence, the
    reference document it was matched to, its verdict badge and the diff context."""
    arguments = list(call.bulk_arguments.select_related("content").order_by("pointer"))
    expected_texts = _expected_texts(team, arguments)
    wanted = {pk for a in arguments if (pk := _document_id(a)) is not None}
    documents = {d.pk: d for d in ReferenceDocument.objects.filter(team=team, pk__in=wanted).defer("text")}
    rows = []
    for argument in arguments:
        document_id = _document_id(argument)
        rows.append(
            {
                "arg": argument,
                "evidence": argument.evidence or {},
                "document": documents.get(document_id) if document_id is not None else None,
                "label": verdict_label(argument.verdict or PENDING),
                "css": verdict_css(argument.verdict),
                "diff": _diff_for(argument, expected_texts),
            }
        )
    return arguments, rows
