"""Pages for alerts, thresholds (budgets) and notification channels.

Function views, every lookup through the user's teams (another team's object is a 404). An htmx
swap gets the named partial of the same template back (dashboard.htmx).
"""

from __future__ import annotations

from datetime import datetime, time
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.alerts import budgets, selectors
from dashboard.alerts.forms import ChannelForm, ThresholdForm
from dashboard.alerts.models import Alert, Threshold
from dashboard.alerts.notify.delivery import send_test
from dashboard.alerts.notify.models import Channel
from dashboard.htmx import HtmxHttpRequest, render_fragment, render_page, wants_fragment
from dashboard.teams.access import Action, get_team_for_user, require
from dashboard.teams.models import Team

PAGE_SIZE = 25


def _get_alert_for_user(
    request: HtmxHttpRequest, team_slug: str, code: UUID, action: Action = Action.VIEW
) -> tuple[Team, Alert]:
    team = get_team_for_user(request, team_slug, action)
    return team, get_object_or_404(selectors.alerts(team), code=code)


def _get_threshold_for_user(
    request: HtmxHttpRequest, team_slug: str, threshold_id: int, action: Action = Action.VIEW
) -> tuple[Team, Threshold]:
    team = get_team_for_user(request, team_slug, action)
    return team, get_object_or_404(selectors.thresholds(team), pk=threshold_id)


def _get_channel_for_user(
    request: HtmxHttpRequest, team_slug: str, code: UUID, action: Action = Action.VIEW
) -> tuple[Team, Channel]:
    team = get_team_for_user(request, team_slug, action)
    return team, get_object_or_404(selectors.channels(team), code=code)


@login_required
def alert_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    state = request.GET.get("state", "open")
    state = state if state in selectors.STATE_FILTERS else "open"
    sort = request.GET.get("sort", "-opened")
    sort = sort if sort in selectors.SORTS else "-opened"
    page = Paginator(selectors.alert_list(team, state, sort), PAGE_SIZE).get_page(request.GET.get("page"))
    ctx = {
        "team": team,
        "page": page,
        "state": state,
        "sort": sort,
        "states": list(selectors.STATE_FILTERS),
        "sorts": [("-opened", "newest"), ("opened", "oldest"), ("level", "level"), ("subject", "subject")],
        "today": timezone.localdate(),
    }
    return render_page(request, "alerts/list.html", ctx, fragment="alert-table")


def _row(request: HtmxHttpRequest, team: Team, alert: Alert, error: str = "") -> HttpResponse:
    """The alert's row after an action: swapped in place by htmx, else back to the list."""
    if wants_fragment(request):
        ctx = {"team": team, "alert": alert, "row_error": error, "today": timezone.localdate()}
        return render_fragment(request, "alerts/list.html#alert-row", ctx)
    if error:
        messages.error(request, error)
    return redirect("alert_list", team_slug=team.slug)


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
        try:
            day = datetime.strptime(until_raw, "%Y-%m-%d").date()
        except ValueError:
            return _row(request, team, alert, "Give the date as YYYY-MM-DD.")
        if day <= timezone.localdate():
            return _row(request, team, alert, "Silence until a date in the future.")
        until = timezone.make_aware(datetime.combine(day, time.min))
    elif not until_release:
        return _row(request, team, alert, "Choose a date or “until the next release”.")
    if not alert.silence(until=until, until_release=until_release):
        return _row(request, team, alert, f"This alert is {alert.state} and cannot be silenced.")
    return _row(request, team, alert)


# --- thresholds ---------------------------------------------------------------------------------


@login_required
def thresholds(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    form = ThresholdForm(team, request.POST or None)
    if request.method == "POST":
        require(request, team, Action.MANAGE_BUDGETS)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        Threshold.objects.create(
            team=team,
            server=d["server"],
            stack=d["stack"],
            measure=d["measure"],
            level=d["level"],
            limit=d["limit"],
            window=d["window"],
        )
        evaluated = budgets.evaluate_team(team)
        messages.success(request, f"Rule added; {evaluated} server(s) re-evaluated.")
        return redirect("thresholds", team_slug=team.slug)
    ctx = {"team": team, "form": form, "rows": selectors.threshold_rows(team)}
    return render(request, "alerts/thresholds.html", ctx)


@login_required
@require_POST
def threshold_update(request: HtmxHttpRequest, team_slug: str, threshold_id: int) -> HttpResponse:
    team, rule = _get_threshold_for_user(request, team_slug, threshold_id, Action.MANAGE_BUDGETS)
    action = request.POST.get("action")
    error = ""
    if action == "delete":
        rule.delete()
        budgets.evaluate_team(team)
        if wants_fragment(request):
            return HttpResponse("")  # htmx swaps the row away
        return redirect("thresholds", team_slug=team.slug)
    if action == "toggle":
        rule.enabled = not rule.enabled
        rule.save(update_fields=["enabled"])
    elif action == "limit":
        try:
            rule.limit = float(request.POST.get("limit", ""))
            if rule.limit < 0:
                raise ValueError
            rule.save(update_fields=["limit"])
        except ValueError:
            error = "The limit must be a number, zero or more."
            rule.refresh_from_db()
    budgets.evaluate_team(team)
    if wants_fragment(request):
        ctx = {"team": team, "rule": rule, "row_error": error}
        return render_fragment(request, "alerts/thresholds.html#rule-row", ctx)
    if error:
        messages.error(request, error)
    return redirect("thresholds", team_slug=team.slug)


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
    ctx = {"team": team, "form": form, "channels": selectors.channels(team)}
    return render(request, "alerts/channels.html", ctx)


@login_required
def channel_detail(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, channel = _get_channel_for_user(request, team_slug, code)
    page = Paginator(selectors.channel_attempts(channel), PAGE_SIZE).get_page(request.GET.get("page"))
    ctx = {"team": team, "channel": channel, "page": page}
    return render_page(request, "alerts/channel_detail.html", ctx, fragment="attempts")


@login_required
@require_POST
def channel_action(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team, channel = _get_channel_for_user(request, team_slug, code, Action.MANAGE_CHANNELS)
    action = request.POST.get("action")
    if action == "test":
        attempt = send_test(channel)
        channel.refresh_from_db()
        if wants_fragment(request):
            ctx = {"team": team, "channel": channel, "attempt": attempt}
            return render_fragment(request, "alerts/channel_detail.html#test-result", ctx)
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
