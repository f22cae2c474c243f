"""Pages for alerts, thresholds (budgets) and notification channels.

Function views, every lookup through the user's teams (another team's object is a 404). HTMX
requests get the named partial of the same template back.
"""

from __future__ import annotations

from datetime import datetime, time

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.core.validators import validate_email
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.alerts import budgets
from dashboard.alerts.models import OPEN_STATES, SERVER_MEASURES, Alert, AlertState, Level, Measure, Threshold
from dashboard.alerts.notify.apprise_transport import validate_url
from dashboard.alerts.notify.delivery import send_test
from dashboard.alerts.notify.models import Channel, ChannelKind
from dashboard.teams.access import get_team_for_user
from dashboard.teams.models import Team

PAGE_SIZE = 25
STATE_FILTERS = {
    "open": list(OPEN_STATES),
    "active": [AlertState.ACTIVE],
    "acknowledged": [AlertState.ACKNOWLEDGED],
    "silenced": [AlertState.SILENCED],
    "resolved": [AlertState.RESOLVED],
    "all": None,
}
SORTS = {
    "opened": ("opened_at", "pk"),
    "-opened": ("-opened_at", "-pk"),
    "level": ("level", "-opened_at", "-pk"),  # "error" sorts before "warning"
    "subject": ("subject_label", "-opened_at"),
    "value": ("-value", "-pk"),
}


def _alert_for_user(request: HttpRequest, team: Team, code) -> Alert:
    alert = (
        Alert.objects.filter(team=team, code=code)
        .select_related("server", "stack", "acknowledged_by")
        .first()
    )
    if alert is None:
        raise Http404("No such alert")
    return alert


@login_required
def alert_list(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    state = request.GET.get("state", "open")
    state = state if state in STATE_FILTERS else "open"
    sort = request.GET.get("sort", "-opened")
    sort = sort if sort in SORTS else "-opened"
    alerts = Alert.objects.filter(team=team).select_related("server", "stack", "acknowledged_by")
    if STATE_FILTERS[state] is not None:
        alerts = alerts.filter(state__in=STATE_FILTERS[state])
    page = Paginator(alerts.order_by(*SORTS[sort]), PAGE_SIZE).get_page(request.GET.get("page"))
    ctx = {
        "team": team,
        "page": page,
        "state": state,
        "sort": sort,
        "states": list(STATE_FILTERS),
        "sorts": [("-opened", "newest"), ("opened", "oldest"), ("level", "level"), ("subject", "subject")],
        "today": timezone.localdate(),
    }
    if request.htmx and not request.htmx.boosted:
        return render(request, "alerts/list.html#alert-table", ctx)
    return render(request, "alerts/list.html", ctx)


def _row(request: HttpRequest, team: Team, alert: Alert, error: str = "") -> HttpResponse:
    ctx = {"team": team, "alert": alert, "row_error": error, "today": timezone.localdate()}
    if request.htmx:
        return render(request, "alerts/list.html#alert-row", ctx)
    if error:
        messages.error(request, error)
    return redirect("alert_list", team_slug=team.slug)


@login_required
@require_POST
def alert_acknowledge(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    alert = _alert_for_user(request, team, code)
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
def alert_silence(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    alert = _alert_for_user(request, team, code)
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

SCOPE_MEASURES = [Measure.STACK_FIXED_TAX_TOKENS, *budgets.SERVER_MEASURE_ORDER]


class ThresholdForm(forms.Form):
    scope = forms.ChoiceField(help_text="Team default applies to every server (or stack) without its own.")
    measure = forms.ChoiceField(choices=[(m.value, m.label) for m in SCOPE_MEASURES])
    level = forms.ChoiceField(choices=Level.choices)
    limit = forms.FloatField(min_value=0)

    def __init__(self, team: Team, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.team = team
        self.servers = {f"server:{s.pk}": s for s in team.servers.order_by("name")}
        self.stacks = {f"stack:{s.pk}": s for s in team.stacks.order_by("name")}
        self.fields["scope"].choices = [
            ("team", "Team default"),
            *[(k, f"Server {s.name}") for k, s in self.servers.items()],
            *[(k, f"Stack {s.name}") for k, s in self.stacks.items()],
        ]

    def clean(self) -> dict:
        data = super().clean()
        scope, measure = data.get("scope"), data.get("measure")
        if not scope or not measure:
            return data
        server = self.servers.get(scope)
        stack = self.stacks.get(scope)
        if stack and measure != Measure.STACK_FIXED_TAX_TOKENS:
            raise ValidationError("A stack takes only the stack fixed-tax budget.")
        if server and measure not in SERVER_MEASURES:
            raise ValidationError("A server takes server measures; put a stack budget on a stack.")
        exists = Threshold.objects.filter(
            team=self.team, server=server, stack=stack, measure=measure, level=data.get("level")
        ).exists()
        if exists:
            raise ValidationError("That rule already exists for this scope and level; edit or delete it.")
        data["server"], data["stack"] = server, stack
        return data


@login_required
def thresholds(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    form = ThresholdForm(team, request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        Threshold.objects.create(
            team=team,
            server=d["server"],
            stack=d["stack"],
            measure=d["measure"],
            level=d["level"],
            limit=d["limit"],
        )
        evaluated = budgets.evaluate_team(team)
        messages.success(request, f"Rule added; {evaluated} server(s) re-evaluated.")
        return redirect("thresholds", team_slug=team.slug)
    rows = team.thresholds.select_related("server", "stack").order_by(
        "server__name", "stack__name", "measure", "level"
    )
    ctx = {"team": team, "form": form, "rows": rows}
    return render(request, "alerts/thresholds.html", ctx)


@login_required
@require_POST
def threshold_update(request: HttpRequest, team_slug: str, threshold_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    rule = team.thresholds.select_related("server", "stack").filter(pk=threshold_id).first()
    if rule is None:
        raise Http404("No such rule")
    action = request.POST.get("action")
    error = ""
    if action == "delete":
        rule.delete()
        budgets.evaluate_team(team)
        if request.htmx:
            return HttpResponse("")
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
    if request.htmx:
        return render(
            request, "alerts/thresholds.html#rule-row", {"team": team, "rule": rule, "row_error": error}
        )
    if error:
        messages.error(request, error)
    return redirect("thresholds", team_slug=team.slug)


# --- channels -----------------------------------------------------------------------------------


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=ChannelKind.choices)
    target = forms.CharField(
        max_length=1000,
        help_text="Email: addresses separated by commas. Slack / webhook: the URL. Apprise: any Apprise URL.",
    )
    min_level = forms.ChoiceField(choices=Level.choices, initial=Level.WARNING)
    notify_on_resolve = forms.BooleanField(required=False, initial=True)

    def clean(self) -> dict:
        data = super().clean()
        kind, target = data.get("kind"), (data.get("target") or "").strip()
        if not kind or not target:
            return data
        if kind == ChannelKind.EMAIL:
            addresses = [a.strip() for a in target.split(",") if a.strip()]
            for address in addresses:
                try:
                    validate_email(address)
                except ValidationError:
                    raise ValidationError(f"Not an email address: {address}") from None
            data["config"] = {"to": addresses}
        elif kind in (ChannelKind.SLACK, ChannelKind.WEBHOOK):
            if not target.startswith(("https://", "http://")):
                raise ValidationError("The URL must start with https:// (or http:// on a private network).")
            data["config"] = {"url": target}
        else:
            problem = validate_url(target)
            if problem:
                raise ValidationError(problem)
            data["config"] = {"url": target}
        return data


def _channel_for_user(team: Team, code) -> Channel:
    channel = Channel.objects.filter(team=team, code=code).first()
    if channel is None:
        raise Http404("No such channel")
    return channel


@login_required
def channels(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    is_admin = team.is_admin(request.user)
    form = ChannelForm(request.POST or None)
    if request.method == "POST":
        if not is_admin:
            raise Http404("Team admins only")
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
    ctx = {"team": team, "form": form, "is_admin": is_admin, "channels": team.channels.all()}
    return render(request, "alerts/channels.html", ctx)


@login_required
def channel_detail(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    channel = _channel_for_user(team, code)
    attempts = channel.notifications.select_related("delivery__event").order_by("-created", "-pk")
    page = Paginator(attempts, PAGE_SIZE).get_page(request.GET.get("page"))
    ctx = {"team": team, "channel": channel, "page": page, "is_admin": team.is_admin(request.user)}
    if request.htmx and request.GET.get("page"):
        return render(request, "alerts/channel_detail.html#attempts", ctx)
    return render(request, "alerts/channel_detail.html", ctx)


@login_required
@require_POST
def channel_action(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    channel = _channel_for_user(team, code)
    action = request.POST.get("action")
    if action == "test":
        attempt = send_test(channel)
        channel.refresh_from_db()
        if request.htmx:
            return render(
                request,
                "alerts/channel_detail.html#test-result",
                {"team": team, "channel": channel, "attempt": attempt},
            )
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
