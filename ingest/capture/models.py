"""Captured MCP traffic: agents, sessions, tool calls and their bulk arguments, and ingest jobs.

Everything belongs to a team. Bulk content is stored content-addressed (team, sha256) once, so a
value pasted a thousand times costs one row, and a later exact copy can serve as the expected
content of earlier damaged ones.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
from ingest.capture.storage import open_stored
from mcptax import verdict_rules


class Agent(models.Model):
    """A client identity: family (normalized) plus the exact name, version and title seen."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="agents")
    family = models.CharField(max_length=60, db_index=True)
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=100, blank=True)
    title = models.CharField(max_length=200, blank=True)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["family", "name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "family", "name", "version", "title"], name="unique_agent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.family} {self.version}".strip()


class CaptureSession(models.Model):
    team = models.ForeignKey(Team, models.CASCADE, related_name="capture_sessions")
    format = models.CharField(max_length=20)
    session_key = models.CharField(max_length=300)
    server_label = models.CharField(max_length=200, blank=True)
    agent = models.ForeignKey(Agent, models.SET_NULL, null=True, blank=True, related_name="sessions")
    first_ts = models.DateTimeField(null=True, blank=True)
    last_ts = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "format", "session_key"], name="unique_capture_session"),
        ]

    def __str__(self) -> str:
        return f"{self.format}:{self.session_key}"


class BulkContent(models.Model):
    """A bulk value's exact text (arrays as canonical JSON), kept once per (team, sha256).

    Subject to the team's retention: the figures and hash stay when the text is dropped.
    """

    team = models.ForeignKey(Team, models.CASCADE, related_name="bulk_contents")
    sha256 = models.CharField(max_length=64)
    bytes = models.PositiveBigIntegerField()
    is_array = models.BooleanField(default=False)
    text = models.TextField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "sha256"], name="unique_bulk_content")]

    def __str__(self) -> str:
        return self.sha256[:12]


class ToolCall(models.Model):
    team = models.ForeignKey(Team, models.CASCADE, related_name="tool_calls")
    dedupe_key = models.CharField(max_length=64)
    source_format = models.CharField(max_length=20)
    job = models.ForeignKey("IngestJob", models.SET_NULL, null=True, blank=True, related_name="calls")
    session = models.ForeignKey(CaptureSession, models.SET_NULL, null=True, blank=True, related_name="calls")
    agent = models.ForeignKey(Agent, models.SET_NULL, null=True, blank=True, related_name="calls")
    server_label = models.CharField(max_length=200, blank=True)
    server = models.ForeignKey(McpServer, models.SET_NULL, null=True, blank=True, related_name="tool_calls")
    tool = models.CharField(max_length=200)
    jsonrpc_id = models.CharField(max_length=100, blank=True)
    client_call_id = models.CharField(max_length=200, blank=True, db_index=True)
    claudecode_tool_use_id = models.CharField(max_length=200, blank=True, db_index=True)
    # A transcript call and a proxy capture of the same call point at each other; only the proxy
    # one (which saw the bytes on the wire) counts in fidelity figures.
    linked_call = models.ForeignKey("self", models.SET_NULL, null=True, blank=True, related_name="+")
    counts_in_rollups = models.BooleanField(default=True)
    request_ts = models.DateTimeField(null=True, blank=True, db_index=True)
    response_ts = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    argument_bytes = models.PositiveBigIntegerField(default=0)
    argument_sha256 = models.CharField(max_length=64)
    is_error = models.BooleanField(null=True)
    jsonrpc_error = models.JSONField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    turn_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The transcript's figure was below the tokens of the tool inputs the turn wrote, so
    # ``output_tokens`` is those counted tokens: the paste cost is an estimate.
    output_tokens_estimated = models.BooleanField(default=False)
    is_reference_call = models.BooleanField(default=False)
    reference_key = models.CharField(max_length=60, blank=True)
    reference_value = models.TextField(blank=True)
    bulk_count = models.PositiveIntegerField(default=0)
    # What the server said it processed (structuredContent.sha256 or a JSON text result's sha256).
    server_reported_sha256 = models.CharField(max_length=64, blank=True)
    capture_truncated = models.BooleanField(default=False)
    # The log says the call happened but carries none of its arguments (OpenTelemetry logs without
    # the client's tool details): counted, with the verdict "no content in telemetry".
    no_content = models.BooleanField(default=False)
    # What the ingest had to change to store the call (e.g. NUL characters a database refuses, an
    # over-long identifier shortened), or content it could not keep. Figures and hashes are always
    # computed over the exact captured values, never over these stored stand-ins.
    ingest_notes = models.JSONField(default=list, blank=True)
    redacted = models.BooleanField(default=False)
    unanswered = models.BooleanField(default=False)
    # Whether this call's figures are in FidelityDaily now (claimed by a conditional update, so a
    # re-sent ingest signal never counts a call twice; cleared when a linked copy takes over).
    in_rollups = models.BooleanField(default=False)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-request_ts", "-pk"]
        constraints = [models.UniqueConstraint(fields=["team", "dedupe_key"], name="unique_call_per_team")]
        indexes = [
            models.Index(fields=["team", "agent", "-request_ts"], name="call_agent_recent"),
            models.Index(fields=["team", "server_label", "tool"], name="call_server_tool"),
            # The last N calls of a tool (fidelity alerts), read in index order.
            models.Index(fields=["team", "server_label", "tool", "-request_ts"], name="call_tool_recent"),
            # The tool page's call list sorted by size, read in index order (either direction).
            models.Index(
                fields=["team", "server_label", "tool", "-argument_bytes", "-id"], name="call_tool_bytes"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.server_label}/{self.tool} {self.request_ts or ''}"


class BulkArgument(models.Model):
    call = models.ForeignKey(ToolCall, models.CASCADE, related_name="bulk_arguments")
    team = models.ForeignKey(Team, models.CASCADE, related_name="+")
    pointer = models.CharField(max_length=500)
    kind = models.CharField(max_length=10)  # string | array | digest
    bytes = models.PositiveBigIntegerField()
    lines = models.PositiveIntegerField(default=0)
    sha256 = models.CharField(max_length=64, db_index=True)
    tokens = models.PositiveIntegerField(default=0)
    ends_with_newline = models.BooleanField(default=False)
    crlf_count = models.PositiveIntegerField(default=0)
    elements = models.PositiveIntegerField(null=True, blank=True)
    content = models.ForeignKey(BulkContent, models.SET_NULL, null=True, blank=True, related_name="+")
    capture_truncated = models.BooleanField(default=False)
    # Set by the fidelity step (ingest.fidelity.models.Verdict). Empty verdict = not judged yet.
    verdict = models.CharField(max_length=20, choices=verdict_rules.CHOICES, blank=True, db_index=True)
    expected_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    expected_source = models.CharField(max_length=30, blank=True)  # caller | meta | reference_document
    evidence = models.JSONField(default=dict, blank=True)
    verdict_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["call", "pointer"]
        constraints = [models.UniqueConstraint(fields=["call", "pointer"], name="unique_bulk_pointer")]

    def __str__(self) -> str:
        return f"{self.call} {self.pointer} {self.verdict or '-'}"


class IngestJob(models.Model):
    class Source(models.TextChoices):
        UPLOAD = "upload", "Upload"
        WATCH = "watch", "Watched folder"
        API = "api", "API"
        COMMAND = "command", "Command"
        OTEL = "otel", "Telemetry (OTLP)"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        # The last attempt failed for a transient reason; the next one is due at ``retry_at``.
        RETRYING = "retrying", "Retrying"
        FAILED = "failed", "Failed"

    team = models.ForeignKey(Team, models.CASCADE, related_name="ingest_jobs")
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    source = models.CharField(max_length=10, choices=Source.choices)
    filename = models.CharField(max_length=500, blank=True)
    # The input: a file in the shared ingest storage (uploads, API bodies: any worker on any host
    # opens it), or a local ``path`` read on the host that runs the job (manage.py ingest, watched
    # folders, and jobs created before the shared storage, whose absolute path still reads).
    storage_name = models.CharField(
        max_length=500, blank=True, help_text="Name of the input in the ingest storage"
    )
    path = models.CharField(max_length=1000, blank=True, help_text="A local input file, read in place")
    format = models.CharField(max_length=20, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    total_bytes = models.PositiveBigIntegerField(default=0)
    bytes_done = models.PositiveBigIntegerField(default=0)
    lines_read = models.PositiveBigIntegerField(default=0)
    stored = models.PositiveBigIntegerField(default=0)
    duplicate = models.PositiveBigIntegerField(default=0)
    ignored = models.PositiveBigIntegerField(default=0)
    quarantined = models.PositiveBigIntegerField(default=0)
    calls_stored = models.PositiveBigIntegerField(default=0)
    ignored_reasons = models.JSONField(default=dict, blank=True)
    quarantined_reasons = models.JSONField(default=dict, blank=True)
    # Filled by the fidelity step ({verdict: count} over this job's bulk arguments; "pending" = not
    # judged yet).
    verdict_counts = models.JSONField(default=dict, blank=True)
    # Tool-discovery records this job stored that were new ({searches, misses, loads,
    # loads_never_called, calls, requests, compactions}; ingest.discovery.store.DiscoveryCounts).
    discovery_counts = models.JSONField(default=dict, blank=True)
    # Resume point: outcomes of lines 1..watermark are persisted (see mcptax.formats.assemble).
    watermark = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True)
    # Runs started (watched-file jobs, driven by every scan, are not counted); a transient failure
    # is retried at ``retry_at`` while attempts <= INGEST_RETRY_MAX.
    attempts = models.PositiveIntegerField(default=0)
    retry_at = models.DateTimeField(null=True, blank=True)
    # Lease of the run that owns the job: a second run (a redelivered task) takes over only when the
    # owner's heartbeat is stale or its process is gone, so two runs never count the same lines.
    run_token = models.CharField(max_length=32, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the run that owns the job")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # A large file is read in line ranges side by side (ingest.capture.pipeline.ranges): each range
    # is a job of its own (lease, watermark, counters) under ``parent``, bytes [range_start,
    # range_end) after ``first_line`` lines. ``edge``: a range's seed, then what it hands on to
    # the parent's stitch (zlib JSON, mcptax.formats.state.pack); a parent's range count.
    parent = models.ForeignKey("self", models.CASCADE, null=True, blank=True, related_name="ranges")
    range_index = models.PositiveIntegerField(default=0)
    range_start = models.PositiveBigIntegerField(default=0)
    range_end = models.PositiveBigIntegerField(default=0)
    first_line = models.PositiveBigIntegerField(default=0)
    edge = models.BinaryField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"{self.get_source_display()} {self.filename} ({self.status})"

    @property
    def progress_pct(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        if not self.total_bytes:
            return 0
        return min(99, int(100 * self.bytes_done / self.total_bytes))

    @property
    def reconciles(self) -> bool:
        return self.lines_read == self.stored + self.duplicate + self.ignored + self.quarantined


class LineRecord(models.Model):
    """The outcome of one input line, kept when it must be: every quarantined line (with its raw
    text, for inspection), every duplicate line, and any line settled above the job's watermark
    at the time its batch was committed (so a resumed job, which re-reads lines after the
    watermark, counts each line exactly once; see ingest.capture.pipeline). Plain stored and ignored
    lines below the watermark leave no row: the job's counters hold them.
    """

    class Status(models.TextChoices):
        STORED = "stored", "Stored"
        DUPLICATE = "duplicate", "Duplicate"
        IGNORED = "ignored", "Ignored"
        QUARANTINED = "quarantined", "Quarantined"

    job = models.ForeignKey(IngestJob, models.CASCADE, related_name="line_records")
    team = models.ForeignKey(Team, models.CASCADE, related_name="+")
    line_no = models.PositiveBigIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices)
    reason = models.CharField(max_length=200, blank=True)
    raw = models.TextField(blank=True)
    raw_bytes = models.PositiveBigIntegerField(default=0)
    # The exact bytes, only when ``raw`` cannot hold them (invalid UTF-8, NUL): ``raw`` is then a
    # readable escaped copy.
    raw_data = models.BinaryField(null=True, blank=True)
    # A line longer than INGEST_MAX_RAW_BYTES: ``raw`` holds only its head; the whole line is the
    # file ``raw_file`` in the ingest storage, named by its ``raw_sha256`` (``raw_bytes`` long).
    raw_sha256 = models.CharField(max_length=64, blank=True)
    raw_file = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "line_no"]
        constraints = [models.UniqueConstraint(fields=["job", "line_no"], name="unique_line_per_job")]
        indexes = [models.Index(fields=["team", "status", "reason"], name="line_team_status")]

    def __str__(self) -> str:
        return f"{self.job_id}:{self.line_no} {self.status} {self.reason}"

    @property
    def raw_is_head(self) -> bool:
        """Only the head of the line is in this row; the whole line is the file ``raw_file``."""
        return bool(self.raw_file)

    def exact_raw(self) -> bytes:
        """The line exactly as read (without its line terminator), from its file when it is long."""
        if self.raw_file:
            kept, _ = open_stored(self.raw_file)
            with kept:
                data: bytes = kept.read()
            return data
        return bytes(self.raw_data) if self.raw_data is not None else self.raw.encode("utf-8")


class WatchedFolder(models.Model):
    team = models.ForeignKey(Team, models.CASCADE, related_name="watched_folders")
    path = models.CharField(max_length=1000)
    pattern = models.CharField(max_length=100, default="*.jsonl")
    format = models.CharField(max_length=20, default="auto")
    enabled = models.BooleanField(default=True)
    last_scan_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["team", "path", "pattern"], name="unique_watch")]

    def __str__(self) -> str:
        return f"{self.path}/{self.pattern}"


class WatchedFile(models.Model):
    """Tail state of one file, found by (device, inode) and confirmed by name, size and head.

    An inode number is reused once its file is deleted, so the scanner follows a file under a new
    name only while ``name`` (the name it matched the pattern with), ``size_seen`` and the head
    fingerprint agree (``ingest.capture.watchguard``).
    """

    folder = models.ForeignKey(WatchedFolder, models.CASCADE, related_name="files")
    path = models.CharField(max_length=1000)
    name = models.CharField(
        max_length=255, blank=True, help_text="The name the file matched the pattern with"
    )
    device = models.BigIntegerField()
    inode = models.BigIntegerField()
    offset = models.PositiveBigIntegerField(default=0, help_text="Bytes consumed (always at a line end)")
    line_no = models.PositiveBigIntegerField(default=0)
    size_seen = models.PositiveBigIntegerField(default=0)
    head_sha256 = models.CharField(max_length=64, blank=True, help_text="sha256 of the first head_len bytes")
    head_len = models.PositiveIntegerField(default=0)
    last_read_at = models.DateTimeField(null=True, blank=True)
    job = models.ForeignKey(IngestJob, models.SET_NULL, null=True, blank=True, related_name="+")
    # What the parser and the call assembler knew at ``offset`` (pending requests, sessions' clients;
    # mcptax.formats.state): the next scan reads on from there. Empty: read from the start.
    pairing_state = models.BinaryField(null=True, blank=True)
    last_scan_bytes = models.PositiveBigIntegerField(default=0, help_text="Bytes the last read parsed")

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(fields=["folder", "device", "inode"], name="unique_watched_file")
        ]

    def __str__(self) -> str:
        return f"{self.path} @ {self.offset}"


class TeamCaptureSettings(models.Model):
    """Per-team retention of bulk content (hashes and figures are always kept)."""

    team = models.OneToOneField(Team, models.CASCADE, related_name="capture_settings")
    keep_bulk_content = models.BooleanField(default=True)
    content_retention_days = models.PositiveIntegerField(default=30)
    max_content_bytes = models.PositiveBigIntegerField(default=10 * 1024 * 1024)

    def __str__(self) -> str:
        return f"capture settings for {self.team}"

    @classmethod
    def for_team(cls, team: Team) -> TeamCaptureSettings:
        obj, _ = cls.objects.get_or_create(team=team)
        return obj


# -- fidelity (issue 7): reference documents, prices, rollups --------------------------------------
