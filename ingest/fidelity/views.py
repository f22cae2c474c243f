"""Fidelity pages: agents, one agent family's history, a call's drill-down, reference documents and
the price table; and two fragments the dashboard's pages load (the overview's fidelity panel, a
server's unused tools).

Every lookup is scoped to a team of the user (another team's agent, call, document, price or
server is a 404). Figures come from the FidelityDaily rollups (ingest.fidelity.selectors); only the
paginated call list and the single-call drill-down read calls, through indexed lookups.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.servers.models import McpServer
from dashboard.servers.sorting import normalize_sort, sort_columns
from dashboard.system import broker
from dashboard.teams.access import Action, allowed, get_team_for_user, require
from dashboard.teams.models import Team
from ingest.capture.models import BulkContent, ToolCall
from ingest.fidelity.charts import exact_rate_figure
from ingest.fidelity.costs import PriceBook, call_cost
from ingest.fidelity.forms import ModelPriceForm, ReferenceUploadForm, ReferenceUrlForm
from ingest.fidelity.models import ModelPrice, ReferenceDocument
from ingest.fidelity.references import ReferenceRefused, register_upload, register_url, remove_document
from ingest.fidelity.selectors import agents as agent_figures
from ingest.fidelity.selectors.calls import argument_rows, call_filters, calls_page, page_number
from ingest.fidelity.selectors.common import (
    DEFAULT_PERIOD,
    PERIODS,
    VERDICT_ORDER,
    Tally,
    parse_period,
    since_for,
    verdict_label,
)
from ingest.fidelity.selectors.documents import documents_page, price_table
from ingest.fidelity.selectors.totals import unused_tools
from ingest.fidelity.verdicts import REJUDGE_TASK, queue_rejudge, rejudge_document

AGENTS_PER_PAGE = 50
# Above this many captured texts, re-judging after a registration moves to the worker so the
# page answers at once (it fingerprints every captured text of the team once).
INLINE_REJUDGE_MAX_CONTENTS = 2000
# The window _unused_tools.html names.
UNUSED_TOOLS_DAYS = 30


def _period_choices(days: int) -> list[dict[str, Any]]:
    return [{"days": d, "label": f"{d} days" if d else "all", "active": d == days} for d in PERIODS]


# --- agents ------------------------------------------------------------------------------------------


@login_required
def agents_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    days = parse_period(request.GET.get("days"))
    sort, key, descending = normalize_sort(
        request.GET.get("sort"), agent_figures.AGENT_SORTS, agent_figures.DEFAULT_AGENT_SORT
    )
    rows, total = agent_figures.agent_groups(
        team, since=since_for(days), sort_key=agent_figures.AGENT_SORTS[key], descending=descending
    )
    extra = {"days": days if days != DEFAULT_PERIOD else None}
    ctx = {
        "team": team,
        "page": Paginator(rows, AGENTS_PER_PAGE).get_page(request.GET.get("page")),
        "total": total,
        "days": days,
        "periods": _period_choices(days),
        "sort": sort,
        "columns": sort_columns(agent_figures.AGENT_COLUMNS, sort, extra),
        "query": urlencode({k: v for k, v in {"sort": sort, **extra}.items() if v is not None}),
    }
    return render_page(request, "fidelity/agents.html", ctx, partial="agents-region")


def _calls_query(filters: dict[str, str], days: int) -> str:
    params: dict[str, str | int] = {k: v for k, v in filters.items() if v}
    if days != DEFAULT_PERIOD:
        params["days"] = days
    return urlencode(params)


@login_required
def agent_detail(request: HtmxHttpRequest, team_slug: str, family: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    days = parse_period(request.GET.get("days"))
    since = since_for(days)
    report = agent_figures.family_report(team, family, since=since)
    if report is None:
        raise Http404("No such agent")
    filters = call_filters(request.GET, report)
    ctx: dict[str, Any] = {
        "team": team,
        "report": report,
        "family": family,
        "days": days,
        "periods": _period_choices(days),
        "filters": filters,
        "calls_query": _calls_query(filters, days),
        "verdict_choices": [(v, verdict_label(v)) for v in VERDICT_ORDER],
        "calls_page": calls_page(team, report, filters, since, page_number(request.GET.get("page"))),
    }
    if request.htmx.target == "calls-region":
        # Filtering or paging the call list: the rest of the page (and its chart) is not redrawn.
        return render_page(request, "fidelity/agent.html", ctx, partial="calls-region")
    series = agent_figures.exact_rate_series(team, agent_ids=[a.pk for a in report.agents], since=since)
    ctx.update(
        figure=exact_rate_figure(report.agents, series),
        version_rows=[
            (a, agent_figures.agent_label(a), report.per_agent.get(a.pk, Tally())) for a in report.agents
        ],
        verdict_cells=report.total.verdict_cells(),
        columns=report.verdicts_seen,
        column_labels=[verdict_label(v) for v in report.verdicts_seen],
    )
    return render_page(request, "fidelity/agent.html", ctx)


@login_required
def overview_panel(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """The team overview's fidelity panel (the dashboard's overview loads it)."""
    team = get_team_for_user(request, team_slug)
    ctx = {"team": team, "fidelity": agent_figures.overview_panel(team)}
    return render_page(request, "fidelity/_overview_panel.html", ctx)


# --- one call ------------------------------------------------------------------------------------------


def _get_call_for_user(request: HtmxHttpRequest, team_slug: str, call_id: int) -> tuple[Team, ToolCall]:
    team = get_team_for_user(request, team_slug)
    calls = ToolCall.objects.select_related("agent", "server", "session", "job", "linked_call")
    return team, get_object_or_404(calls, team=team, pk=call_id)


@login_required
def call_detail(request: HtmxHttpRequest, team_slug: str, call_id: int) -> HttpResponse:
    team, call = _get_call_for_user(request, team_slug, call_id)
    arguments, rows = argument_rows(team, call)
    ctx = {
        "team": team,
        "call": call,
        "rows": rows,
        "cost": call_cost(call, arguments, PriceBook(team)) if arguments else None,
        "family": call.agent.family if call.agent else "",
    }
    return render_page(request, "fidelity/call.html", ctx)


# --- a server's unused tools ----------------------------------------------------------------------------


def _get_server_for_user(request: HtmxHttpRequest, team_slug: str, code: UUID) -> tuple[Team, McpServer]:
    team = get_team_for_user(request, team_slug)
    servers = McpServer.objects.select_related("team", "current_snapshot")
    return team, get_object_or_404(servers, team=team, code=code)


@login_required
def server_unused_tools(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    """Tools of the server's current snapshot nobody called lately (the server page loads it)."""
    team, server = _get_server_for_user(request, team_slug, code)
    tools = unused_tools(server, days=UNUSED_TOOLS_DAYS)
    ctx = {
        "team": team,
        "server": server,
        "snapshot": server.current_snapshot,
        "unused_tools": tools,
        "unused_tokens": sum(t["tokens"] for t in tools),
    }
    return render_page(request, "fidelity/_unused_tools.html", ctx)


# --- reference documents -----------------------------------------------------------------------------


def _send_rejudge(document_id: int, /, *, eta: datetime | None = None) -> None:
    """Hand the re-judging to a worker (an `Enqueue`); with the broker down (recorded) do it here
    instead, since nothing would send it later."""
    where = f"re-judging for reference document {document_id}"
    # Called once the registration has committed (queue_rejudge), so sent at once.
    if broker.send_task(REJUDGE_TASK, document_id, where=where, eta=eta, after_commit=False).ok is False:
        rejudge_document(document_id)


def _rejudge_inline(team: Team) -> bool:
    return BulkContent.objects.filter(team=team).count() <= INLINE_REJUDGE_MAX_CONTENTS


def _register(
    request: HtmxHttpRequest,
    team: Team,
    action: str | None,
    upload_form: ReferenceUploadForm,
    url_form: ReferenceUrlForm,
) -> HttpResponse | None:
    """Register what the posted form names; a redirect when done, None when a form has errors."""
    inline = _rejudge_inline(team)
    if action == "upload" and upload_form.is_valid():
        uploaded = upload_form.cleaned_data["file"]
        limit = settings.REFERENCE_MAX_BYTES
        if uploaded.size > limit:
            raise ReferenceRefused(f"the file is {uploaded.size:,} bytes; the limit is {limit:,}")
        name = upload_form.cleaned_data["name"] or uploaded.name
        document, created = register_upload(
            team, uploaded.read(), name=name, user=request.user, rejudge=inline
        )
    elif action == "url" and url_form.is_valid():
        url, name = url_form.cleaned_data["url"], url_form.cleaned_data["name"]
        document, created = register_url(team, url, name=name, user=request.user, rejudge=inline)
    else:
        return None
    if created and not inline:
        queue_rejudge(document, _send_rejudge)
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
def references(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    upload_form = ReferenceUploadForm(auto_id="upload-%s")
    url_form = ReferenceUrlForm(auto_id="url-%s")
    if request.method == "POST":
        require(request, team, Action.ADD_REFERENCE)
        action = request.POST.get("action")
        if action == "upload":
            upload_form = ReferenceUploadForm(request.POST, request.FILES, auto_id="upload-%s")
        elif action == "url":
            url_form = ReferenceUrlForm(request.POST, auto_id="url-%s")
        try:
            done = _register(request, team, action, upload_form, url_form)
        except ReferenceRefused as exc:
            (upload_form if action == "upload" else url_form).add_error(None, f"Refused: {exc}")
        else:
            if done is not None:
                return done
    page, documents = documents_page(team, request.GET.get("page"))
    ctx = {
        "team": team,
        "page": page,
        "documents": documents,
        "upload_form": upload_form,
        "url_form": url_form,
        "allowed_hosts": list(settings.REFERENCE_ALLOWED_HOSTS),
        "max_bytes": settings.REFERENCE_MAX_BYTES,
    }
    if request.method == "POST":
        return render_page(request, "fidelity/references.html", ctx, status=400)
    return render_page(request, "fidelity/references.html", ctx, partial="documents-region")


def _get_document_for_user(
    request: HtmxHttpRequest, team_slug: str, code: UUID
) -> tuple[Team, ReferenceDocument]:
    team = get_team_for_user(request, team_slug, Action.REMOVE_REFERENCE)
    return team, get_object_or_404(ReferenceDocument.objects.defer("text"), team=team, code=code)


@login_required
@require_POST
def reference_delete(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, document = _get_document_for_user(request, team_slug, code)
    name = document.name
    changed = remove_document(document)
    messages.success(request, f"Removed {name}; {changed} verdict(s) recomputed.")
    return redirect("fidelity_references", team_slug=team.slug)


# --- price table ---------------------------------------------------------------------------------------


def _get_price_for_user(request: HtmxHttpRequest, team_slug: str, price_id: int) -> tuple[Team, ModelPrice]:
    """A price row of the team; the global examples are not the team's to edit."""
    team = get_team_for_user(request, team_slug, Action.MANAGE_PRICES)
    return team, get_object_or_404(ModelPrice, team=team, pk=price_id)


def _render_prices(
    request: HtmxHttpRequest, team: Team, form: ModelPriceForm | None, editing: ModelPrice | None
) -> HttpResponse:
    ctx = {"team": team, "form": form, "editing": editing, **price_table(team)}
    return render_page(request, "fidelity/prices.html", ctx, status=400 if request.method == "POST" else 200)


@login_required
def prices(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    form = ModelPriceForm(team=team) if allowed(request, team, Action.MANAGE_PRICES) else None
    if request.method == "POST":
        require(request, team, Action.MANAGE_PRICES)
        form = ModelPriceForm(request.POST, team=team)
        if form.is_valid():
            price = form.save()
            messages.success(request, f"Added the price for {price.model}; paste costs were re-priced.")
            return redirect("fidelity_prices", team_slug=team.slug)
    return _render_prices(request, team, form, None)


@login_required
def price_edit(request: HtmxHttpRequest, team_slug: str, price_id: int) -> HttpResponse:
    team, price = _get_price_for_user(request, team_slug, price_id)
    form = ModelPriceForm(request.POST or None, instance=price, team=team)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved the price for {price.model}; paste costs were re-priced.")
        return redirect("fidelity_prices", team_slug=team.slug)
    return _render_prices(request, team, form, price)


@login_required
@require_POST
def price_override(request: HtmxHttpRequest, team_slug: str, price_id: int) -> HttpResponse:
    """Copy a global example price into the team's own table, where it can be edited."""
    team = get_team_for_user(request, team_slug, Action.MANAGE_PRICES)
    source = get_object_or_404(ModelPrice, team=None, pk=price_id)
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
def price_delete(request: HtmxHttpRequest, team_slug: str, price_id: int) -> HttpResponse:
    team, price = _get_price_for_user(request, team_slug, price_id)
    model = price.model
    price.delete()
    messages.success(request, f"Removed the team's price for {model}; the global price applies again.")
    return redirect("fidelity_prices", team_slug=team.slug)
