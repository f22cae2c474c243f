from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling, trigger_client_event

from dashboard.servers import charts
from dashboard.servers import diff as diff_mod
from dashboard.servers import selectors as pages
from dashboard.servers.config_import import ConfigImportError, import_client_config
from dashboard.servers.forms import ImportConfigForm, ServerForm
from dashboard.servers.models import McpServer, Snapshot, Transport
from dashboard.system.models import WorkerHeartbeat
from dashboard.teams.access import default_team_for_user, get_team_for_user
from dashboard.teams.models import ApiToken, Team


@login_required
def home(request: HttpRequest) -> HttpResponse:
    team = default_team_for_user(request)
    if team is None:
        return render(request, "teams/no_team.html")
    return redirect("team_overview", team_slug=team.slug)


@login_required
def team_settings(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = {
        "team": team,
        "is_admin": team.is_admin(request.user),
        "memberships": team.memberships.select_related("user").order_by("user__username"),
        "tokens": team.api_tokens.select_related("created_by"),
    }
    return render(request, "teams/settings.html", ctx)


@login_required
@require_POST
def create_api_token(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    name = request.POST.get("name", "").strip()[:100]
    if not name:
        messages.error(request, "Give the token a name, e.g. the CI job that will use it.")
        return redirect("team_settings", team_slug=team.slug)
    token, plaintext = ApiToken.issue(team, name, created_by=request.user)
    ctx = {"team": team, "token": token, "plaintext": plaintext}
    return render(request, "teams/token_created.html", ctx)


@login_required
@require_POST
def revoke_api_token(request: HttpRequest, team_slug: str, token_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    token = team.api_tokens.filter(pk=token_id).first()
    if token is None:
        return HttpResponse(status=404)
    token.revoke()
    if request.htmx:
        return render(request, "teams/settings.html#token-row", {"team": team, "t": token})
    return redirect("team_settings", team_slug=team.slug)


# --- Schema-tax pages ---------------------------------------------------------------------------


def _get_server_for_user(request: HttpRequest, team_slug: str, code) -> tuple[Team, McpServer]:
    team = get_team_for_user(request, team_slug)
    server = McpServer.objects.select_related("current_snapshot").filter(team=team, code=code).first()
    if server is None:
        raise Http404("No such server")
    server.team = team  # already loaded; saves a query wherever server.team is used
    return team, server


def _context_window(params, team: Team) -> int:
    try:
        window = int(params.get("window") or team.context_window)
    except ValueError:
        window = team.context_window
    return window if 1_000 <= window <= 10_000_000 else team.context_window


def _page(request: HttpRequest, items, param: str, per_page: int):
    return Paginator(items, per_page).get_page(request.GET.get(param))


def _render_region(request: HttpRequest, template: str, ctx: dict, *, stop_polling: bool) -> HttpResponse:
    """A partial; 286 (htmx stops polling) once the region has nothing left to wait for."""
    if stop_polling:
        return HttpResponseStopPolling(render_to_string(template, ctx, request=request))
    return render(request, template, ctx)


def _overview_context(team: Team, params) -> dict:
    window = _context_window(params, team)
    status = params.get("status", "")
    status = status if status in pages.STATUS_FILTERS else ""
    pending = pages.parse_pending(params.get("pending"))
    rows, all_rows, sort = pages.overview_rows(
        team, window=window, sort=params.get("sort"), status=status, pending=pending
    )
    in_flight = any(r.in_flight for r in rows)
    return {
        "team": team,
        "rows": rows,
        # What an agent loading every server pays, whatever the filter shows.
        "total": pages.team_total(all_rows, window),
        "server_count": len(all_rows),
        "sort": sort,
        "status": status,
        "statuses": pages.STATUS_FILTERS,
        "window": window,
        "windows": sorted({*pages.CONTEXT_WINDOWS, team.context_window}),
        "in_flight": in_flight,
        # Carried in the refresh URL so a requested poll the worker has not started still counts.
        "pending": params.get("pending", "") if in_flight else "",
        "query": _overview_query(sort, status, window, team),
        "columns": pages.sort_columns(
            OVERVIEW_COLUMNS,
            sort,
            {"status": status, "window": window if window != team.context_window else None},
        ),
    }


OVERVIEW_COLUMNS = [
    ("name", "Server", False),
    ("tax", "Fixed tax", True),
    ("share", "Share", True),
    ("delta", "Last release", True),
    ("delta_pct", "%", True),
    ("tools", "Tools", True),
    ("budget", "Budget", True),
    ("last_poll", "Last poll", True),
]


@login_required
def team_overview(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = _overview_context(team, request.GET)
    if request.htmx:
        stop = not ctx["in_flight"] and request.GET.get("refresh") == "1"
        return _render_region(request, "servers/overview.html#servers-region", ctx, stop_polling=stop)
    from ingest.fidelity.selectors.agents import overview_panel

    ctx["fidelity"] = overview_panel(team)
    ctx["worker"] = WorkerHeartbeat.status()
    return render(request, "servers/overview.html", ctx)


def _overview_query(sort: str, status: str, window: int, team: Team) -> str:
    params = {"sort": sort}
    if status:
        params["status"] = status
    if window != team.context_window:
        params["window"] = window
    return urlencode(params)


@login_required
def server_detail(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    history = pages.snapshot_history(server)
    by_pk = {p.pk: p for p in history}
    selected_pk = _int(request.GET.get("at"))
    if selected_pk not in by_pk:
        selected_pk = server.current_snapshot_id
    snapshot = None
    if selected_pk is not None:
        snapshot = Snapshot.objects.filter(server=server, pk=selected_pk).first()
    axis = request.GET.get("axis") if request.GET.get("axis") in charts.AXES else "date"
    compare = pages.previous_release_of(history, snapshot.pk) if snapshot else None
    target = request.htmx.target if request.htmx else None

    ctx: dict = {
        "team": team,
        "server": server,
        "snapshot": snapshot,
        "point": by_pk.get(selected_pk),
        "is_current": snapshot is not None and snapshot.pk == server.current_snapshot_id,
        "compare": compare,
        "axis": axis,
        "window": team.context_window,
        "can_manage": _can_manage(request, team, server),
    }
    if target in (None, "chart-region"):
        alerts = pages.server_alerts(server)
        ctx["figure"] = charts.history_figure(
            history,
            alerts,
            axis=axis,
            encoding=snapshot.encoding if snapshot else "cl100k_base",
            release_url=lambda p: _diff_url(team, server, p.previous_id, p.pk),
            snapshot_url=lambda p: reverse("server_detail", args=[team.slug, server.code]) + f"?at={p.pk}",
        )
        ctx["alerts"] = alerts
    if target in (None, "tools-region") and snapshot is not None:
        ctx["tool_columns"] = TOOL_COLUMNS
        ctx["tools"], ctx["removed_tools"], ctx["tool_sort"] = pages.tool_rows(
            snapshot, compare.pk if compare else None, request.GET.get("tsort")
        )
    if target in (None, "snapshots-region"):
        ctx["snapshots_page"] = _page(request, list(reversed(history)), "snaps_page", 20)
        pages.attach_findings_counts(list(ctx["snapshots_page"]))
    if target in (None, "polls-region"):
        ctx["polls_page"] = _page(request, pages.poll_runs(server), "polls_page", 15)
    if target in ("chart-region", "tools-region", "snapshots-region", "polls-region"):
        return render(request, f"servers/server_detail.html#{target}", ctx)
    if snapshot is not None and ctx["is_current"]:
        from ingest.fidelity.selectors.totals import unused_tools

        ctx["unused_tools"] = unused_tools(server, days=30)
        ctx["unused_tokens"] = sum(t["tokens"] for t in ctx["unused_tools"])
    ctx.update(_status_ctx(request, server, None))
    return render(request, "servers/server_detail.html", ctx)


TOOL_COLUMNS = [
    ("position", "#", True),
    ("name", "Tool", False),
    ("tokens", "Tokens", True),
    ("description", "Description", True),
    ("schema", "Schema", True),
    ("share", "Share", True),
    ("delta", "Change", True),
]


def _int(raw) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def _diff_url(team: Team, server: McpServer, a: int | None, b: int) -> str:
    url = reverse("snapshot_diff", args=[team.slug, server.code])
    return f"{url}?a={a}&b={b}" if a else f"{url}?b={b}"


def _can_manage(request: HttpRequest, team: Team, server: McpServer | None = None) -> bool:
    if team.is_admin(request.user):
        return True
    # Members manage the HTTP servers they registered; a stdio server runs a command on the worker.
    return server is not None and server.owner_id == request.user.pk and server.transport != Transport.STDIO


def _status_ctx(request: HttpRequest, server: McpServer, pending) -> dict:
    in_flight = pages.poll_in_flight(server, pending)
    return {
        "can_manage": _can_manage(request, server.team, server),
        "in_flight": in_flight,
        "pending": pages.pending_token(server, pending[1]) if (pending and in_flight) else "",
        "last_run": server.poll_runs.order_by("-started", "-pk").first(),
    }


@login_required
def server_status(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    """The server header's poll status; polled by htmx while a poll runs."""
    team, server = _get_server_for_user(request, team_slug, code)
    pending = pages.parse_pending(request.GET.get("pending"))
    ctx = {
        "team": team,
        "server": server,
        "window": team.context_window,
        **_status_ctx(request, server, pending),
    }
    done = not ctx["in_flight"]
    response = _render_region(request, "servers/server_detail.html#status-region", ctx, stop_polling=done)
    if done and pending:
        # The page's chart, tools and poll history listen for this and refresh themselves.
        trigger_client_event(response, "pollFinished", {"server": str(server.code)})
    return response


@login_required
@require_POST
def poll_now(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    requested = timezone.now()
    if server.is_polling:
        messages.info(request, f"{server.name} is already being polled.")
    else:
        from dashboard.tasks import poll_server_task

        # After commit, so the worker never looks for state this request has not written yet.
        transaction.on_commit(lambda: poll_server_task.delay(server.pk, "manual"))
    pending = pages.pending_token(server, requested)
    if not request.htmx:
        messages.success(request, f"Poll of {server.name} requested.")
        return redirect("server_detail", team_slug=team.slug, code=server.code)
    if request.GET.get("from") == "overview":
        params = request.GET.copy()
        params["pending"] = pending
        ctx = _overview_context(team, params)
        return render(request, "servers/overview.html#servers-region", ctx)
    server.refresh_from_db()
    ctx = {
        "team": team,
        "server": server,
        "window": team.context_window,
        **_status_ctx(request, server, pages.parse_pending(pending)),
    }
    response = render(request, "servers/server_detail.html#status-region", ctx)
    if not ctx["in_flight"]:
        # Already done (an eager or very fast worker): refresh the page's regions now.
        trigger_client_event(response, "pollFinished", {"server": str(server.code)})
    return response


@login_required
def snapshot_diff(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    history = pages.snapshot_history(server)
    by_pk = {p.pk: p for p in history}
    b_pk = _int(request.GET.get("b")) or server.current_snapshot_id
    if request.GET.get("b") and b_pk not in by_pk:
        raise Http404("No such snapshot of this server")
    a_pk = _int(request.GET.get("a"))
    if request.GET.get("a") and a_pk not in by_pk:
        raise Http404("No such snapshot of this server")
    if a_pk is None and b_pk in by_pk:
        a_pk = by_pk[b_pk].previous_id
    wanted = [pk for pk in (a_pk, b_pk) if pk is not None]
    snaps = {
        s.pk: s for s in Snapshot.objects.filter(server=server, pk__in=wanted).select_related("document")
    }
    a, b = snaps.get(a_pk), snaps.get(b_pk)
    ctx = {
        "team": team,
        "server": server,
        "history": list(reversed(history)),
        "a": a,
        "b": b,
        "a_point": by_pk.get(a_pk),
        "b_point": by_pk.get(b_pk),
        "diff": diff_mod.diff_snapshots(a, b) if a and b else None,
        "window": team.context_window,
    }
    return render(request, "servers/diff.html", ctx)


@login_required
def server_add(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    is_admin = team.is_admin(request.user)
    form = ServerForm(request.POST or None, team=team, is_admin=is_admin)
    if request.method == "POST" and form.is_valid():
        server = form.save(commit=False)
        server.owner = request.user
        server.save()
        messages.success(request, f"{server.name} registered. Its first poll runs shortly.")
        return redirect("server_detail", team_slug=team.slug, code=server.code)
    return render(request, "servers/server_form.html", {"team": team, "form": form, "is_admin": is_admin})


@login_required
def server_edit(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    if not _can_manage(request, team, server):
        raise Http404("Only team admins and the server's owner can change it")
    is_admin = team.is_admin(request.user)
    form = ServerForm(request.POST or None, instance=server, team=team, is_admin=is_admin)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"{server.name} saved.")
        return redirect("server_detail", team_slug=team.slug, code=server.code)
    ctx = {"team": team, "form": form, "server": server, "is_admin": is_admin}
    return render(request, "servers/server_form.html", ctx)


@login_required
def server_delete(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team, server = _get_server_for_user(request, team_slug, code)
    if not _can_manage(request, team, server):
        raise Http404("Only team admins and the server's owner can delete it")
    if request.method == "POST":
        name = server.name
        server.delete()
        messages.success(request, f"{name} and its history were deleted.")
        return redirect("team_overview", team_slug=team.slug)
    ctx = {"team": team, "server": server, "snapshot_count": server.snapshots.count()}
    return render(request, "servers/server_confirm_delete.html", ctx)


@login_required
def stacks(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    is_admin = team.is_admin(request.user)
    form = ImportConfigForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            result = import_client_config(
                team,
                form.cleaned_data["parsed"],
                stack_name=form.cleaned_data["stack_name"],
                source=form.cleaned_data["source"],
                user=request.user,
                allow_stdio=is_admin,
            )
        except ConfigImportError as exc:
            form.add_error(None, str(exc))
        else:
            summary = f"Stack {result.stack.name}: {len(result.created)} servers added, {len(result.updated)} updated"
            if result.skipped:
                summary += f"; skipped stdio servers (admins only): {', '.join(result.skipped)}"
            messages.success(request, summary + ".")
            if result.placeholders:
                messages.info(
                    request,
                    "Unresolved placeholders kept as written: "
                    + "; ".join(f"{n}: {', '.join(p)}" for n, p in result.placeholders.items()),
                )
            return redirect("stacks", team_slug=team.slug)
    ctx = {
        "team": team,
        "stacks": pages.stacks_with_totals(team),
        "form": form,
        "is_admin": is_admin,
        "window": team.context_window,
    }
    return render(request, "servers/stacks.html", ctx)
