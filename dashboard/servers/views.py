"""The fixed-tax pages: the team overview, a server's page, its diff, registering servers (stacks: stack_views)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.servers import charts, loading, regressions, selectors
from dashboard.servers import diff as diff_mod
from dashboard.servers.forms import ServerForm
from dashboard.servers.methodology import profile_table
from dashboard.servers.models import McpServer
from dashboard.servers.pending import first_poll_pending, parse_pending, pending_token, poll_in_flight
from dashboard.servers.polling import POLL_TASK
from dashboard.servers.selectors import HistoryPoint
from dashboard.servers.sorting import sort_columns
from dashboard.system import broker
from dashboard.system.models import WorkerHeartbeat
from dashboard.teams.access import Action, allowed, get_team_for_user, require
from dashboard.teams.models import Team
from mcptax.loading import Mode, StackLoading
from mcptax.tokens import OFFLINE_ENCODINGS as offline_encodings


def _get_server_for_user(
    request: HtmxHttpRequest, team_slug: str, code: UUID, *, edit: bool = False
) -> tuple[Team, McpServer]:
    """The team's server `code`; with `edit`, only if the user's role may edit this server."""
    team = get_team_for_user(request, team_slug)
    server = get_object_or_404(McpServer.objects.select_related("current_snapshot"), team=team, code=code)
    server.team = team  # already loaded; saves a query wherever server.team is used
    if edit:
        require(request, team, server.edit_action(request.user))
    return team, server


def _context_window(params: QueryDict, team: Team) -> int:
    try:
        window = int(params.get("window") or team.context_window)
    except ValueError:
        window = team.context_window
    return window if 1_000 <= window <= 10_000_000 else team.context_window


def _page(request: HtmxHttpRequest, items: Any, param: str, per_page: int) -> Page[Any]:
    return Paginator(items, per_page).get_page(request.GET.get(param))


def _overview_context(team: Team, params: QueryDict) -> dict[str, Any]:
    window = _context_window(params, team)
    status = params.get("status", "")
    status = status if status in selectors.STATUS_FILTERS else ""
    pending = parse_pending(params.get("pending"))
    encodings = team.tracked_encodings()
    encoding = params.get("encoding") or encodings[0]
    encoding = encoding if encoding in encodings else encodings[0]
    rows, all_rows, sort, team_loading = selectors.overview_rows(
        team,
        window=window,
        sort=params.get("sort"),
        status=status,
        pending=pending,
        encoding=None if encoding == team.main_encoding else encoding,
        loading_encoding=encoding,
    )
    in_flight = any(r.in_flight for r in rows)
    return {
        "team": team,
        "rows": rows,
        # What an agent loading every server pays, whatever the filter shows.
        "total": selectors.team_total(all_rows, window),
        "team_loading": team_loading,
        # Under a deferring client the headline is what each request carries up front.
        "deferred": team_loading is not None and team_loading.mode == Mode.DEFERRED,
        "upfront_share": selectors.share(team_loading.upfront if team_loading else None, window),
        "client": loading.PRESETS[loading.client_of(team)],
        "server_count": len(all_rows),
        "sort": sort,
        "status": status,
        "statuses": selectors.STATUS_FILTERS,
        "window": window,
        "windows": sorted({*selectors.CONTEXT_WINDOWS, team.context_window}),
        "in_flight": in_flight,
        "encoding": encoding,
        "encodings": encodings,
        # Carried in the refresh URL so a requested poll the worker has not started still counts.
        "pending": params.get("pending", "") if in_flight else "",
        "query": _overview_query(sort, status, window, team, encoding),
        "columns": sort_columns(
            overview_columns(team, team_loading),
            sort,
            {
                "status": status,
                "window": window if window != team.context_window else None,
                "encoding": encoding if encoding != team.main_encoding else None,
            },
        ),
    }


OVERVIEW_COLUMNS = [
    ("name", "Server", False, ""),
    ("tax", "Fixed tax", True, ""),
    ("share", "Share", True, ""),
    ("upfront", "Up front", True, ""),
    ("delta", "Last release", True, ""),
    ("delta_pct", "%", True, ""),
    ("tools", "Tools", True, ""),
    ("budget", "Budget", True, ""),
    ("last_poll", "Last poll", True, ""),
]


def overview_columns(team: Team, figures: StackLoading | None) -> list[tuple[str, str, bool, str]]:
    """The overview's columns; the upfront one names the team's client and the mode it uses."""
    preset = loading.PRESETS[loading.client_of(team)]
    if figures is None:
        label, title = "Up front", f"Tokens each request carries up front under {preset.label}, once polled."
    else:
        setting = f" (ENABLE_TOOL_SEARCH={figures.setting})" if figures.setting else ""
        carried = (
            "its tool names, its share of the search tool and its instructions; each schema is paid "
            "from its load onwards"
            if figures.mode == Mode.DEFERRED
            else "every schema and its instructions"
        )
        label = f"Up front, {figures.mode}"
        title = (
            f"Tokens each request carries up front for this server under {preset.label}{setting}, "
            f"{figures.mode}: {carried}. The column adds up to the team's figure."
        )
    return [(k, label, n, title) if k == "upfront" else (k, name, n, t) for k, name, n, t in OVERVIEW_COLUMNS]


@login_required
def team_overview(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = _overview_context(team, request.GET)
    if request.htmx.target is None:  # the whole page (a region swap names its target)
        ctx["worker"] = WorkerHeartbeat.status()
        ctx["biggest"] = regressions.biggest_this_week(team)
    # The refresh poll stops once nothing is in flight; a filter or sort change never polls.
    stop = not ctx["in_flight"] and request.GET.get("refresh") == "1"
    return render_page(request, "servers/overview.html", ctx, partial="servers-region", stop_polling=stop)


def _overview_query(sort: str, status: str, window: int, team: Team, encoding: str = "") -> str:
    params: dict[str, str | int] = {"sort": sort}
    if status:
        params["status"] = status
    if window != team.context_window:
        params["window"] = window
    if encoding and encoding != team.main_encoding:
        params["encoding"] = encoding
    return urlencode(params)


SERVER_REGIONS = ("chart-region", "tools-region", "snapshots-region", "polls-region")


@login_required
def server_detail(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    target = request.htmx.target if request.htmx.target in SERVER_REGIONS else None
    ctx = _detail_context(request, team, server, target)
    if target is None:
        ctx.update(_status_ctx(request, server, None, request.GET))
    return render_page(request, "servers/server_detail.html", ctx, partial=target)


def _detail_context(
    request: HtmxHttpRequest, team: Team, server: McpServer, target: str | None
) -> dict[str, Any]:
    """What the server page shows (only `target`'s region when htmx swaps one), from the page's
    own query parameters: the status answer reads them too, so a landed poll re-renders the body as
    the reader left it (selected snapshot, axis, sort, pages)."""
    history = selectors.snapshot_history(server)
    by_pk: dict[int | None, HistoryPoint] = {p.pk: p for p in history}
    selected_pk = _int(request.GET.get("at"))
    if selected_pk not in by_pk:
        selected_pk = server.current_snapshot_id
    snapshot = selectors.snapshot_of(server, selected_pk) if selected_pk is not None else None
    axis = request.GET.get("axis") or "date"
    axis = axis if axis in charts.AXES else "date"
    compare = selectors.previous_release_of(history, snapshot.pk) if snapshot else None
    encodings = snapshot.encodings if snapshot else [team.main_encoding]
    encoding = request.GET.get("encoding") or encodings[0]
    encoding = encoding if encoding in encodings else encodings[0]
    ctx: dict[str, Any] = {
        "team": team,
        "server": server,
        "snapshot": snapshot,
        "encoding": encoding,
        "encodings": encodings,
        "point": by_pk.get(selected_pk),
        "is_current": snapshot is not None and snapshot.pk == server.current_snapshot_id,
        "compare": compare,
        "axis": axis,
        "window": team.context_window,
        "can_manage": _may_edit(request, server),
        "page_path": reverse("server_detail", args=[team.slug, server.code]),
    }
    if target in (None, "chart-region"):
        _chart_context(ctx, history, team, server)
    if target is None and snapshot is not None:
        ctx["shown_tax"] = snapshot.figure(encoding)
        ctx["shown_instructions"] = snapshot.figure(encoding, key="instructions_tokens")
        ctx["profile_rows"] = profile_table(snapshot.counts or {})
        ctx["provider_count"] = snapshot.provider_counts.first()
        ctx["loading_rows"] = loading.for_server(server, snapshot, team, encoding)
        ctx["advice"] = loading.server_advice(server, snapshot, team, encoding)
    if target in (None, "tools-region") and snapshot is not None:
        ctx["tool_columns"] = TOOL_COLUMNS
        ctx["tools"], ctx["removed_tools"], ctx["tool_sort"] = selectors.tool_rows(
            snapshot, compare.pk if compare else None, request.GET.get("tsort")
        )
    if target in (None, "snapshots-region"):
        ctx["snapshots_page"] = _page(request, list(reversed(history)), "snaps_page", 20)
        selectors.attach_findings_counts(list(ctx["snapshots_page"]))
    if target in (None, "polls-region"):
        ctx["polls_page"] = _page(request, selectors.poll_runs(server), "polls_page", 15)
    return ctx


def _chart_context(ctx: dict[str, Any], history: list[HistoryPoint], team: Team, server: McpServer) -> None:
    snapshot = ctx["snapshot"]
    alerts = selectors.server_alerts(server)
    # Reversed once, not once per point (a reverse() per snapshot cost ~20 ms at 500 snapshots).
    page = reverse("server_detail", args=[team.slug, server.code])
    ctx["figure"] = charts.history_figure(
        history,
        alerts,
        axis=ctx["axis"],
        encoding=snapshot.encoding if snapshot else "cl100k_base",
        release_url=lambda p: _diff_url(team, server, p.previous_id, p.pk),
        snapshot_url=lambda p: f"{page}?at={p.pk}",
    )
    ctx["alerts"] = alerts


TOOL_COLUMNS = [
    ("position", "#", True),
    ("name", "Tool", False),
    ("tokens", "Tokens", True),
    ("description", "Description", True),
    ("schema", "Schema", True),
    ("share", "Share", True),
    ("delta", "Change", True),
]


def _int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def _diff_url(team: Team, server: McpServer, a: int | None, b: int) -> str:
    url = reverse("snapshot_diff", args=[team.slug, server.code])
    return f"{url}?a={a}&b={b}" if a else f"{url}?b={b}"


def _may_edit(request: HtmxHttpRequest, server: McpServer) -> bool:
    return allowed(request, server.team, server.edit_action(request.user))


# The server page's own parameters, carried in its status URL (see _detail_context).
PAGE_PARAMS = ("at", "axis", "tsort", "encoding", "snaps_page", "polls_page")


def _status_ctx(
    request: HtmxHttpRequest, server: McpServer, pending: tuple[int, datetime] | None, params: QueryDict
) -> dict[str, Any]:
    """The header's poll state. A poll counts as in flight while it runs, while a requested one
    ("poll now") waits for a worker, and while a new server's first poll is due: the page polls
    this status until the poll lands, then swaps in every region it changed."""
    first = first_poll_pending(server)
    # Waiting for the schedule's first poll, not for a "poll now": said so in the status URL.
    waits_for_first = first is not None and (pending is None or params.get("first") == "1")
    pending = pending or first
    in_flight = poll_in_flight(server, pending) or first is not None
    query = {key: params[key] for key in PAGE_PARAMS if params.get(key)}
    if pending and in_flight:
        query["pending"] = pending_token(server, pending[1])
        if waits_for_first:
            query["first"] = "1"
    if in_flight:
        # The snapshot the header and the body show now: a status answer that finds another one
        # current swaps the body in with the header, even while the poll has work left.
        query["shown"] = _shown(server)
    return {
        "can_manage": _may_edit(request, server),
        "can_poll": allowed(request, server.team, server.poll_action),
        "in_flight": in_flight,
        # Due, not yet taken by a worker, and nobody asked: the schedule's first poll.
        "first_poll_due": waits_for_first and not server.is_polling,
        "status_query": urlencode(query),
        "last_run": selectors.last_poll_run(server),
    }


def _shown(server: McpServer) -> str:
    """The snapshot the page shows, as the status URL carries it ("0": none yet)."""
    return str(server.current_snapshot_id or 0)


def _poll_landed(
    request: HtmxHttpRequest, team: Team, server: McpServer, status: dict[str, Any], *, done: bool
) -> HttpResponse:
    """The header and, out of band, the whole page body: one poll changes the snapshot card, the
    chart, the findings, the tools, the history; none may keep showing the old snapshot. Sent when
    the poll is done, and as soon as its new snapshot is current (the header shows it)."""
    ctx = {**_detail_context(request, team, server, None), **status}
    response = render_page(
        request, "servers/server_detail.html#status-region", ctx, oob=("server-body",), stop_polling=done
    )
    if done:
        # The alert banner (its own endpoint) listens for this.
        trigger_client_event(response, "pollFinished", {"server": str(server.code)})
    return response


@login_required
def server_status(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    """The server header's poll status; polled by htmx while a poll runs."""
    team, server = _get_server_for_user(request, team_slug, code)
    pending = parse_pending(request.GET.get("pending"))
    ctx = {
        "team": team,
        "server": server,
        "window": team.context_window,
        **_status_ctx(request, server, pending, request.GET),
    }
    done = not ctx["in_flight"]
    shown = request.GET.get("shown")
    moved = shown is not None and shown != _shown(server)
    if (done and pending) or moved:
        return _poll_landed(request, team, server, ctx, done=done)
    return render_page(request, "servers/server_detail.html#status-region", ctx, stop_polling=done)


@login_required
@require_POST
def poll_now(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    require(request, team, server.poll_action)
    requested = timezone.now()
    sent = True
    if server.is_polling:
        messages.info(request, f"{server.name} is already being polled.")
    else:
        if server.lock_is_stale():
            messages.warning(
                request,
                f"The poll of {server.name} that started {server.polling_since:%Y-%m-%d %H:%M} UTC never "
                "finished (its worker stopped); polling again.",
            )
        # After commit, so the worker never looks for state this request has not written yet.
        sent = (
            broker.send_task(POLL_TASK, server.pk, "manual", where=f"poll now of server {server.pk}").ok
            is not False
        )
    if not sent:
        messages.error(
            request,
            f"The task queue (broker) is unavailable, so the poll of {server.name} was not sent. Try "
            "again in a minute; scheduled polls resume when it answers again.",
        )
    pending = pending_token(server, requested) if sent else ""
    if not request.htmx:
        if sent:
            messages.success(request, f"Poll of {server.name} requested.")
        return redirect("server_detail", team_slug=team.slug, code=server.code)
    if request.GET.get("from") == "overview":
        params = request.GET.copy()
        params["pending"] = pending
        return render_page(request, "servers/overview.html#servers-region", _overview_context(team, params))
    server.refresh_from_db()
    ctx = {
        "team": team,
        "server": server,
        "window": team.context_window,
        **_status_ctx(request, server, parse_pending(pending), request.GET),
    }
    if not ctx["in_flight"] and sent:
        return _poll_landed(request, team, server, ctx, done=True)  # an eager or very fast worker
    return render_page(request, "servers/server_detail.html#status-region", ctx)


@login_required
def snapshot_diff(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    history = selectors.snapshot_history(server)
    by_pk: dict[int | None, HistoryPoint] = {p.pk: p for p in history}
    b_pk = _int(request.GET.get("b")) or server.current_snapshot_id
    if request.GET.get("b") and b_pk not in by_pk:
        raise Http404("No such snapshot of this server")
    a_pk = _int(request.GET.get("a"))
    if request.GET.get("a") and a_pk not in by_pk:
        raise Http404("No such snapshot of this server")
    if a_pk is None and b_pk in by_pk:
        a_pk = by_pk[b_pk].previous_id
    snaps = selectors.snapshots_with_documents(server, [pk for pk in (a_pk, b_pk) if pk is not None])
    a = snaps.get(a_pk) if a_pk is not None else None
    b = snaps.get(b_pk) if b_pk is not None else None
    newest_first = list(reversed(history))
    ctx = {
        "team": team,
        "server": server,
        "history": newest_first,
        "a_options": diff_mod.snapshot_options(newest_first, a.pk if a else None),
        "b_options": diff_mod.snapshot_options(newest_first, b.pk if b else None),
        "a": a,
        "b": b,
        "a_point": by_pk.get(a_pk),
        "b_point": by_pk.get(b_pk),
        "diff": diff_mod.diff_snapshots(a, b) if a and b else None,
        "window": team.context_window,
    }
    return render(request, "servers/diff.html", ctx)


@login_required
def server_add(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.REGISTER_HTTP_SERVER)
    allow_stdio = allowed(request, team, Action.REGISTER_STDIO_SERVER)
    form = ServerForm(request.POST or None, team=team, allow_stdio=allow_stdio)
    if request.method == "POST" and form.is_valid():
        server = form.save(commit=False)
        server.owner = request.user if isinstance(request.user, User) else None  # login_required
        server.save()
        messages.success(request, f"{server.name} registered; its first poll is due now.")
        return redirect("server_detail", team_slug=team.slug, code=server.code)
    ctx = {"team": team, "form": form, "allow_stdio": allow_stdio}
    return render(request, "servers/server_form.html", ctx)


@login_required
def server_edit(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code, edit=True)
    allow_stdio = allowed(request, team, Action.REGISTER_STDIO_SERVER)
    form = ServerForm(request.POST or None, instance=server, team=team, allow_stdio=allow_stdio)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"{server.name} saved.")
        return redirect("server_detail", team_slug=team.slug, code=server.code)
    ctx = {"team": team, "form": form, "server": server, "allow_stdio": allow_stdio}
    return render(request, "servers/server_form.html", ctx)


@login_required
def server_delete(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code, edit=True)
    if request.method == "POST":
        name = server.name
        server.delete()
        messages.success(request, f"{name} and its history were deleted.")
        return redirect("team_overview", team_slug=team.slug)
    ctx = {"team": team, "server": server, "snapshot_count": server.snapshots.count()}
    return render(request, "servers/server_confirm_delete.html", ctx)


@login_required
def methodology(request: HtmxHttpRequest) -> HttpResponse:
    """How every figure is counted, with a worked example on a real server (dashboard.servers.methodology)."""
    from dashboard.servers.methodology import measured_findings, worked_example

    ctx = {
        "example": worked_example(),
        "encodings": offline_encodings,
        "findings": measured_findings(request.user),
    }
    return render(request, "servers/methodology.html", ctx)
