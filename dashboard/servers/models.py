"""Registered MCP servers, their tools/list snapshots over time, and every poll attempt."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models
from django.db.models import Q
from django.utils import timezone

from dashboard.crypto import EncryptedJSONField
from dashboard.teams.models import Team
from dashboard.teams.permissions import Action, server_edit_action
from dashboard.teams.validators import NameField
from mcptax.tokens import canonical


class Transport(models.TextChoices):
    STDIO = "stdio", "stdio (command)"
    HTTP = "http", "Streamable HTTP"
    SSE = "sse", "Legacy SSE"


class PollOutcome(models.TextChoices):
    OK = "ok", "OK"
    TIMEOUT = "timeout", "Timed out"
    REFUSED_TOO_LARGE = "refused_too_large", "Refused: tools/list too large"
    PROTOCOL_ERROR = "protocol_error", "Protocol error"
    CONNECT_ERROR = "connect_error", "Connection failed"
    CRASHED = "crashed", "Crashed"
    # A failure on our side (the database, a bug) while storing the result: never the server's fault.
    INTERNAL_ERROR = "internal_error", "Failed in the dashboard"


TRANSIENT_OUTCOMES = {
    PollOutcome.TIMEOUT,
    PollOutcome.CONNECT_ERROR,
    PollOutcome.CRASHED,
    PollOutcome.INTERNAL_ERROR,
}


def poll_lock_stale_after() -> timedelta:
    """A poll lock older than this was left by a worker that died: the longest a live poll can hold
    it (the total timeout) twice over, plus LEASE_GRACE_SECONDS for the bookkeeping around it."""
    return timedelta(seconds=settings.POLL_TOTAL_TIMEOUT * 2 + settings.LEASE_GRACE_SECONDS)


class McpServerQuerySet(models.QuerySet["McpServer"]):
    def for_user(self, user: User | AnonymousUser) -> McpServerQuerySet:
        return self.filter(team__in=Team.objects.for_user(user))

    def due(self, now: datetime | None = None) -> McpServerQuerySet:
        now = now or timezone.now()
        return self.filter(enabled=True, next_poll_at__lte=now)

    def lock_free(self, now: datetime | None = None) -> McpServerQuerySet:
        """Servers nobody is polling: no lock, or a lock whose worker stopped answering (stale).

        The one staleness rule, shared by the claim, the dispatcher and the pages.
        """
        now = now or timezone.now()
        return self.filter(Q(polling_since__isnull=True) | Q(polling_since__lt=now - poll_lock_stale_after()))


class McpServer(models.Model):
    team = models.ForeignKey(Team, models.CASCADE, related_name="servers")
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = NameField(max_length=100, help_text="Also the label the logging proxy uses for it.")
    transport = models.CharField(max_length=10, choices=Transport.choices)
    command = models.CharField(max_length=500, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = EncryptedJSONField(
        blank=True, default=dict, help_text="Environment for a stdio server (encrypted)."
    )
    cwd = models.CharField("working directory", max_length=500, blank=True)
    url = models.URLField(max_length=500, blank=True)
    headers = EncryptedJSONField(blank=True, default=dict, help_text="HTTP headers, e.g. auth (encrypted).")
    poll_interval_seconds = models.PositiveIntegerField(default=900)
    enabled = models.BooleanField(default=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    # Scheduling state, written only through conditional updates (see dashboard.servers.polling).
    next_poll_at = models.DateTimeField(default=timezone.now, db_index=True)
    polling_since = models.DateTimeField(null=True, blank=True)
    # Who holds the lock: the poll task's id, so the same task redelivered after its worker died
    # (acks_late) resumes its own lease instead of skipping the server until the lock goes stale.
    poll_lease = models.CharField(max_length=100, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_poll_at = models.DateTimeField(null=True, blank=True)
    last_outcome = models.CharField(max_length=20, choices=PollOutcome.choices, blank=True)
    last_error = models.TextField(blank=True)
    current_snapshot = models.ForeignKey(
        "dashboard.Snapshot", models.SET_NULL, null=True, blank=True, related_name="+"
    )

    objects = McpServerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_server_name_per_team")]

    def __str__(self) -> str:
        return self.name

    RUNTIME_FIELDS = frozenset(
        {
            "next_poll_at",
            "polling_since",
            "poll_lease",
            "consecutive_failures",
            "last_poll_at",
            "last_outcome",
            "last_error",
            "current_snapshot",
        }
    )

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A form or command holding an old copy must not undo what a worker wrote meanwhile:
        # the scheduling state is written only by dashboard.servers.polling's conditional updates.
        if self.pk and not self._state.adding and kwargs.get("update_fields") is None:
            kwargs["update_fields"] = [
                f.name
                for f in self._meta.concrete_fields
                if not f.primary_key and f.name not in self.RUNTIME_FIELDS
            ]
        super().save(*args, **kwargs)

    @property
    def endpoint(self) -> str:
        if self.transport == Transport.STDIO:
            return " ".join([self.command, *self.args])
        return self.url

    @property
    def is_polling(self) -> bool:
        """A live poll holds the lock (a stale lock is a dead worker's, not a poll)."""
        return self.polling_since is not None and not self.lock_is_stale()

    def edit_action(self, user: User | AnonymousUser) -> Action:
        """What editing or deleting this server takes from `user` (the role matrix decides who)."""
        owned = self.owner_id is not None and self.owner_id == user.pk
        return server_edit_action(owned=owned, stdio=self.transport == Transport.STDIO)

    @property
    def poll_action(self) -> Action:
        # Polling a stdio server runs its command on the worker.
        return Action.POLL_STDIO_SERVER if self.transport == Transport.STDIO else Action.POLL_HTTP_SERVER

    def backoff_seconds(self) -> int:
        """Delay before retrying after a transient failure: 30 s doubling, capped at the interval."""
        return int(min(self.poll_interval_seconds, 30 * 2 ** min(self.consecutive_failures, 10)))

    def lock_is_stale(self, now: datetime | None = None) -> bool:
        now = now or timezone.now()
        return self.polling_since is not None and now - self.polling_since > poll_lock_stale_after()


class Stack(models.Model):
    """The set of servers one agent loads: its members' summed fixed tax is paid on every request."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="stacks")
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = NameField(max_length=100)
    servers = models.ManyToManyField(McpServer, related_name="stacks", blank=True)
    source = models.CharField(max_length=200, blank=True, help_text="The client config file it came from.")
    unresolved_placeholders = models.JSONField(default=list, blank=True)
    # How Claude Code loads this stack's tools (mcptax.loading), as its config file says: the value
    # of ENABLE_TOOL_SEARCH in the file's `env` (blank: the team's setting) and the servers marked
    # `alwaysLoad`, whose schemas stay in every request.
    tool_search = models.CharField(
        "ENABLE_TOOL_SEARCH", max_length=20, blank=True, help_text="Blank: the team's setting."
    )
    always_load = models.ManyToManyField(McpServer, related_name="+", blank=True)
    # Who imported it first: a re-import by anyone else replaces its servers only with admin rights.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_stack_name_per_team")]

    def __str__(self) -> str:
        return self.name

    def replace_action(self, user: User | AnonymousUser) -> Action:
        """What re-importing over this stack takes from `user`."""
        owned = self.owner_id is not None and self.owner_id == user.pk
        return Action.IMPORT_STACK if owned else Action.REPLACE_ANY_STACK


class ToolsDocument(models.Model):
    """The raw tools JSON exactly as a server sent it, stored once per distinct sha256.

    Kept as text, not a JSON column: PostgreSQL's jsonb reorders object keys, and the key order
    is part of what the server sent (and of the snapshot's identity).
    """

    sha256 = models.CharField(max_length=64, unique=True)
    raw_json = models.TextField(help_text="canonical(tools) exactly as received")
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.sha256[:12]

    @property
    def raw(self) -> list[dict[str, Any]]:
        cached: list[dict[str, Any]] | None = getattr(self, "_raw_cache", None)
        if cached is None:
            cached = self._raw_cache = json.loads(self.raw_json)
        return cached

    @classmethod
    def store(cls, sha256: str, tools: list[dict[str, Any]]) -> ToolsDocument:
        document, _ = cls.objects.get_or_create(sha256=sha256, defaults={"raw_json": canonical(tools)})
        return document


class Snapshot(models.Model):
    """A period during which a server listed the same tools (and version).

    An unchanged poll only moves `last_seen`; a change starts a new row.
    """

    server = models.ForeignKey(McpServer, models.CASCADE, related_name="snapshots")
    previous = models.ForeignKey("self", models.SET_NULL, null=True, blank=True, related_name="+")
    document = models.ForeignKey(ToolsDocument, models.PROTECT, related_name="snapshots")
    sha256 = models.CharField(max_length=64, db_index=True)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    server_name = models.CharField(max_length=200, blank=True)
    server_title = models.CharField(max_length=200, blank=True)
    server_version = models.CharField(max_length=100, blank=True)
    protocol_version = models.CharField(max_length=40, blank=True)
    is_release = models.BooleanField(
        default=False, help_text="serverInfo.version changed from the previous snapshot"
    )
    tool_count = models.PositiveIntegerField(default=0)
    bytes = models.PositiveIntegerField(
        default=0, help_text="UTF-8 bytes of the model-visible tools, compact JSON"
    )
    raw_bytes = models.PositiveIntegerField(default=0, help_text="UTF-8 bytes of the raw tools as received")
    encoding = models.CharField(max_length=40, default="cl100k_base")
    fixed_tax_tokens = models.PositiveIntegerField(default=0)
    # fixed_tax_tokens minus the previous snapshot's, set when the snapshot is recorded (null: the
    # server's first): the regressions page finds the changes through it without a self-join.
    tax_delta = models.IntegerField(null=True, blank=True)
    overhead_tokens = models.IntegerField(default=0)
    instructions_tokens = models.PositiveIntegerField(default=0)
    instructions = models.TextField(blank=True)
    tokens_by_encoding = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"o200k_base": {"fixed_tax_tokens": N, "instructions_tokens": M}}',
    )
    # Every profile (client rendering) in every tracked encoding:
    # {profile: {encoding: {"fixed_tax_tokens": N, "instructions_tokens": M, "bytes": B}}}.
    counts = models.JSONField(default=dict, blank=True)
    # Every protocol revision the server answered in at its last poll, when it speaks more than one:
    # {revision: {"sha256", "tool_count", "fixed_tax_tokens", "encoding", "asked": bool}}; the
    # snapshot's own figures are those of the revision marked "asked" (the team's choice).
    eras = models.JSONField(default=dict, blank=True)
    prompts_count = models.IntegerField(null=True, blank=True)
    resources_count = models.IntegerField(null=True, blank=True)
    findings = models.JSONField(default=list, blank=True)
    analysis_errors = models.JSONField(
        default=list,
        blank=True,
        help_text="[{stage, error}]: analyses (findings, budgets, alerts) that failed after the counts were stored",
    )
    # Filled by budget evaluation: {measure: {"limit": x, "level": "warning", "value": v, "breached": b}}.
    budget_checks = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-first_seen", "-pk"]
        indexes = [
            models.Index(fields=["server", "-first_seen"], name="snapshot_server_recent"),
            # The regressions page: the changes that moved a tax, newest first.
            models.Index(
                fields=["-first_seen", "-id"],
                condition=Q(tax_delta__lt=0) | Q(tax_delta__gt=0),
                name="snapshot_tax_changes",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.server} {self.server_version or self.sha256[:8]} ({self.fixed_tax_tokens} tokens)"

    def era_rows(self) -> list[dict[str, Any]]:
        """The protocol revisions the server answered in, the one asked first, each with its fixed
        tax and difference from it; empty when it answered in one revision or alike in each."""
        eras = self.eras or {}
        if len({e.get("sha256") for e in eras.values()}) < 2:
            return []
        rows = sorted(({"revision": r, **figure} for r, figure in eras.items()), key=lambda r: not r["asked"])
        for row in rows:
            row["difference"] = row["fixed_tax_tokens"] - rows[0]["fixed_tax_tokens"]
        return rows

    @property
    def label(self) -> str:
        return self.server_version or self.sha256[:8]

    @property
    def tools_raw(self) -> list[dict[str, Any]]:
        return self.document.raw

    @property
    def encodings(self) -> list[str]:
        """The encodings this snapshot was counted in, its main one first."""
        names = list((self.counts or {}).get("mcp", {})) or list(self.tokens_by_encoding or {})
        return [self.encoding, *[n for n in names if n != self.encoding]]

    def figure(
        self, encoding: str | None = None, profile: str = "mcp", key: str = "fixed_tax_tokens"
    ) -> int | None:
        """One stored figure; None when this snapshot was not counted that way."""
        if (encoding is None or encoding == self.encoding) and profile == "mcp":
            return int(getattr(self, key))
        encoding = encoding or self.encoding
        found = (self.counts or {}).get(profile, {}).get(encoding)
        if found is None and profile == "mcp":
            found = (self.tokens_by_encoding or {}).get(encoding)
        return None if found is None or key not in found else int(found[key])


class SnapshotTool(models.Model):
    snapshot = models.ForeignKey(Snapshot, models.CASCADE, related_name="tools")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    tokens = models.PositiveIntegerField()
    description_tokens = models.PositiveIntegerField()
    schema_tokens = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64, help_text="sha256 of the model-visible tool, to spot changes")
    # The same three figures in every tracked encoding: {encoding: {"tokens", "description_tokens", "schema_tokens"}}.
    counts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["snapshot", "position"]
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "position"], name="unique_tool_position"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.tokens})"


class PollRun(models.Model):
    server = models.ForeignKey(McpServer, models.CASCADE, related_name="poll_runs")
    started = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=20, choices=PollOutcome.choices)
    message = models.TextField(blank=True)
    snapshot = models.ForeignKey(Snapshot, models.SET_NULL, null=True, blank=True, related_name="poll_runs")
    changed = models.BooleanField(default=False, help_text="This poll started a new snapshot")
    trigger = models.CharField(max_length=20, default="schedule")  # schedule | manual | command

    class Meta:
        ordering = ["-started", "-pk"]
        indexes = [models.Index(fields=["server", "-started"], name="pollrun_server_recent")]

    def __str__(self) -> str:
        return f"{self.server} {self.started:%Y-%m-%d %H:%M} {self.outcome}"


class ProviderCount(models.Model):
    """A provider's own count of a snapshot's tools (its token-counting endpoint), beside ours.

    Asked once per new snapshot, when the team stored a key. `ours` is our `claude` profile figure
    in the snapshot's main encoding; the provider's figure also holds the one-word message the
    request needs and the provider's own tool-use preamble (docs/methodology.md).
    """

    snapshot = models.ForeignKey(Snapshot, models.CASCADE, related_name="provider_counts")
    provider = models.CharField(max_length=20, default="anthropic")
    model = models.CharField(max_length=100)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    ours = models.PositiveIntegerField(default=0)
    ours_encoding = models.CharField(max_length=40, default="cl100k_base")
    error = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"{self.provider} {self.model}: {self.input_tokens if self.error == '' else 'failed'}"

    @property
    def difference(self) -> int | None:
        return None if self.input_tokens is None else self.input_tokens - self.ours
