"""Fidelity pages: agents, one agent family's history, a call's drill-down, reference documents and
the price table.

Every lookup is scoped to a team of the user (another team's agent, call, document or price is a
404). Figures come from the FidelityDaily rollups (ingest.fidelity.selectors); only the paginated call list
and the single-call drill-down read calls, through indexed lookups.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Exists, OuterRef, Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.servers.selectors import normalize_sort, sort_columns
from dashboard.teams.access import get_team_for_user
from dashboard.teams.models import Team
from ingest.capture.models import Agent, BulkArgument, BulkContent, ToolCall
from ingest.fidelity import selectors as reports
from ingest.fidelity.costs import PriceBook, call_cost
from ingest.fidelity.models import ModelPrice, ReferenceDocument
from mcptax import textdiff
from mcptax import verdict_rules as fidelity

CALLS_PER_PAGE = 25
AGENTS_PER_PAGE = 50
DOCUMENTS_PER_PAGE = 25
# Context either side of the first difference on the drill-down, in characters.
DIFF_RADIUS = 120


def _period_choices(days: int) -> list[dict[str, Any]]:
    return [{"days": d, "label": f"{d} days" if d else "all", "active": d == days} for d in reports.PERIODS]


# --- agents list ---------------------------------------------------------------------------------


@login_required
def agents_list(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    days = reports.parse_period(request.GET.get("days"))
    rows, total = reports.agent_rows(team, since=reports.since_for(days))
    sort, key, descending = normalize_sort(
        request.GET.get("sort"), reports.AGENT_SORTS, reports.DEFAULT_AGENT_SORT
    )
    rows.sort(key=lambda r: (r.agent.family, r.agent.version))
    rows.sort(key=reports.AGENT_SORTS[key], reverse=descending)
    page = Paginator(rows, AGENTS_PER_PAGE).get_page(request.GET.get("page"))
    extra = {"days": days if days != reports.DEFAULT_PERIOD else None}
    ctx = {
        "team": team,
        "page": page,
        "total": total,
        "days": days,
        "periods": _period_choices(days),
        "sort": sort,
        "columns": sort_columns(reports.AGENT_COLUMNS, sort, extra),
        "query": urlencode({k: v for k, v in {"sort": sort, **extra}.items() if v is not None}),
    }
    if request.htmx:
        return render(request, "fidelity/agents.html#agents-region", ctx)
    return render(request, "fidelity/agents.html", ctx)


# --- one agent family -------------------------------------------------------------------------------


def _call_filters(request: HttpRequest, report: reports.FamilyReport) -> dict[str, Any]:
    verdict = request.GET.get("verdict", "")
    if verdict not in reports.VERDICT_ORDER:
        verdict = ""
    tool = request.GET.get("tool", "")
    known_tools = {f"{s}/{t}" for s, t, _ in report.by_tool}
    agent_ids = {str(a.pk) for a in report.agents}
    agent = request.GET.get("agent", "")
    return {
        "verdict": verdict,
        "tool": tool if tool in known_tools else "",
        "agent": agent if agent in agent_ids else "",
    }


@dataclass
class CallsPage:
    """One page of the call list. No total count: counting a busy agent's calls would scan them,
    and the rollups already give the totals."""

    calls: list[ToolCall]
    number: int
    has_next: bool

    def __iter__(self):
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)

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


def _page_number(raw: str | None) -> int:
    try:
        return max(1, min(int(raw or 1), 100_000))
    except ValueError:
        return 1


def _calls_page(
    request: HttpRequest, team: Team, report: reports.FamilyReport, filters: dict[str, Any], since
) -> CallsPage:
    ids = [int(filters["agent"])] if filters["agent"] else [a.pk for a in report.agents]
    calls = ToolCall.objects.filter(team=team, counts_in_rollups=True)
    if since is not None:
        calls = calls.filter(request_ts__gte=datetime.combine(since, time.min, tzinfo=UTC))
    verdict = filters["verdict"]
    if verdict == reports.BY_REFERENCE:
        calls = calls.filter(is_reference_call=True)
    elif verdict == reports.NO_BULK:
        calls = calls.filter(bulk_count=0, is_reference_call=False)
    pair = None
    if filters["tool"]:
        pair = next(((s, t) for s, t, _ in report.by_tool if f"{s}/{t}" == filters["tool"]), None)
        if pair is not None:
            calls = calls.filter(server_label=pair[0], tool=pair[1])
    number = _page_number(request.GET.get("page"))
    offset, limit = (number - 1) * CALLS_PER_PAGE, CALLS_PER_PAGE + 1
    if verdict and verdict not in (reports.BY_REFERENCE, reports.NO_BULK):
        stored = "" if verdict == reports.PENDING else verdict
        pastes = sum(n for v, n in report.total.by_verdict.items() if v in reports.PASTE_VERDICTS)
        if report.total.by_verdict.get(verdict, 0) * 20 < pastes:
            keys = _rare_verdict_keys(team, ids, stored, since, pair, offset, limit)
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


def _rare_verdict_keys(team: Team, agent_ids: list[int], verdict: str, since, pair, offset: int, limit: int):
    """Newest calls with a bulk argument of a rare verdict, found from the verdict's index side.

    Walking an agent's calls newest first and probing each for the verdict reads every call when
    matches are rare (a few % of pastes); the few arguments with that verdict are cheaper to join.
    """
    arguments = BulkArgument.objects.filter(
        team=team, verdict=verdict, call__agent_id__in=agent_ids, call__counts_in_rollups=True
    )
    if since is not None:
        arguments = arguments.filter(call__request_ts__gte=datetime.combine(since, time.min, tzinfo=UTC))
    if pair is not None:
        arguments = arguments.filter(call__server_label=pair[0], call__tool=pair[1])
    rows = arguments.order_by("-call__request_ts", "-call_id").values_list("call__request_ts", "call_id")
    keys: list[tuple] = []
    seen: set[int] = set()
    # Two arguments of one call can share a verdict: over-fetch a little and drop repeats.
    for ts, call_id in rows[: offset + limit + 50]:
        if call_id not in seen:
            seen.add(call_id)
            keys.append((ts, call_id))
    return keys[offset : offset + limit]


def _load_calls_page(keys: list[tuple], number: int) -> CallsPage:
    order = [pk for _, pk in keys[:CALLS_PER_PAGE]]
    arguments = BulkArgument.objects.only("pk", "call_id", "pointer", "verdict", "bytes", "tokens", "kind")
    loaded = (
        ToolCall.objects.filter(pk__in=order)
        .select_related("agent")
        .only(
            "pk",
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
    page = CallsPage([loaded[pk] for pk in order if pk in loaded], number, len(keys) > CALLS_PER_PAGE)
    for call in page:
        for argument in call.bulk_arguments.all():
            argument.css = reports.verdict_css(argument.verdict)
            argument.label = reports.verdict_label(argument.verdict or reports.PENDING)
    return page


def _calls_query(filters: dict[str, Any], days: int) -> str:
    params = {k: v for k, v in filters.items() if v}
    if days != reports.DEFAULT_PERIOD:
        params["days"] = days
    return urlencode(params)


@login_required
def agent_detail(request: HttpRequest, team_slug: str, family: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    days = reports.parse_period(request.GET.get("days"))
    since = reports.since_for(days)
    report = reports.family_report(team, family, since=since)
    if report is None:
        raise Http404("No such agent")
    filters = _call_filters(request, report)
    ctx: dict[str, Any] = {
        "team": team,
        "report": report,
        "family": family,
        "days": days,
        "periods": _period_choices(days),
        "filters": filters,
        "calls_query": _calls_query(filters, days),
        "verdict_choices": [(v, reports.verdict_label(v)) for v in reports.VERDICT_ORDER],
        "calls_page": _calls_page(request, team, report, filters, since),
    }
    if request.htmx and request.htmx.target == "calls-region":
        return render(request, "fidelity/agent.html#calls-region", ctx)
    series = reports.exact_rate_series(team, [a.pk for a in report.agents], since=since)
    ctx.update(
        figure=reports.exact_rate_figure(report.agents, series),
        version_rows=[
            (a, reports.agent_label(a), report.per_agent.get(a.pk, reports.Tally())) for a in report.agents
        ],
        verdict_cells=report.total.verdict_cells(),
        columns=report.verdicts_seen,
        column_labels=[reports.verdict_label(v) for v in report.verdicts_seen],
    )
    return render(request, "fidelity/agent.html", ctx)


# --- one call -------------------------------------------------------------------------------------------


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
    for _name, candidate in fidelity.text_hypotheses(arrived, from_arrived=True):
        if fidelity.content_sha256(candidate) == expected_sha256:
            return candidate
    return None


def _diff_for(argument: BulkArgument, expected_texts: dict[str, str]) -> dict[str, Any] | None:
    """diff_context around the first difference, or None when there is nothing to show."""
    evidence = argument.evidence or {}
    if argument.verdict in ("", fidelity.EXACT, fidelity.UNVERIFIABLE, fidelity.CAPTURE_TRUNCATED):
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
    context["line"] = fidelity.utf8(expected)[:offset].count(b"\n") + 1
    return context


@login_required
def call_detail(request: HttpRequest, team_slug: str, call_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    call = (
        ToolCall.objects.filter(team=team, pk=call_id)
        .select_related("agent", "server", "session", "job", "linked_call")
        .first()
    )
    if call is None:
        raise Http404("No such call")
    arguments = list(call.bulk_arguments.select_related("content").order_by("pointer"))
    expected_texts = _expected_texts(team, arguments)
    documents = {
        d.pk: d
        for d in ReferenceDocument.objects.filter(
            team=team,
            pk__in={
                (a.evidence or {}).get("document", {}).get("id")
                for a in arguments
                if (a.evidence or {}).get("document")
            },
        ).defer("text")
    }
    rows = []
    for argument in arguments:
        evidence = argument.evidence or {}
        document = documents.get((evidence.get("document") or {}).get("id"))
        rows.append(
            {
                "arg": argument,
                "evidence": evidence,
                "document": document,
                "label": reports.verdict_label(argument.verdict or reports.PENDING),
                "css": reports.verdict_css(argument.verdict),
                "diff": _diff_for(argument, expected_texts),
            }
        )
    ctx = {
        "team": team,
        "call": call,
        "rows": rows,
        "cost": call_cost(call, arguments, PriceBook(team)) if arguments else None,
        "family": call.agent.family if call.agent_id else "",
    }
    return render(request, "fidelity/call.html", ctx)


# --- reference documents -----------------------------------------------------------------------------


class ReferenceUploadForm(forms.Form):
    file = forms.FileField()
    name = forms.CharField(max_length=300, required=False, help_text="Defaults to the file name")


class ReferenceUrlForm(forms.Form):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    name = forms.CharField(max_length=300, required=False, help_text="Defaults to the file name in the URL")


def _documents_context(request: HttpRequest, team: Team) -> dict[str, Any]:
    documents = ReferenceDocument.objects.filter(team=team).select_related("created_by").defer("text")
    page = Paginator(documents, DOCUMENTS_PER_PAGE).get_page(request.GET.get("page"))
    shas = [d.sha256 for d in page]
    # How many pastes expected each document, by verdict: one grouped query over the indexed
    # expected_sha256 column, for this page's documents only.
    matched: dict[str, dict[str, int]] = {}
    if shas:
        from django.db.models import Count

        for row in (
            BulkArgument.objects.filter(team=team, expected_sha256__in=shas)
            .values("expected_sha256", "verdict")
            .annotate(n=Count("pk"))
            .order_by()
        ):
            matched.setdefault(row["expected_sha256"], {})[row["verdict"] or reports.PENDING] = row["n"]
    for doc in page:
        counts = matched.get(doc.sha256, {})
        doc.pastes = sum(counts.values())
        doc.exact_pastes = counts.get(fidelity.EXACT, 0)
        doc.verdicts = sorted(
            counts.items(),
            key=lambda kv: reports.VERDICT_ORDER.index(kv[0]) if kv[0] in reports.VERDICT_ORDER else 99,
        )
    return {"team": team, "page": page}


@login_required
def references(request: HttpRequest, team_slug: str) -> HttpResponse:
    from django.conf import settings

    from ingest.fidelity.references import ReferenceRefused, register_upload, register_url

    team = get_team_for_user(request, team_slug)
    upload_form = ReferenceUploadForm(auto_id="upload-%s")
    url_form = ReferenceUrlForm(auto_id="url-%s")
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "upload":
                upload_form = ReferenceUploadForm(request.POST, request.FILES, auto_id="upload-%s")
                if upload_form.is_valid():
                    uploaded = upload_form.cleaned_data["file"]
                    limit = int(settings.REFERENCE_MAX_BYTES)
                    if uploaded.size > limit:
                        raise ReferenceRefused(f"the file is {uploaded.size:,} bytes; the limit is {limit:,}")
                    inline = _rejudge_inline(team)
                    document, created = register_upload(
                        team,
                        uploaded.read(),
                        name=upload_form.cleaned_data["name"] or uploaded.name,
                        user=request.user,
                        rejudge=inline,
                    )
                    return _registered(request, team, document, created, inline)
            elif action == "url":
                url_form = ReferenceUrlForm(request.POST, auto_id="url-%s")
                if url_form.is_valid():
                    inline = _rejudge_inline(team)
                    document, created = register_url(
                        team,
                        url_form.cleaned_data["url"],
                        name=url_form.cleaned_data["name"],
                        user=request.user,
                        rejudge=inline,
                    )
                    return _registered(request, team, document, created, inline)
        except ReferenceRefused as exc:
            form = upload_form if action == "upload" else url_form
            form.add_error(None, f"Refused: {exc}")
    ctx = _documents_context(request, team)
    ctx.update(
        upload_form=upload_form,
        url_form=url_form,
        allowed_hosts=list(settings.REFERENCE_ALLOWED_HOSTS),
        max_bytes=int(settings.REFERENCE_MAX_BYTES),
        is_admin=team.is_admin(request.user),
    )
    if request.htmx and request.method == "GET":
        return render(request, "fidelity/references.html#documents-region", ctx)
    return render(request, "fidelity/references.html", ctx, status=400 if request.method == "POST" else 200)


# Above this many captured texts, re-judging after a registration moves to the worker so the
# page answers at once (it fingerprints every captured text of the team once).
INLINE_REJUDGE_MAX_CONTENTS = 2000


def _rejudge_inline(team: Team) -> bool:
    return BulkContent.objects.filter(team=team).count() <= INLINE_REJUDGE_MAX_CONTENTS


def _registered(
    request: HttpRequest, team: Team, document: ReferenceDocument, created: bool, inline: bool = True
) -> HttpResponse:
    if created and not inline:
        from ingest.fidelity.verdicts import queue_rejudge

        queue_rejudge(document)
    if created:
        rejudged = (
            f"{document.rejudged} verdict(s) recomputed"
            if inline
            else "the affected verdicts are being recomputed by a worker"
        )
        messages.success(
            request,
            f"Registered {document.name}: {document.bytes:,} bytes, {document.lines:,} lines, sha256 "
            f"{document.sha256[:16]}…; {rejudged}.",
        )
    else:
        messages.info(request, f"Already registered as {document.name} (same sha256); nothing changed.")
    return redirect("fidelity_references", team_slug=team.slug)


@login_required
@require_POST
def reference_delete(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    from ingest.fidelity.references import remove_document

    team = get_team_for_user(request, team_slug, admin=True)
    document = ReferenceDocument.objects.filter(team=team, code=code).defer("text").first()
    if document is None:
        raise Http404("No such reference document")
    name = document.name
    changed = remove_document(document)
    messages.success(request, f"Removed {name}; {changed} verdict(s) recomputed.")
    return redirect("fidelity_references", team_slug=team.slug)


# --- price table ---------------------------------------------------------------------------------------


class ModelPriceForm(forms.ModelForm):
    class Meta:
        model = ModelPrice
        fields = ["model", "agent_family", "is_default", "input_usd_per_mtok", "output_usd_per_mtok", "note"]
        labels = {
            "input_usd_per_mtok": "Input USD / 1M tokens",
            "output_usd_per_mtok": "Output USD / 1M tokens",
        }

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team
        for name in ("input_usd_per_mtok", "output_usd_per_mtok"):
            self.fields[name].min_value = Decimal(0)
            self.fields[name].widget.attrs["min"] = "0"

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        model, family = data.get("model"), data.get("agent_family", "")
        if model:
            clash = ModelPrice.objects.filter(team=self.team, model=model, agent_family=family)
            if self.instance.pk:
                clash = clash.exclude(pk=self.instance.pk)
            if clash.exists():
                raise forms.ValidationError(
                    f"This team already has a price for {model}" + (f" with {family}" if family else "") + "."
                )
        for name in ("input_usd_per_mtok", "output_usd_per_mtok"):
            value = data.get(name)
            if value is not None and value < 0:
                self.add_error(name, "A price cannot be negative.")
        return data

    def save(self, commit: bool = True) -> ModelPrice:
        price = super().save(commit=False)
        price.team = self.team
        price.updated = timezone.now()
        if commit:
            price.save()
        return price


def _get_team_price(team: Team, price_id: int) -> ModelPrice:
    price = ModelPrice.objects.filter(team=team, pk=price_id).first()
    if price is None:
        raise Http404("No such price of this team")
    return price


def _prices_context(
    team: Team, form: ModelPriceForm | None, editing: ModelPrice | None, is_admin: bool
) -> dict:
    rows = list(
        ModelPrice.objects.filter(Q(team=team) | Q(team=None)).order_by("team_id", "agent_family", "model")
    )
    book = PriceBook(team)
    families = sorted(set(Agent.objects.filter(team=team).values_list("family", flat=True)))
    applied = [(family, book.price_for(family)) for family in families]
    return {
        "team": team,
        "team_prices": [r for r in rows if r.team_id],
        "global_prices": [r for r in rows if not r.team_id],
        "applied": applied,
        "form": form,
        "editing": editing,
        "is_admin": is_admin,
    }


@login_required
def prices(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    is_admin = team.is_admin(request.user)
    form = ModelPriceForm(team=team) if is_admin else None
    if request.method == "POST":
        if not is_admin:
            raise Http404("Team admins only")
        form = ModelPriceForm(request.POST, team=team)
        if form.is_valid():
            price = form.save()
            messages.success(request, f"Added the price for {price.model}; paste costs were re-priced.")
            return redirect("fidelity_prices", team_slug=team.slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "fidelity/prices.html", _prices_context(team, form, None, is_admin), status=status)


@login_required
def price_edit(request: HttpRequest, team_slug: str, price_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    price = _get_team_price(team, price_id)
    form = ModelPriceForm(request.POST or None, instance=price, team=team)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved the price for {price.model}; paste costs were re-priced.")
        return redirect("fidelity_prices", team_slug=team.slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "fidelity/prices.html", _prices_context(team, form, price, True), status=status)


@login_required
@require_POST
def price_override(request: HttpRequest, team_slug: str, price_id: int) -> HttpResponse:
    """Copy a global example price into the team's own table, where it can be edited."""
    team = get_team_for_user(request, team_slug, admin=True)
    source = ModelPrice.objects.filter(team=None, pk=price_id).first()
    if source is None:
        raise Http404("No such global price")
    price, created = ModelPrice.objects.get_or_create(
        team=team,
        model=source.model,
        agent_family=source.agent_family,
        defaults={
            "is_default": source.is_default,
            "input_usd_per_mtok": source.input_usd_per_mtok,
            "output_usd_per_mtok": source.output_usd_per_mtok,
            "note": f"copied from the global price of {source.model}",
        },
    )
    if not created:
        messages.info(request, f"The team already has its own price for {price.model}.")
    return redirect("fidelity_price_edit", team_slug=team.slug, price_id=price.pk)


@login_required
@require_POST
def price_delete(request: HttpRequest, team_slug: str, price_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    price = _get_team_price(team, price_id)
    model = price.model
    price.delete()
    messages.success(request, f"Removed the team's price for {model}; the global price applies again.")
    return redirect("fidelity_prices", team_slug=team.slug)
