"""Forms of the alert pages: budgets and notification channels."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from dashboard import outbound
from dashboard.alerts import budgets
from dashboard.alerts.models import (
    FIDELITY_MEASURES,
    SERVER_MEASURES,
    STACK_MEASURES,
    WINDOWED_MEASURES,
    Budget,
    Level,
    Measure,
)
from dashboard.alerts.notify.apprise_sender import validate_url
from dashboard.alerts.notify.models import ChannelKind
from dashboard.teams.models import Team
from dashboard.teams.validators import validate_name

SCOPE_MEASURES = [
    Measure.STACK_FIXED_TAX_TOKENS,
    Measure.STACK_UPFRONT_TOKENS,
    *budgets.SERVER_MEASURE_ORDER,
    Measure.AGENT_EXACT_RATE,
    Measure.DAMAGED_ARRIVALS,
    Measure.PASTE_COST_PER_DAY,
]
# Fidelity budgets a server may carry (its own wins for its tools); the others are team-wide only.
SERVER_FIDELITY_MEASURES = {Measure.DAMAGED_ARRIVALS}


class BudgetForm(forms.Form):
    scope = forms.ChoiceField(help_text="Team default applies to every server (or stack) without its own.")
    measure = forms.ChoiceField(
        choices=[
            ("Fixed tax", [(m.value, m.label) for m in SCOPE_MEASURES if m not in FIDELITY_MEASURES]),
            ("Fidelity", [(m.value, m.label) for m in SCOPE_MEASURES if m in FIDELITY_MEASURES]),
        ]
    )
    level = forms.ChoiceField(choices=Level.choices)
    limit = forms.FloatField(min_value=0, help_text="tokens; % for growth and exact rate; USD for paste cost")
    window = forms.IntegerField(
        min_value=1,
        max_value=10_000,
        required=False,
        initial=50,
        label="Window (bulk calls)",
        help_text="exact rate and damaged arrivals: judged over this many latest bulk calls",
    )

    def __init__(self, team: Team, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team
        self.servers = {f"server:{s.pk}": s for s in team.servers.order_by("name")}
        self.stacks = {f"stack:{s.pk}": s for s in team.stacks.order_by("name")}
        cast(forms.ChoiceField, self.fields["scope"]).choices = [
            ("team", "Team default"),
            *[(k, f"Server {s.name}") for k, s in self.servers.items()],
            *[(k, f"Stack {s.name}") for k, s in self.stacks.items()],
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        scope, measure = data.get("scope"), data.get("measure")
        if not scope or not measure:
            return data
        server = self.servers.get(scope)
        stack = self.stacks.get(scope)
        if stack and measure not in STACK_MEASURES:
            raise ValidationError("A stack takes only the stack budgets (fixed tax, upfront per request).")
        if server and measure not in SERVER_MEASURES | SERVER_FIDELITY_MEASURES:
            raise ValidationError(
                "A server takes server measures or damaged arrivals; exact rate and paste cost are "
                "team-wide, and a stack budget goes on a stack."
            )
        if measure == Measure.AGENT_EXACT_RATE and (data.get("limit") or 0) > 100:
            self.add_error("limit", "An exact-match rate is a percentage: 0 to 100.")
        if measure in WINDOWED_MEASURES:
            data["window"] = data.get("window") or 50
        else:
            data["window"] = 50  # unused by this measure; the model's default
        exists = Budget.objects.filter(
            team=self.team, server=server, stack=stack, measure=measure, level=data.get("level")
        ).exists()
        if exists:
            raise ValidationError("That budget already exists for this scope and level; edit or delete it.")
        data["server"], data["stack"] = server, stack
        return data


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=100, validators=[validate_name])
    kind = forms.ChoiceField(choices=ChannelKind.choices)
    target = forms.CharField(
        max_length=1000,
        help_text="Email: addresses separated by commas. Slack / webhook: the URL. Apprise: any Apprise URL.",
    )
    min_level = forms.ChoiceField(choices=Level.choices, initial=Level.WARNING)
    notify_on_resolve = forms.BooleanField(required=False, initial=True)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
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
            problem = outbound.url_problem(target)
            if problem:
                raise ValidationError(problem)
            data["config"] = {"url": target}
        else:
            problem = validate_url(target)
            if problem:
                raise ValidationError(problem)
            data["config"] = {"url": target}
        return data
