"""Captured MCP traffic: agents, sessions, tool calls and their bulk arguments, and ingest jobs.

Everything belongs to a team. Bulk content is stored content-addressed (team, sha256) once, so a
value pasted a thousand times costs one row, and a later exact copy can serve as the expected
content of earlier damaged ones.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Count, Q
from django.utils import timezone

from dashboard.teams.models import Team
from dashboard.teams.validators import NameField
from ingest.capture.models import Agent, BulkArgument, IngestJob, ToolCall
from mcptax import verdict_rules


class ReferenceDocument(models.Model):
    """A file a team's agents are expected to paste: the source of expected content.

    Registered by upload or by URL (fetched once through ``ingest.fidelity.fetch``). Its text is the
    expected content for any paste that names its sha256 or matches its head/tail fingerprints.
    """

    class Source(models.TextChoices):
        UPLOAD = "upload", "Upload"
        URL = "url", "URL"

    team = models.ForeignKey(Team, models.CASCADE, related_name="reference_documents")
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = NameField(max_length=300)
    source = models.CharField(max_length=10, choices=Source.choices)
    url = models.URLField(max_length=2000, blank=True, help_text="As registered")
    fetched_url = models.URLField(max_length=2000, blank=True, help_text="After blob→raw and redirects")
    sha256 = models.CharField(max_length=64)
    bytes = models.PositiveBigIntegerField()
    lines = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    ends_with_newline = models.BooleanField(default=False)
    crlf_count = models.PositiveIntegerField(default=0)
    text = models.TextField()
    # Bulk arguments whose verdict was (re)computed when this document was registered.
    rejudged = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [models.UniqueConstraint(fields=["team", "sha256"], name="unique_reference_document")]

    def __str__(self) -> str:
        return self.name


class ReferenceFingerprint(models.Model):
    """One head/tail key of a document (see mcptax.fingerprints); looked up by indexed equality."""

    document = models.ForeignKey(ReferenceDocument, models.CASCADE, related_name="fingerprints")
    team = models.ForeignKey(Team, models.CASCADE, related_name="+")
    kind = models.CharField(max_length=12)
    value = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "kind"], name="unique_fingerprint_kind")]
        indexes = [models.Index(fields=["team", "kind", "value"], name="fingerprint_lookup")]

    def __str__(self) -> str:
        return f"{self.kind}:{self.value[:12]}"


class ModelPrice(models.Model):
    """What a model's tokens cost, in USD per million tokens. Editable.

    Captures rarely say which model produced a call, so a price is chosen per agent family:
    a team's row for the family, else the team's default row, else the global (team-less) row
    for the family, else the global default. Global rows are seeded as editable examples.
    """

    team = models.ForeignKey(Team, models.CASCADE, null=True, blank=True, related_name="model_prices")
    model = models.CharField(max_length=100)
    agent_family = models.CharField(
        max_length=60, blank=True, help_text="Agent family this price applies to (blank: none in particular)"
    )
    is_default = models.BooleanField(default=False, help_text="Used for agents no other row names")
    input_usd_per_mtok = models.DecimalField(max_digits=10, decimal_places=4)
    output_usd_per_mtok = models.DecimalField(max_digits=10, decimal_places=4)
    note = models.CharField(max_length=300, blank=True)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team_id", "agent_family", "model"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "model", "agent_family"],
                condition=Q(team__isnull=False),
                name="unique_team_price",
            ),
            models.UniqueConstraint(
                fields=["model", "agent_family"], condition=Q(team__isnull=True), name="unique_global_price"
            ),
        ]

    def __str__(self) -> str:
        scope = self.team or "global"
        return f"{self.model} ({self.agent_family or 'default'}, {scope})"


# The verdicts of a bulk argument (docs/definitions.md), with the groups the pages and alerts count
# by: one definition, mcptax.verdict_rules, which BulkArgument.verdict's choices also come from.
# (Django's functional enum API, which the stubs do not type.)
Verdict = models.TextChoices(
    "Verdict",
    [(value.upper(), (value, label)) for value, label in verdict_rules.CHOICES],  # type: ignore[call-overload]
)
# Rollup rows count reference calls and calls without a bulk argument under these names.
BY_REFERENCE = verdict_rules.BY_REFERENCE
NO_BULK = "no_bulk"
# Calls whose log carried no arguments (telemetry without tool details).
NO_CONTENT = verdict_rules.NO_CONTENT
# Verdicts that are judgements of the agent (exact-match rates are over these); damaged copies.
JUDGED = verdict_rules.JUDGED
DAMAGED = verdict_rules.DAMAGED


def verdict_counts(job: IngestJob) -> dict[str, int]:
    """{verdict: n} over the job's bulk arguments ("pending" = not judged yet), plus ``by_reference``
    and ``no_content`` (calls whose log carried no arguments)."""
    counts = {
        (row["verdict"] or "pending"): row["n"]
        for row in BulkArgument.objects.filter(call__job=job).values("verdict").annotate(n=Count("pk"))
    }
    by_reference = ToolCall.objects.filter(job=job, is_reference_call=True).count()
    if by_reference:
        counts[BY_REFERENCE] = by_reference
    no_content = ToolCall.objects.filter(job=job, no_content=True).count()
    if no_content:
        counts[verdict_rules.NO_CONTENT] = no_content
    return counts


def refresh_verdict_counts(job: IngestJob) -> IngestJob:
    """Recompute the job's verdict counts (after its arguments were judged again)."""
    IngestJob.objects.filter(pk=job.pk).update(verdict_counts=verdict_counts(job))
    job.refresh_from_db(fields=["verdict_counts"])
    return job


class SizeBucket(models.TextChoices):
    UNDER_1K = "lt1k", "under 1 KB"
    K1_10 = "1-10k", "1–10 KB"
    K10_50 = "10-50k", "10–50 KB"
    K50_100 = "50-100k", "50–100 KB"
    OVER_100K = "gt100k", "over 100 KB"
    NONE = "", "no bulk argument"


class FidelityDaily(models.Model):
    """Rollup: team × day × agent × server label × tool × verdict × size bucket.

    ``verdict`` is a bulk-argument verdict, or ``by_reference`` for a reference call, or
    ``no_bulk`` for any other call, so calls per tool, reference adoption and unused tools read
    from here. ``calls`` counts each call once (on the row of its first bulk argument);
    ``arguments`` counts bulk arguments. Maintained at ingest (``ingest.fidelity.rollups``) and corrected
    when verdicts are recomputed; never rebuilt from the call table.
    """

    team = models.ForeignKey(Team, models.CASCADE, related_name="fidelity_daily")
    day = models.DateField()
    agent = models.ForeignKey(Agent, models.CASCADE, null=True, blank=True, related_name="daily")
    server_label = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200)
    verdict = models.CharField(max_length=20)
    size_bucket = models.CharField(max_length=8, choices=SizeBucket.choices, blank=True)
    calls = models.BigIntegerField(default=0)
    arguments = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    pasted_tokens = models.BigIntegerField(default=0)
    # Output tokens of the producing turn (the call's share) where a transcript gave them.
    output_tokens = models.BigIntegerField(default=0)
    # What pasting was billed as: output tokens where known, else the pasted tokens.
    billed_tokens = models.BigIntegerField(default=0)
    # Calls whose output tokens are an estimate (ToolCall.output_tokens_estimated).
    estimated_calls = models.BigIntegerField(default=0)
    # Tokens the same arguments would have cost passed as a reference instead.
    reference_tokens = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    reference_cost_usd = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    server_errors = models.BigIntegerField(default=0, help_text="Calls the server answered with isError")

    class Meta:
        ordering = ["-day"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "day", "agent", "server_label", "tool", "verdict", "size_bucket"],
                condition=Q(agent__isnull=False),
                name="unique_daily_agent",
            ),
            models.UniqueConstraint(
                fields=["team", "day", "server_label", "tool", "verdict", "size_bucket"],
                condition=Q(agent__isnull=True),
                name="unique_daily_no_agent",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "agent", "day"], name="daily_agent_day"),
            models.Index(fields=["team", "server_label", "day"], name="daily_server_day"),
            # The tool page's two grouped queries (per day, per agent) read one tool's rows only.
            models.Index(fields=["team", "server_label", "tool", "day"], name="daily_tool_day"),
            models.Index(fields=["team", "day"], name="daily_team_day"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.server_label}/{self.tool} {self.verdict} {self.size_bucket}: {self.calls}"
