"""Pages for alerts, budgets and notification channels.

Function views, every lookup through the user's teams (another team's object is a 404). An htmx
swap gets the named partial of the same template back (dashboard.htmx).
"""

from __future__ import annotations

from datetime import datetime, time
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from dashboard.alerts import budgets, selectors
from dashboard.alerts.forms import BudgetForm, ChannelForm
from dashboard.alerts.models import Alert, AlertState, Budget
from dashboard.alerts.notify.delivery import send_test
from dashboard.alerts.notify.models import Channel
from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.teams.access import Action, get_team_for_user, require
from dashboard.teams.models import Team

PAGE_SIZE = 25


def _get_alert_for_user(
    request: HtmxHttpRequest, team_slug: str, code: UUID, action: Action = Action.VIEW
) -> tuple[Team, Alert]:
    team = get_team_for_user(request, team_slug, action)
    return team, get_object_or_404(selectors.alerts(team), code=code)


def _get_budget_for_user(
    request: HtmxHttpRequest, team_slug: str, budget_id: int, action: Action = Action.VIEW
) -> tuple[Team, Budget]:
    team = get_team_for_user(request, team_slug, action)
    return team, get_object_or_404(selectors.budgets(team), pk=budget_id)


def _get_channel_for_user(
    request: HtmxHttpRequest, team_slug: str, code: UUID, action: Action = Action.VIEW
) -> tuple[Team, Channel]:
    team = get_team_for_user(request, team_slug, action)
    return team, get_object_or_404(selectors.channels(team), code=code)


def _list_context(team: Team, params: QueryDict, list_url: str) -> dict[str, Any]:
    """The alert list under `params` (state, sort, page); `list_url` is where a bulk action returns."""
    state = params.get("state", "open")
    state = state if state in selectors.STATE_FILTERS else "open"
    sort = params.get("sort", "-opened")
    sort = sort if sort in selectors.SORTS else "-opened"
    page = Paginator(selectors.alert_list(team, state, sort), PAGE_SIZE).get_page(params.get("page"))
    return {
        "team": team,
        "page": page,
        "state": state,
        "sort": sort,
        "states": list(selectors.STATE_FILTERS),
        "sorts": [("-opened", "newest"), ("opened", "oldest"), ("level", "level"), ("subject", "subject")],
        "today": timezone.localdate(),
        "list_url": list_url,
    }


@login_required
def alert_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = _list_context(team, request.GET, request.get_full_path())
    return render_page(request, "alerts/list.html", ctx, partial="alert-table")


def _changed(request: HtmxHttpRequest, team: Team, response: HttpResponse) -> HttpResponse:
    """Tell the page that alerts changed: the navigation count rides along out of band, and the
    banners listening for `alertsChanged` fetch themselves again."""
    count = render_to_string(
        "alerts/_nav_count.html", {"nav_team": team, "nav_active_alerts": _active_count(team), "oob": True}
    )
    response.content += count.encode()
    return trigger_client_event(response, "alertsChanged", {})


def _active_count(team: Team) -> int:
    return selectors.alerts(team).filter(state=AlertState.ACTIVE).count()


def _row(request: HtmxHttpRequest, team: Team, alert: Alert, error: str = "") -> HttpResponse:
    """The alert's row after an action: swapped in place by htmx, else back to the list."""
    if request.htmx:
        ctx = {"team": team, "alert": alert, "row_error": error, "today": timezone.localdate()}
        return _changed(request, team, render_page(request, "alerts/list.html#alert-row", ctx))
    if error:
        messages.error(request, error)
    return redirect(_back(request, team))


def _back(request: HtmxHttpRequest, team: Team) -> str:
    """Where a plain form post returns to: the page it came from on this site, else the list."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return reverse("alert_list", args=[team.slug])


def _silence_until(raw: str) -> tuple[datetime | None, str]:
    """(the silence's end, or an error for the person)."""
    try:
        day = datetime.strptime(raw, "%Y-%m-%d").date()
    except ValueError:
        return None, "Give the date as YYYY-MM-DD."
    if day <= timezone.localdate():
        return None, "Silence until a date in the future."
    return timezone.make_aware(datetime.combine(day, time.min)), ""


def _resolve_by_hand(request: HtmxHttpRequest, team: Team, alert: Alert) -> bool:
    if not alert.is_open:
        return False
    user = request.user if isinstance(request.user, User) else None
    done = budgets.resolve_alert(team, alert.rule_key, by=user)
    if done is not None:
        alert.refresh_from_db()
    return done is not None


@login_required
@require_POST
def alert_resolve(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, alert = _get_alert_for_user(request, team_slug, code, Action.HANDLE_ALERTS)
    if not _resolve_by_hand(request, team, alert):
        return _row(request, team, alert, "This alert is already resolved.")
    return _row(request, team, alert)


BULK_ACTIONS = {"acknowledge": "acknowledged", "silence": "silenced", "resolve": "resolved"}


@login_required
@require_POST
def alert_bulk(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """Acknowledge, silence (until a date or the next release) or resolve the checked alerts.

    An htmx post gets the alert list back (as the page it came from showed it, with what was done
    said above it) and the navigation count out of band; a plain post is redirected back there."""
    team = get_team_for_user(request, team_slug, Action.HANDLE_ALERTS)
    done, error = _bulk_apply(request, team)
    back = _back(request, team)
    if request.htmx:
        ctx = _list_context(team, QueryDict(urlsplit(back).query), back)
        ctx.update(bulk_note=error or done, bulk_failed=bool(error))
        response = render_page(request, "alerts/list.html#alert-table", ctx)
        return _changed(request, team, response) if not error else response
    if error:
        messages.error(request, error)
    else:
        messages.success(request, done)
    return redirect(back)


def _bulk_apply(request: HtmxHttpRequest, team: Team) -> tuple[str, str]:
    """(what was done, or an error for the person) for a bulk post."""
    action = request.POST.get("action", "")
    codes = request.POST.getlist("alert")
    if action not in BULK_ACTIONS or not codes:
        return "", "Tick one or more alerts, then choose what to do with them."
    until, error = (None, "")
    until_raw = request.POST.get("until", "").strip()
    if action == "silence" and until_raw:
        until, error = _silence_until(until_raw)
    if error:
        return "", error
    done = 0
    for alert in selectors.alerts(team).filter(code__in=_uuids(codes)):
        if action == "acknowledge":
            done += alert.acknowledge(request.user)
        elif action == "silence":
            done += alert.silence(until=until, until_release=until is None)
        else:
            done += _resolve_by_hand(request, team, alert)
    skipped = len(codes) - done
    note = f"; {skipped} left as they were (not in a state that allows it)" if skipped else ""
    return f"{done} alert{'s' if done != 1 else ''} {BULK_ACTIONS[action]}{note}.", ""


def _uuids(raw: list[str]) -> list[UUID]:
    out = []
    for value in raw:
        try:
            out.append(UUID(value))
        except ValueError:
            continue
    return out


@login_required
def alert_banner(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """The open alerts of a page's subject (the team, a server, an agent family), refreshed by htmx."""
    team = get_team_for_user(request, team_slug)
    scope = selectors.banner_scope(team, request.GET)
    ctx = {"team": team, "banner": selectors.banner(team, scope), "scope": scope}
    ctx.update({"nav_team": team, "nav_active_alerts": _active_count(team), "oob": True})
    return render_page(request, "alerts/_banner.html", ctx)


@login_required
def alert_nav_count(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """The navigation's active-alert count, polled so it never goes stale."""
    team = get_team_for_user(request, team_slug)
    ctx = {"nav_team": team, "nav_active_alerts": _active_count(team)}
    return render_page(request, "alerts/_nav_count.html", ctx)


@login_required
@require_POST
def alert_acknowledge(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, alert = _get_alert_for_user(request, team_slug, code, Action.HANDLE_ALERTS)
    if not alert.acknowledge(request.user, request.POST.get("note", "").strip()):
        return _row(
            request,
            team,
            alert,
            f"This alert is {alert.state}; only active or silenced alerts can be acknowledged.",
        )
    return _row(request, team, alert)


@login_required
@require_POST
def alert_silence(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, alert = _get_alert_for_user(request, team_slug, code, Action.HANDLE_ALERTS)
    until_raw = request.POST.get("until", "").strip()
    until_release = request.POST.get("until_release") == "1"
    until = None
    if until_raw:
        until, error = _silence_until(until_raw)
        if error:
            return _row(request, team, alert, error)
    elif not until_release:
        return _row(request, team, alert, "Choose a date or “until the next release”.")
    if not alert.silence(until=until, until_release=until_release):
        return _row(request, team, alert, f"This alert is {alert.state} and cannot be silenced.")
    return _row(request, team, alert)


# --- budgets ------------------------------------------------------------------------------------


@login_required
def budget_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    form = BudgetForm(team, request.POST or None)
    if request.method == "POST":
        require(request, team, Action.MANAGE_BUDGETS)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        Budget.objects.create(
            team=team,
            server=d["server"],
            stack=d["stack"],
            measure=d["measure"],
            level=d["level"],
            limit=d["limit"],
            window=d["window"],
        )
        evaluated = budgets.evaluate_team(team)
        messages.success(request, f"Budget added; {evaluated} server(s) re-evaluated.")
        return redirect("budgets", team_slug=team.slug)
    rows = list(selectors.budget_rows(team))
    # The footer explains the "default" badge only where the team still has such budgets.
    ctx = {"team": team, "form": form, "rows": rows, "has_defaults": any(r.is_default for r in rows)}
    return render(request, "alerts/budgets.html", ctx)


@login_required
@require_POST
def budget_update(request: HtmxHttpRequest, team_slug: str, budget_id: int) -> HttpResponse:
    team, budget = _get_budget_for_user(request, team_slug, budget_id, Action.MANAGE_BUDGETS)
    action = request.POST.get("action")
    error = ""
    if action == "delete":
        budget.delete()
        budgets.evaluate_team(team)
        if request.htmx:
            return HttpResponse("")  # htmx swaps the row away
        return redirect("budgets", team_slug=team.slug)
    if action == "toggle":
        budget.enabled = not budget.enabled
        budget.save(update_fields=["enabled"])
    elif action == "limit":
        try:
            budget.limit = float(request.POST.get("limit", ""))
            if budget.limit < 0:
                raise ValueError
            budget.save(update_fields=["limit"])
        except ValueError:
            error = "The limit must be a number, zero or more."
            budget.refresh_from_db()
    budgets.evaluate_team(team)
    if request.htmx:
        ctx = {"team": team, "budget": budget, "row_error": error}
        return render_page(request, "alerts/budgets.html#budget-row", ctx)
    if error:
        messages.error(request, error)
    return redirect("budgets", team_slug=team.slug)


# --- channels -----------------------------------------------------------------------------------


@login_required
def channels(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    form = ChannelForm(request.POST or None)
    if request.method == "POST":
        require(request, team, Action.MANAGE_CHANNELS)
        if form.is_valid():
            d = form.cleaned_data
            channel = Channel.objects.create(
                team=team,
                name=d["name"],
                kind=d["kind"],
                config=d["config"],
                min_level=d["min_level"],
                notify_on_resolve=d["notify_on_resolve"],
            )
            messages.success(request, f"Channel {channel.name} added. Send a test to check it.")
            return redirect("channel_detail", team_slug=team.slug, code=channel.code)
    ctx = {
        "team": team,
        "form": form,
        "channels": selectors.channels(team),
        # A local receiver is the obvious first test: say next to the form what lets it through.
        "outbound_allowed": list(settings.OUTBOUND_ALLOW_NETWORKS),
    }
    return render(request, "alerts/channels.html", ctx)


@login_required
def channel_detail(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, channel = _get_channel_for_user(request, team_slug, code)
    page = Paginator(selectors.channel_attempts(channel), PAGE_SIZE).get_page(request.GET.get("page"))
    ctx = {"team": team, "channel": channel, "page": page}
    return render_page(request, "alerts/channel_detail.html", ctx, partial="attempts")


@login_required
@require_POST
def channel_action(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, channel = _get_channel_for_user(request, team_slug, code, Action.MANAGE_CHANNELS)
    action = request.POST.get("action")
    if action == "test":
        attempt = send_test(channel)
        channel.refresh_from_db()
        if request.htmx:
            ctx = {"team": team, "channel": channel, "attempt": attempt}
            return render_page(request, "alerts/channel_detail.html#test-result", ctx)
        if attempt.status == "sent":
            messages.success(request, "Test sent.")
        else:
            messages.error(request, f"Test failed: {attempt.error}")
    elif action == "enable":
        channel.enable()
        messages.success(request, "Channel enabled again.")
    elif action == "disable":
        channel.disable(f"Disabled by {request.user.username} on {timezone.now():%Y-%m-%d %H:%M} UTC.")
    elif action == "delete":
        channel.delete()
        messages.success(request, f"Channel {channel.name} deleted.")
        return redirect("channels", team_slug=team.slug)
    return redirect("channel_detail", team_slug=team.slug, code=channel.code)
