"""Budgets (what must hold) and alerts (what broke); each snapshot keeps its budget checks.

Modeled on Bencher: a budget per (subject, measure, level) with a limit (a static amount or growth
over the previous release), and alerts with a lifecycle. Fixed-tax budgets are checked on every new
snapshot; fidelity budgets (agent exact-match rate, damaged arrivals, paste cost) on ingest rollups.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models
from django.db.models import Q
from django.utils import timezone

from dashboard.servers.models import McpServer, Snapshot, Stack
from dashboard.teams.models import Team


class Level(models.TextChoices):
    WARNING = "warning", "Warning"
    ERROR = "error", "Error"


class Measure(models.TextChoices):
    # Fixed tax, per server.
    FIXED_TAX_TOKENS = "fixed_tax_tokens", "Fixed tax (tokens)"
    RELEASE_GROWTH_PCT = "release_growth_pct", "Growth per release (%)"
    RELEASE_GROWTH_TOKENS = "release_growth_tokens", "Growth per release (tokens)"
    MAX_TOOL_TOKENS = "max_tool_tokens", "Largest single tool (tokens)"
    INSTRUCTIONS_TOKENS = "instructions_tokens", "Instructions (tokens)"
    # Fixed tax, per stack (the servers one agent loads).
    STACK_FIXED_TAX_TOKENS = "stack_fixed_tax_tokens", "Stack fixed tax (tokens)"
    # What each request carries up front in the mode the stack's client uses (mcptax.loading).
    STACK_UPFRONT_TOKENS = "stack_upfront_tokens", "Stack upfront per request, in its client's mode (tokens)"
    # Not a budget: a release that moved a stack across Claude Code's deferral threshold.
    DEFERRAL_CROSSING = "deferral_crossing", "Crossed Claude Code's deferral threshold"
    # Fidelity.
    AGENT_EXACT_RATE = "agent_exact_rate", "Agent exact-match rate (minimum %)"
    DAMAGED_ARRIVALS = "damaged_arrivals", "Damaged arrivals for a tool (truncated or dropped elements)"
    PASTE_COST_PER_DAY = "paste_cost_per_day", "Paste cost per day (USD)"
    # Tool discovery: a release after which a tool's load-to-call rate fell (points), from settings.
    LOAD_TO_CALL_DROP = "load_to_call_drop", "Load-to-call rate drop after a release (points)"


# The unit each measure is counted in; every other measure counts tokens.
MEASURE_UNITS: dict[str, str] = {
    Measure.RELEASE_GROWTH_PCT: "%",
    Measure.LOAD_TO_CALL_DROP: "points",
    Measure.AGENT_EXACT_RATE: "%",
    Measure.PASTE_COST_PER_DAY: "USD",
    Measure.DAMAGED_ARRIVALS: "arrivals",
}
WINDOWED_MEASURES = {Measure.AGENT_EXACT_RATE, Measure.DAMAGED_ARRIVALS}


def format_measure(value: float, measure: str) -> str:
    """A value with its unit: "842 tokens", "12.5%", "$3.20", "2 arrivals"."""
    unit = MEASURE_UNITS.get(measure, "tokens")
    if unit == "%":
        return f"{value:,.1f}%"
    if unit == "USD":
        return f"${value:,.2f}"
    if unit == "arrivals":
        return f"{value:,.0f} arrival{'' if value == 1 else 's'}"
    if unit == "points":
        return f"{value:,.1f} points"
    return f"{value:,.0f} tokens"


# Measures where a value BELOW the limit breaches.
MINIMUM_MEASURES = {Measure.AGENT_EXACT_RATE}
SERVER_MEASURES = {
    Measure.FIXED_TAX_TOKENS,
    Measure.RELEASE_GROWTH_PCT,
    Measure.RELEASE_GROWTH_TOKENS,
    Measure.MAX_TOOL_TOKENS,
    Measure.INSTRUCTIONS_TOKENS,
}
STACK_MEASURES = {Measure.STACK_FIXED_TAX_TOKENS, Measure.STACK_UPFRONT_TOKENS}
FIDELITY_MEASURES = {Measure.AGENT_EXACT_RATE, Measure.DAMAGED_ARRIVALS, Measure.PASTE_COST_PER_DAY}


class Budget(models.Model):
    """A limit on one measure at one level. With `server` and `stack` empty it is the team default
    for every server."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="budgets")
    server = models.ForeignKey(McpServer, models.CASCADE, null=True, blank=True, related_name="budgets")
    stack = models.ForeignKey(Stack, models.CASCADE, null=True, blank=True, related_name="budgets")
    measure = models.CharField(max_length=40, choices=Measure.choices)
    level = models.CharField(max_length=10, choices=Level.choices, default=Level.WARNING)
    limit = models.FloatField()
    window = models.PositiveIntegerField(default=50, help_text="For rates: the last N bulk calls.")
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField(
        default=False,
        help_text="One of the budgets every new team starts with (it can be edited like any other).",
    )
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        # No unique constraint: SQLite cannot treat NULL scopes as equal; the form prevents duplicates.
        ordering = ["measure", "level"]

    def __str__(self) -> str:
        scope = self.server or self.stack or "team default"
        return f"{self.get_measure_display()} {self.level} {self.limit:g} ({scope})"

    @property
    def is_minimum(self) -> bool:
        return self.measure in MINIMUM_MEASURES

    @property
    def limit_display(self) -> str:
        return format_measure(self.limit, self.measure)

    @property
    def unit(self) -> str:
        return MEASURE_UNITS.get(self.measure, "tokens")

    @property
    def window_display(self) -> str:
        """What a windowed budget looks at, e.g. "over the last 50 bulk calls"."""
        if self.measure not in WINDOWED_MEASURES:
            return ""
        return f"over the last {self.window} bulk call{'' if self.window == 1 else 's'}"

    def breached_by(self, value: float) -> bool:
        return value < self.limit if self.is_minimum else value > self.limit


class AlertState(models.TextChoices):
    ACTIVE = "active", "Active"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    SILENCED = "silenced", "Silenced"
    RESOLVED = "resolved", "Resolved"


OPEN_STATES = (AlertState.ACTIVE, AlertState.ACKNOWLEDGED, AlertState.SILENCED)


class AlertQuerySet(models.QuerySet["Alert"]):
    def open(self) -> AlertQuerySet:
        return self.filter(state__in=OPEN_STATES)


def about_tool(server: McpServer, tool: str) -> Q:
    """The alerts whose subject is `tool` of `server` (see `Alert.tool_name`)."""
    return Q(server=server) & (
        Q(rule_key=f"tool:{server.name}/{tool}:{Measure.DAMAGED_ARRIVALS.value}")
        | Q(measure=Measure.MAX_TOOL_TOKENS, subject_label=f"{server.name} / {tool}")
    )


class Alert(models.Model):
    """One breach of one rule on one subject; at most one open per `rule_key`."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="alerts")
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    budget = models.ForeignKey(Budget, models.SET_NULL, null=True, blank=True, related_name="alerts")
    # e.g. "server:12:fixed_tax_tokens", "agent:3:agent_exact_rate", "tool:files-sprawl/write_file:damaged"
    rule_key = models.CharField(max_length=300)
    measure = models.CharField(max_length=40, choices=Measure.choices)
    level = models.CharField(max_length=10, choices=Level.choices)
    server = models.ForeignKey(McpServer, models.CASCADE, null=True, blank=True, related_name="alerts")
    stack = models.ForeignKey(Stack, models.CASCADE, null=True, blank=True, related_name="alerts")
    subject_label = models.CharField(
        max_length=300, help_text="What breached, for people: a server, agent, tool"
    )
    snapshot = models.ForeignKey(
        Snapshot, models.SET_NULL, null=True, blank=True, related_name="alerts_opened"
    )
    resolved_snapshot = models.ForeignKey(Snapshot, models.SET_NULL, null=True, blank=True, related_name="+")
    value = models.FloatField()
    limit = models.FloatField()
    message = models.TextField()
    state = models.CharField(
        max_length=15, choices=AlertState.choices, default=AlertState.ACTIVE, db_index=True
    )
    opened_at = models.DateTimeField(default=timezone.now)
    last_evaluated_at = models.DateTimeField(default=timezone.now)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledge_note = models.TextField(blank=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    silenced_until_release = models.BooleanField(default=False)
    silenced_at_version = models.CharField(max_length=100, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # The value that resolved it (None: resolved by hand, or its budget was removed or disabled).
    resolved_value = models.FloatField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # scheme://host of the web request that opened it, if one did: its links' base without SITE_URL.
    origin = models.CharField(max_length=300, blank=True)

    objects = AlertQuerySet.as_manager()

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "rule_key"],
                condition=Q(state__in=["active", "acknowledged", "silenced"]),
                name="one_open_alert_per_rule",
            )
        ]
        indexes = [models.Index(fields=["team", "state"], name="alert_team_state")]

    def __str__(self) -> str:
        return f"[{self.level}] {self.subject_label}: {self.message}"

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def value_display(self) -> str:
        return format_measure(self.value, self.measure)

    @property
    def limit_display(self) -> str:
        return format_measure(self.limit, self.measure)

    @property
    def subject_kind(self) -> str:
        """server | stack | agent | tool | team: which page explains the subject."""
        if self.stack_id is not None:
            return "stack"
        kind = self.rule_key.split(":", 1)[0]
        if kind in ("agent", "tool"):
            return kind
        return "server" if self.server_id is not None else "team"

    @property
    def tool_name(self) -> str:
        """The tool of its server this alert is about, or "": a damaged-arrivals rule names it in
        its key, the largest-tool rule in its subject ("<server> / <tool>")."""
        server = self.server if self.server_id is not None else None
        if server is None:
            return ""
        if self.rule_key.startswith("tool:"):
            body, prefix = self.rule_key[len("tool:") :].rsplit(":", 1)[0], server.name + "/"
        elif self.measure == Measure.MAX_TOOL_TOKENS:
            body, prefix = self.subject_label, server.name + " / "
        else:
            return ""
        return body[len(prefix) :] if body.startswith(prefix) and len(body) > len(prefix) else ""

    @property
    def subject_path(self) -> str:
        """The page that explains the subject: the tool's, the server's, the stack's, the agent's,
        or (for a team-wide rule) the agents list."""
        from django.urls import reverse

        slug = self.team.slug
        if self.tool_name and self.server is not None:
            return reverse("fidelity_tool", args=[slug, self.server.code, self.tool_name])
        kind = self.subject_kind
        if kind == "stack":
            return reverse("stacks", args=[slug]) + f"#stack-{self.stack_id}"
        if kind in ("server", "tool") and self.server is not None:
            return reverse("server_detail", args=[slug, self.server.code])
        if kind == "agent" and self.agent_family:
            return reverse("fidelity_agent", args=[slug, self.agent_family])
        return reverse("fidelity_agents", args=[slug])

    @property
    def agent_family(self) -> str:
        # Agent alerts name the agent "<family> <version>" (ingest.fidelity.alerts).
        return self.subject_label.split(" ", 1)[0] if self.subject_kind == "agent" else ""

    @property
    def resolved_value_display(self) -> str:
        return "" if self.resolved_value is None else format_measure(self.resolved_value, self.measure)

    @property
    def summary(self) -> str:
        """What happened, in the present while open and in the past once resolved."""
        if self.state != AlertState.RESOLVED:
            return self.message
        label = Measure(self.measure).label if self.measure in Measure.values else self.measure
        text = (
            f"{self.subject_label}: {label} was {self.value_display}, over the {self.level} limit of "
            f"{self.limit_display}"
        )
        if self.resolved_by_id is not None:
            who = self.resolved_by.username if self.resolved_by else "someone"
            return f"{text}; resolved by hand by {who}."
        if self.resolved_value is not None:
            where = f" in {self.resolved_snapshot.label}" if self.resolved_snapshot else ""
            return f"{text}; resolved: back to {self.resolved_value_display}{where}."
        return f"{text}; resolved: its budget was removed or disabled."

    def acknowledge(self, user: User | AnonymousUser, note: str = "") -> bool:
        """Someone has seen it: no more reminders, but it stays open until the value is back under."""
        if self.state not in (AlertState.ACTIVE, AlertState.SILENCED):
            return False
        self.state = AlertState.ACKNOWLEDGED
        self.acknowledged_by = user if isinstance(user, User) else None
        self.acknowledged_at = timezone.now()
        self.acknowledge_note = note[:2000]
        self.save(update_fields=["state", "acknowledged_by", "acknowledged_at", "acknowledge_note"])
        return True

    def silence(self, *, until: datetime | None = None, until_release: bool = False) -> bool:
        """Mute notifications until a date, or until the server ships a new release."""
        if not self.is_open or (until is None and not until_release):
            return False
        self.state = AlertState.SILENCED
        self.silenced_until = until
        self.silenced_until_release = until_release
        current = self.server.current_snapshot if self.server is not None else None
        self.silenced_at_version = (current.server_version if current else "")[:100]
        self.save(update_fields=["state", "silenced_until", "silenced_until_release", "silenced_at_version"])
        return True

    def silence_expired(self, snapshot: Snapshot | None = None, now: datetime | None = None) -> bool:
        """A silenced alert wakes up when its date passes or a new release arrives."""
        if self.state != AlertState.SILENCED:
            return False
        now = now or timezone.now()
        if self.silenced_until is not None and self.silenced_until <= now:
            return True
        return bool(
            self.silenced_until_release
            and snapshot is not None
            and snapshot.is_release
            and snapshot.server_version != self.silenced_at_version
        )
