"""Discovery records of a capture session: searches, loads, compactions, model requests, calls.

One row per record, unique per (session, key), so reading a log again stores nothing twice.
Derived figures (loads, wasted loads, load-to-call rate) are recomputed from these rows by
``mcptax.discovery.derive`` and kept on ``SessionDiscoverySummary`` for the pages.
"""

from __future__ import annotations

from django.db import models

from ingest.capture.models import CaptureSession


class _SessionRecord(models.Model):
    session = models.ForeignKey(CaptureSession, models.CASCADE)
    key = models.CharField(max_length=200)
    at = models.DateTimeField(null=True, blank=True)
    seq = models.BigIntegerField(default=0)

    class Meta:
        abstract = True
        ordering = ["session", "at", "seq"]

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.key}"


class DiscoverySearch(_SessionRecord):
    """One run of the client's search tool (ToolSearch, tool_search_tool_regex/bm25, tool_search)."""

    query = models.TextField(blank=True)
    matches = models.JSONField(default=list, blank=True)
    missed = models.BooleanField(default=False)
    total_deferred = models.PositiveIntegerField(null=True, blank=True)
    search_tool = models.CharField(max_length=60)

    class Meta(_SessionRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="unique_discovery_search")]

    def __str__(self) -> str:
        return f"{self.search_tool} {self.query!r} -> {len(self.matches)}"


class DiscoveryCompaction(_SessionRecord):
    kept_loaded = models.JSONField(default=list, blank=True)

    class Meta(_SessionRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="unique_discovery_compaction")]


class DiscoveryRequest(_SessionRecord):
    """One model request of the session (a Claude Code assistant message, one API exchange)."""

    class Meta(_SessionRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="unique_discovery_request")]


class DiscoveryCall(_SessionRecord):
    """A call of a tool the client could defer, as the client names it (mcp__<server>__<tool>)."""

    tool = models.CharField(max_length=300)
    server_label = models.CharField(max_length=200, blank=True)

    class Meta(_SessionRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="unique_discovery_call")]


class DiscoveryLoad(models.Model):
    """A tool loaded by a search, as derived from the session's records (rebuilt after each ingest)."""

    session = models.ForeignKey(CaptureSession, models.CASCADE, related_name="discovery_loads")
    search = models.ForeignKey(DiscoverySearch, models.CASCADE, related_name="loads")
    tool = models.CharField(max_length=300)
    server_label = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(null=True, blank=True)
    calls = models.PositiveIntegerField(default=0)
    requests_after = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["session", "at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["session", "search", "tool"], name="unique_discovery_load")
        ]
        indexes = [models.Index(fields=["server_label", "tool"], name="discovery_load_tool")]

    def __str__(self) -> str:
        return f"{self.tool} loaded by {self.search_id}"

    @property
    def wasted(self) -> bool:
        return self.calls == 0


class SessionDiscoverySummary(models.Model):
    """A session's discovery figures, recomputed from its records after every change."""

    session = models.OneToOneField(CaptureSession, models.CASCADE, related_name="discovery")
    total_deferred = models.PositiveIntegerField(null=True, blank=True, help_text="The client's own count")
    searches = models.PositiveIntegerField(default=0)
    misses = models.PositiveIntegerField(default=0)
    loads = models.PositiveIntegerField(default=0)
    loads_never_called = models.PositiveIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0)
    calls_without_load = models.PositiveIntegerField(default=0)
    requests = models.PositiveIntegerField(default=0)
    first_at = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"discovery of {self.session}"

    @property
    def load_to_call_rate(self) -> float | None:
        return None if not self.loads else (self.loads - self.loads_never_called) / self.loads
