"""What telemetry measures beyond tool calls: each model request's tokens, the tool definitions a
request actually sent, and when each agent last reported.

Rows are unique per team and record key (``mcptax.otel.events.record_key``), so an exporter's
retry of a batch stores nothing twice.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from dashboard.teams.models import Team
from ingest.capture.models import Agent, CaptureSession, IngestJob


class MeasuredRequest(models.Model):
    """One model request as the client measured it (Claude Code ``api_request``; Codex
    ``sse_event`` ``response.completed``)."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="measured_requests")
    key = models.CharField(max_length=64)
    job = models.ForeignKey(IngestJob, models.SET_NULL, null=True, blank=True, related_name="+")
    session = models.ForeignKey(CaptureSession, models.CASCADE, related_name="measured_requests")
    agent = models.ForeignKey(Agent, models.SET_NULL, null=True, blank=True, related_name="measured_requests")
    at = models.DateTimeField(null=True, blank=True, db_index=True)
    model = models.CharField(max_length=100, blank=True)
    request_id = models.CharField(max_length=100, blank=True)
    # Input not read from the cache, input read from it, input written to it, output.
    input_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="unique_measured_request")]

    def __str__(self) -> str:
        return f"{self.model} {self.at or ''}"

    @property
    def prompt_tokens(self) -> int:
        """Everything the request put before the model: uncached, cache read and cache written."""
        return self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens


class SentTools(models.Model):
    """The tool definitions one request sent (Claude Code ``api_request_body``), counted."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="sent_tools")
    key = models.CharField(max_length=64)
    job = models.ForeignKey(IngestJob, models.SET_NULL, null=True, blank=True, related_name="+")
    session = models.ForeignKey(CaptureSession, models.CASCADE, related_name="sent_tools")
    agent = models.ForeignKey(Agent, models.SET_NULL, null=True, blank=True, related_name="sent_tools")
    at = models.DateTimeField(null=True, blank=True, db_index=True)
    model = models.CharField(max_length=100, blank=True)
    request_id = models.CharField(max_length=100, blank=True)
    mode = models.CharField(max_length=10)  # eager | deferred
    tool_count = models.PositiveIntegerField(default=0)
    deferred_count = models.PositiveIntegerField(default=0)
    loaded_count = models.PositiveIntegerField(default=0)
    # {encoding: tokens} of the whole tools array, and of the MCP tools sent in full.
    totals = models.JSONField(default=dict)
    mcp_loaded = models.JSONField(default=dict)
    # [{name, server, tool, deferred, tokens: {encoding: n}, definition}] as the client rendered them.
    tools = models.JSONField(default=list)
    # Per server the team registered, what the client sent beside what the claude profile predicts
    # from the server's current snapshot: {server label: {server, snapshot, tools, missing,
    # measured, predicted, differences, finding}} (mcptax.otel.sent_tools.Comparison).
    predicted = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="unique_sent_tools")]

    def __str__(self) -> str:
        return f"{self.mode} {self.tool_count} tools {self.at or ''}"


class TelemetryAgent(models.Model):
    """When an agent last reported telemetry, and what."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="telemetry_agents")
    agent = models.ForeignKey(Agent, models.CASCADE, related_name="+")
    last_received = models.DateTimeField(default=timezone.now)
    last_event = models.CharField(max_length=100, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    records = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-last_received"]
        constraints = [models.UniqueConstraint(fields=["team", "agent"], name="unique_telemetry_agent")]

    def __str__(self) -> str:
        return f"{self.agent} {self.last_received}"
