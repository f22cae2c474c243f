"""The ingest pipeline: from a log file on disk to ToolCalls, BulkArguments and per-line outcomes.

Public entry points (stable; pages, the API, commands and tasks build on them):

- ``create_job(team, *, source, filename, path, format="auto", user=None) -> IngestJob``
- ``run_job(job_id) -> IngestJob``: runs (or resumes) a job; never raises for a bad input or an
  unexpected error (the job is marked failed with the error, counts kept). Idempotent: a done job
  is returned as is, a killed job re-run finishes with the same counts as an uninterrupted run.
- ``ingest_path(team, path, *, format="auto", source="command") -> IngestJob`` (synchronous)
- ``ingest_bytes(team, data, *, source, filename, format="auto", user=None, run=True) -> IngestJob``
- ``store_upload(team, chunks, filename, *, max_bytes=None) -> Path`` and ``enqueue_job(job)``
  for streamed uploads processed by the ``ingest.tasks.run_ingest_job`` task.
- ``ingest_watched_file(watched_file, *, final=False) -> IngestJob | None``: tails one file.

Loss-free accounting. Every input line (HAR: entry) ends as exactly one of stored, duplicate,
ignored(reason) or quarantined(reason, line number, raw kept), so on a finished job
``lines_read == stored + duplicate + ignored + quarantined``. A call line is *stored* when any call
it formed was stored by this job, *duplicate* when all of them already existed in the team
(dedupe by ``(team, dedupe_key)``), so re-ingesting a file stores nothing new.

Batches and resume. Outputs of ``mcptax.formats`` are persisted in batches, one transaction each:
the new calls with their bulk arguments and contents, the line outcomes, and the job's counters
and watermark (lines 1..watermark are settled). A killed run is resumed by re-reading the file
with ``skip_through_line=watermark``; lines above the watermark may have been settled already
(outcomes come out of line order), which is why every outcome above the watermark at commit
time leaves a LineRecord: on resume those lines are recognised and not counted twice. A call
re-yielded on resume exists already with ``job`` = this job, so it counts as stored, not
duplicate. A lease (``run_token`` + heartbeat, and the owner's host:pid) keeps two runs (e.g. a
redelivered task) from working on one job at once.

After each committed batch the ``ingest.capture.signals.calls_ingested`` signal is sent with the ids of the
calls this job stored in it (the hook for fidelity verdicts).
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import socket
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
from ingest.capture.models import (
    Agent,
    BulkArgument,
    BulkContent,
    CaptureSession,
    IngestJob,
    LineRecord,
    TeamCaptureSettings,
    ToolCall,
    WatchedFile,
)
from ingest.capture.signals import calls_ingested
from ingest.fidelity.verdicts import caller_expectations
from mcptax.bulk import BulkArg, find_bulk_arguments, find_reference
from mcptax.formats import DETECT_BYTES, UnknownFormatError, detect_format, parse
from mcptax.formats.assemble import assemble
from mcptax.formats.records import (
    CALL,
    PROXY_FORMATS,
    QUARANTINED,
    AgentInfo,
    LineEvent,
    LineOutcome,
    ObservedCall,
    canonical,
    load_json,
    numbered_lines,
    quarantine,
)

logger = logging.getLogger(__name__)

Status = IngestJob.Status
_SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")
_GZIP_MAGIC = b"\x1f\x8b"
UNKNOWN_FORMAT = "unknown"


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name))


def batch_limits() -> tuple[int, int, int]:
    """(calls, lines, argument bytes) after which a batch is committed."""
    return (
        _setting("INGEST_BATCH_CALLS", 250),
        _setting("INGEST_BATCH_LINES", 5000),
        _setting("INGEST_BATCH_BYTES", 16 * 1024 * 1024),
    )


# -- jobs ----------------------------------------------------------------------------------------


def create_job(
    team: Team,
    *,
    source: str,
    filename: str,
    path: str | os.PathLike[str],
    format: str = "auto",
    user: Any = None,
) -> IngestJob:
    """A queued job for the file at ``path`` (kept there; run it with ``run_job`` or the task).

    ``format`` is ``auto`` (detected when the job runs) or one of ``mcptax.formats.FORMATS``.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    return IngestJob.objects.create(
        team=team,
        source=source,
        filename=filename[:500],
        path=str(path),
        format="" if format == "auto" else format,
        total_bytes=size,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def enqueue_job(job: IngestJob) -> None:
    """Run the job on the ``ingest`` queue once the surrounding transaction commits."""
    from ingest.tasks import run_ingest_job

    transaction.on_commit(lambda: run_ingest_job.delay(job.pk))


def upload_dir(team: Team) -> Path:
    return Path(settings.MEDIA_ROOT) / "ingest" / str(team.pk)


class UploadTooLarge(ValueError):
    """The upload went over the allowed size; nothing was kept."""


def _safe_name(filename: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(filename or "upload"))[-120:]
    return name.lstrip(".") or "upload"


def store_upload(team: Team, chunks: Iterable[bytes], filename: str, *, max_bytes: int | None = None) -> Path:
    """Stream ``chunks`` to a new file under ``MEDIA_ROOT/ingest/<team>/`` and return its path.

    Raises UploadTooLarge (and removes the partial file) past ``max_bytes``.
    """
    directory = upload_dir(team)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex}-{_safe_name(filename)}"
    written = 0
    try:
        with open(path, "xb") as out:
            for chunk in chunks:
                written += len(chunk)
                if max_bytes is not None and written > max_bytes:
                    raise UploadTooLarge(f"upload is larger than {max_bytes} bytes")
                out.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def ingest_bytes(
    team: Team,
    data: bytes,
    *,
    source: str,
    filename: str,
    format: str = "auto",
    user: Any = None,
    run: bool = True,
) -> IngestJob:
    """Keep ``data`` (JSONL, HAR, or gzip of either) under MEDIA_ROOT and ingest it.

    With ``run=False`` the job is only created (queued); pass it to ``enqueue_job``.
    """
    path = store_upload(team, [data], filename)
    job = create_job(team, source=source, filename=filename, path=path, format=format, user=user)
    return run_job(job.pk) if run else job


def ingest_path(
    team: Team, path: str | os.PathLike[str], *, format: str = "auto", source: str = "command"
) -> IngestJob:
    """Ingest the file at ``path`` synchronously (read in place, not copied)."""
    path = Path(path).resolve()
    job = create_job(team, source=source, filename=path.name, path=path, format=format)
    return run_job(job.pk)


# -- the lease -------------------------------------------------------------------------------------


def _me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_gone(worker: str) -> bool:
    """True when the owning process ran on this host and no longer exists."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class _LeaseLost(Exception):
    """Another run took the job over (ours was presumed dead); stop without touching it."""


def _claim(job_id: int) -> tuple[IngestJob | None, str]:
    """Take the job's lease: (job, token), or (None, "") when it is done or another run holds it."""
    token = uuid.uuid4().hex
    now = timezone.now()
    lease = timedelta(seconds=_setting("INGEST_JOB_LEASE_SECONDS", 120))
    with transaction.atomic():
        job = IngestJob.objects.select_for_update().select_related("team").get(pk=job_id)
        if job.status == Status.DONE:
            return None, ""
        held = (
            job.run_token
            and job.heartbeat_at is not None
            and job.heartbeat_at > now - lease
            and not _owner_gone(job.worker)
        )
        if held:
            return None, ""
        job.run_token = token
        job.worker = _me()[:200]
        job.heartbeat_at = now
        job.status = Status.RUNNING
        job.started = job.started or now
        job.error = ""
        job.save(update_fields=["run_token", "worker", "heartbeat_at", "status", "started", "error"])
    return job, token


# -- reading -----------------------------------------------------------------------------------------


class _Lines:
    """Lines of a binary stream up to ``limit`` bytes, counting what was consumed."""

    def __init__(
        self, stream: IO[bytes], limit: int | None = None, position: Callable[[], int] | None = None
    ):
        self.stream = stream
        self.limit = limit
        self.consumed = 0
        self.count = 0
        self._position = position

    def __iter__(self) -> Iterator[bytes]:
        while True:
            if self.limit is not None:
                remaining = self.limit - self.consumed
                if remaining <= 0:
                    return
                line = self.stream.readline(remaining)
            else:
                line = self.stream.readline()
            if not line:
                return
            self.consumed += len(line)
            self.count += 1
            yield line

    def position(self) -> int:
        """Bytes of the file on disk behind what was read (compressed bytes for gzip)."""
        return self._position() if self._position is not None else self.consumed


def _open(path: str) -> tuple[IO[bytes], IO[bytes]]:
    """(raw file, stream to read): gzip is decompressed transparently."""
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    if raw.read(2) == _GZIP_MAGIC:
        raw.seek(0)
        return raw, gzip.GzipFile(fileobj=raw, mode="rb")
    raw.seek(0)
    return raw, raw


def _detect(stream: IO[bytes]) -> tuple[str, str]:
    """(format, error): the format of the stream's start, rewinding it; UNKNOWN_FORMAT and why."""
    head = stream.read(DETECT_BYTES)
    stream.seek(0)
    try:
        return detect_format(head), ""
    except UnknownFormatError as exc:
        return UNKNOWN_FORMAT, str(exc)
    except (OSError, EOFError) as exc:  # a corrupt gzip stream
        return UNKNOWN_FORMAT, f"cannot read the file: {exc}"


def _unknown_format_events(lines: Iterable[bytes], max_line_bytes: int) -> Iterator[LineEvent]:
    # Nothing can be understood, but every line is still accounted for and kept for inspection.
    for line in numbered_lines(lines):
        if not line.body.strip():
            yield LineEvent(line.line_no, "ignored", "blank", offset=line.offset, length=line.length)
        else:
            yield quarantine(line, "unknown_format")


def _outputs(
    lines: Iterable[bytes], format: str, *, skip_through_line: int, finish: bool
) -> Iterator[ObservedCall | LineOutcome]:
    """Parse and assemble the input (a tailed file is not finished yet); unknown formats are
    quarantined line by line."""
    max_line_bytes = _setting("INGEST_MAX_LINE_BYTES", 16 * 1024 * 1024)
    if format == UNKNOWN_FORMAT:
        # Every line quarantined; any assembler settles them, envelope's will do.
        events: Iterable[LineEvent] = _unknown_format_events(lines, max_line_bytes)
        format = "envelope"
    else:
        events = parse(lines, format, max_line_bytes=max_line_bytes)
    return assemble(events, format, skip_through_line=skip_through_line, finish=finish)


# -- storing ------------------------------------------------------------------------------------------


def _fit(value: str | None, limit: int | None, name: str, notes: list[str]) -> str:
    """A string a database column accepts: no NUL, no lone surrogate, not over ``limit``."""
    if not value:
        return ""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
        notes.append(f"nul_replaced:{name}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        notes.append(f"surrogate_replaced:{name}")
    if limit is not None and len(value) > limit:
        value = value[:limit]
        notes.append(f"shortened:{name}")
    return value


def _db_safe_json(value: Any, notes: list[str], name: str) -> Any:
    # JSON columns refuse the same characters as text columns (PostgreSQL jsonb: \u0000).
    if isinstance(value, str):
        return _fit(value, None, name, notes)
    if isinstance(value, list):
        return [_db_safe_json(v, notes, name) for v in value]
    if isinstance(value, dict):
        return {_fit(str(k), None, name, notes): _db_safe_json(v, notes, name) for k, v in value.items()}
    return value


def _text_is_db_safe(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse_ts(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _valid_sha(value: Any) -> str:
    return value.lower() if isinstance(value, str) and _SHA256_RE.match(value) else ""


def server_reported_sha256(result: dict | None) -> str:
    """What the server says it processed: ``structuredContent.sha256``, else the ``sha256`` of a
    JSON object in a text content item; "" when it says nothing."""
    if not isinstance(result, dict):
        return ""
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and _valid_sha(structured.get("sha256")):
        return _valid_sha(structured["sha256"])
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    for item in content:
        if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
            continue
        text = item["text"].strip()
        if not text.startswith("{") or len(text) > 1024 * 1024:
            continue
        value, problem = load_json(text)
        if problem is None and isinstance(value, dict) and _valid_sha(value.get("sha256")):
            return _valid_sha(value["sha256"])
    return ""


def _jsonrpc_id(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else canonical(value)


@dataclass
class _NewCall:
    observed: ObservedCall
    row: ToolCall
    bulk: list[BulkArg]


@dataclass
class _Batch:
    calls: list[ObservedCall] = field(default_factory=list)
    outcomes: list[LineOutcome] = field(default_factory=list)
    argument_bytes: int = 0

    def full(self, limits: tuple[int, int, int]) -> bool:
        calls, lines, size = limits
        return len(self.calls) >= calls or len(self.outcomes) >= lines or self.argument_bytes >= size


class _Run:
    """One run of one job: persists batches under the job's lease."""

    # Forget the ownership of old keys past this many; a miss just costs one query.
    KEY_CACHE_LIMIT = 200_000

    def __init__(self, job: IngestJob, token: str) -> None:
        self.job = job
        self.team = job.team
        self.token = token
        self.capture = TeamCaptureSettings.for_team(self.team)
        self.servers = dict(McpServer.objects.filter(team=self.team).values_list("name", "id"))
        self.agents: dict[tuple, Agent] = {}
        self.sessions: dict[tuple[str, str], CaptureSession] = {}
        self.key_ours: dict[str, bool] = {}
        self.watermark = job.watermark
        # Lines above the watermark settled by an earlier (killed) run: not to be counted again.
        self.settled_above = set(
            LineRecord.objects.filter(job=job, line_no__gt=job.watermark).values_list("line_no", flat=True)
        )
        self.counts = {
            "stored": job.stored,
            "duplicate": job.duplicate,
            "ignored": job.ignored,
            "quarantined": job.quarantined,
        }
        self.calls_stored = job.calls_stored
        self.ignored_reasons: Counter[str] = Counter(job.ignored_reasons or {})
        self.quarantined_reasons: Counter[str] = Counter(job.quarantined_reasons or {})
        self.limits = batch_limits()

    # -- driving ---------------------------------------------------------------------------------

    def consume(self, items: Iterable[ObservedCall | LineOutcome], lines: _Lines) -> None:
        batch = _Batch()
        for item in items:
            if isinstance(item, ObservedCall):
                batch.calls.append(item)
                batch.argument_bytes += item.arguments_raw_bytes
            else:
                batch.outcomes.append(item)
            if batch.full(self.limits):
                self.flush(batch, lines.position())
                batch = _Batch()
        self.flush(batch, lines.position())

    def flush(self, batch: _Batch, bytes_done: int) -> None:
        with transaction.atomic():
            signal_ids = self._store_calls(batch.calls)
            self._settle(batch.outcomes)
            self._save_progress(bytes_done)
        if signal_ids:
            calls_ingested.send(sender=IngestJob, team=self.team, call_ids=signal_ids, job=self.job)

    # -- calls -------------------------------------------------------------------------------------

    def _store_calls(self, calls: list[ObservedCall]) -> list[int]:
        by_key: dict[str, ObservedCall] = {}
        for call in calls:
            by_key.setdefault(call.dedupe_key, call)
        if not by_key:
            return []
        if len(self.key_ours) > self.KEY_CACHE_LIMIT:
            self.key_ours.clear()
        signal_ids: list[int] = []
        new: list[ObservedCall] = []
        existing = {
            key: (pk, job_id)
            for key, pk, job_id in ToolCall.objects.filter(
                team=self.team, dedupe_key__in=list(by_key)
            ).values_list("dedupe_key", "pk", "job_id")
        }
        for key, call in by_key.items():
            if key in existing:
                pk, job_id = existing[key]
                self.key_ours[key] = job_id == self.job.pk
                if job_id == self.job.pk:
                    signal_ids.append(pk)  # stored before a kill; maybe never signalled
            else:
                new.append(call)
        if not new:
            return signal_ids
        prepared = [self._prepare(call) for call in new]
        ToolCall.objects.bulk_create([p.row for p in prepared], ignore_conflicts=True, batch_size=500)
        inserted = {
            key: (pk, job_id)
            for key, pk, job_id in ToolCall.objects.filter(
                team=self.team, dedupe_key__in=[c.dedupe_key for c in new]
            ).values_list("dedupe_key", "pk", "job_id")
        }
        created: list[_NewCall] = []
        for item in prepared:
            pk, job_id = inserted[item.observed.dedupe_key]
            ours = job_id == self.job.pk
            self.key_ours[item.observed.dedupe_key] = ours
            if ours:  # not if a concurrent ingest of the same capture won the insert
                item.row.pk = pk
                created.append(item)
                signal_ids.append(pk)
        self.calls_stored += len(created)
        self._store_bulk(created)
        self._link(created)
        self._touch_agents_and_sessions(created)
        return signal_ids

    def _agent(self, info: AgentInfo | None, ts: datetime | None, notes: list[str]) -> Agent | None:
        if info is None:
            return None
        family = _fit(info.family, 60, "agent", notes) or "unknown"
        name = _fit(info.name, 200, "agent", notes)
        version = _fit(info.version, 100, "agent", notes)
        title = _fit(info.title, 200, "agent", notes)
        key = (family, name, version, title)
        agent = self.agents.get(key)
        if agent is None:
            seen = ts or timezone.now()
            agent, _ = Agent.objects.get_or_create(
                team=self.team,
                family=family,
                name=name,
                version=version,
                title=title,
                defaults={"first_seen": seen, "last_seen": seen},
            )
            self.agents[key] = agent
        return agent

    def _session(self, call: ObservedCall, agent: Agent | None, notes: list[str]) -> CaptureSession:
        session_key = _fit(call.session_key, 300, "session", notes)
        key = (call.format, session_key)
        session = self.sessions.get(key)
        if session is None:
            session, _ = CaptureSession.objects.get_or_create(
                team=self.team,
                format=call.format,
                session_key=session_key,
                defaults={"server_label": _fit(call.server_label, 200, "server_label", []), "agent": agent},
            )
            self.sessions[key] = session
        if session.agent_id is None and agent is not None:
            session.agent = agent
            CaptureSession.objects.filter(pk=session.pk, agent__isnull=True).update(agent=agent)
        return session

    def _remember_client(self, session_key: str, info: AgentInfo) -> None:
        """Record who opened a session even when this input holds none of its calls."""
        notes: list[str] = []
        agent = self._agent(info, None, notes)
        key = (self.job.format, _fit(session_key, 300, "session", notes))
        session = self.sessions.get(key)
        if session is None:
            session, _ = CaptureSession.objects.get_or_create(
                team=self.team, format=key[0], session_key=key[1], defaults={"agent": agent}
            )
            self.sessions[key] = session
        if session.agent_id is None and agent is not None:
            session.agent = agent
            CaptureSession.objects.filter(pk=session.pk, agent__isnull=True).update(agent=agent)

    def _prepare(self, call: ObservedCall) -> _NewCall:
        notes: list[str] = []
        request_ts = _parse_ts(call.request_ts)
        agent = self._agent(call.agent, request_ts, notes)
        session = self._session(call, agent, notes)
        if agent is None and session.agent_id is not None:
            # A later batch of a session (the proxy pushes in batches) no longer holds its
            # initialize; the session remembers who the client was.
            agent = session.agent
        bulk = find_bulk_arguments(call.arguments)
        reference = find_reference(call.arguments)
        server_label = _fit(call.server_label, 200, "server_label", notes)
        error = _db_safe_json(call.jsonrpc_error, notes, "jsonrpc_error") if call.jsonrpc_error else None
        row = ToolCall(
            team=self.team,
            dedupe_key=call.dedupe_key,
            source_format=call.format,
            job=self.job,
            session=session,
            agent=agent,
            server_label=server_label,
            server_id=self.servers.get(call.server_label),
            tool=_fit(call.tool, 200, "tool", notes),
            jsonrpc_id=_fit(_jsonrpc_id(call.jsonrpc_id), 100, "jsonrpc_id", notes),
            client_call_id=_fit(call.client_call_id, 200, "client_call_id", notes),
            claudecode_tool_use_id=_fit(call.claudecode_tool_use_id, 200, "tool_use_id", notes),
            request_ts=request_ts,
            response_ts=_parse_ts(call.response_ts),
            duration_ms=call.duration_ms,
            argument_bytes=call.arguments_raw_bytes,
            argument_sha256=call.arguments_sha256,
            is_error=call.is_error,
            jsonrpc_error=error,
            output_tokens=call.output_tokens,
            turn_output_tokens=call.turn_output_tokens,
            is_reference_call=reference is not None and not bulk,
            reference_key=_fit(reference[0], 60, "reference_key", notes) if reference else "",
            reference_value=_fit(reference[1], None, "reference_value", notes) if reference else "",
            bulk_count=len(bulk),
            server_reported_sha256=server_reported_sha256(call.result),
            capture_truncated=call.capture_truncated,
            redacted=call.redacted,
            unanswered=call.unanswered,
            ingest_notes=notes,
        )
        return _NewCall(call, row, bulk)

    def _store_bulk(self, created: list[_NewCall]) -> None:
        keep = self.capture.keep_bulk_content
        max_bytes = self.capture.max_content_bytes
        contents: dict[str, tuple[int, bool, str]] = {}
        for item in created:
            for arg in item.bulk:
                if not (keep and arg.content is not None and arg.sha256 and (arg.bytes or 0) <= max_bytes):
                    continue
                if not _text_is_db_safe(arg.content):
                    # The figures and hash are over the exact text; a stand-in copy would mislead.
                    item.row.ingest_notes.append(
                        f"content_not_kept:{arg.pointer[:200]}:unstorable_characters"
                    )
                    continue
                contents.setdefault(arg.sha256, (arg.bytes or 0, arg.kind == "array", arg.content))
        content_ids: dict[str, int] = {}
        if contents:
            known = set(
                BulkContent.objects.filter(team=self.team, sha256__in=list(contents)).values_list(
                    "sha256", flat=True
                )
            )
            BulkContent.objects.bulk_create(
                [
                    BulkContent(team=self.team, sha256=sha, bytes=size, is_array=is_array, text=text)
                    for sha, (size, is_array, text) in contents.items()
                    if sha not in known
                ],
                ignore_conflicts=True,
                batch_size=100,
            )
            content_ids = dict(
                BulkContent.objects.filter(team=self.team, sha256__in=list(contents)).values_list(
                    "sha256", "pk"
                )
            )
        rows: list[BulkArgument] = []
        noted: list[ToolCall] = []
        for item in created:
            truncated = set(item.observed.truncated_pointers)
            # The caller's stated hash is only in the arguments, which are not stored: keep it now.
            expectations = caller_expectations(item.observed.arguments, item.observed.meta, item.bulk)
            whole_call_truncated = item.observed.capture_truncated and not truncated
            for arg in item.bulk:
                pointer = arg.pointer
                if len(pointer) > 500:
                    pointer = pointer[:500]
                    item.row.ingest_notes.append("shortened:pointer")
                rows.append(
                    BulkArgument(
                        call_id=item.row.pk,
                        team=self.team,
                        pointer=_fit(pointer, 500, "pointer", item.row.ingest_notes),
                        kind=arg.kind,
                        bytes=arg.bytes or 0,
                        lines=arg.lines or 0,
                        sha256=arg.sha256 or "",
                        tokens=arg.tokens or 0,
                        ends_with_newline=bool(arg.ends_with_newline),
                        crlf_count=arg.crlf_count or 0,
                        elements=arg.elements,
                        content_id=content_ids.get(arg.sha256 or ""),
                        capture_truncated=whole_call_truncated or arg.pointer in truncated,
                        expected_sha256=expectations.get(arg.pointer, ("", ""))[0],
                        expected_source=expectations.get(arg.pointer, ("", ""))[1],
                    )
                )
            if item.row.ingest_notes:
                noted.append(item.row)
        BulkArgument.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
        for row in noted:
            ToolCall.objects.filter(pk=row.pk).update(ingest_notes=row.ingest_notes)

    def _link(self, created: list[_NewCall]) -> None:
        """Pair a proxy capture with the transcript's record of the same call (Claude Code tool-use id)."""
        proxy = {
            i.row.claudecode_tool_use_id: i.row.pk
            for i in created
            if i.row.source_format in PROXY_FORMATS and i.row.claudecode_tool_use_id
        }
        transcript = {
            i.row.client_call_id: i.row.pk
            for i in created
            if i.row.source_format == "claude-code" and i.row.client_call_id
        }
        pairs: dict[int, int] = {}  # transcript pk -> proxy pk
        if proxy:
            for pk, tool_use_id in (
                ToolCall.objects.filter(
                    team=self.team,
                    source_format="claude-code",
                    client_call_id__in=list(proxy),
                    linked_call=None,
                )
                .order_by("pk")
                .values_list("pk", "client_call_id")
            ):
                pairs.setdefault(pk, proxy[tool_use_id])
        if transcript:
            for pk, tool_use_id in (
                ToolCall.objects.filter(
                    team=self.team,
                    source_format__in=PROXY_FORMATS,
                    claudecode_tool_use_id__in=list(transcript),
                    linked_call=None,
                )
                .order_by("pk")
                .values_list("pk", "claudecode_tool_use_id")
            ):
                if transcript[tool_use_id] not in pairs:
                    pairs[transcript[tool_use_id]] = pk
        used_proxies: set[int] = set()
        for transcript_pk, proxy_pk in pairs.items():
            if proxy_pk in used_proxies:
                continue
            used_proxies.add(proxy_pk)
            ToolCall.objects.filter(pk=transcript_pk).update(linked_call_id=proxy_pk, counts_in_rollups=False)
            ToolCall.objects.filter(pk=proxy_pk).update(linked_call_id=transcript_pk)

    def _touch_agents_and_sessions(self, created: list[_NewCall]) -> None:
        spans: dict[tuple[str, int], list[datetime]] = {}
        for item in created:
            ts = item.row.request_ts
            if ts is None:
                continue
            for kind, pk in (("agent", item.row.agent_id), ("session", item.row.session_id)):
                if pk is None:
                    continue
                span = spans.setdefault((kind, pk), [ts, ts])
                span[0], span[1] = min(span[0], ts), max(span[1], ts)
        for (kind, pk), (first, last) in spans.items():
            if kind == "agent":
                Agent.objects.filter(pk=pk, first_seen__gt=first).update(first_seen=first)
                Agent.objects.filter(pk=pk, last_seen__lt=last).update(last_seen=last)
            else:
                CaptureSession.objects.filter(Q(first_ts=None) | Q(first_ts__gt=first), pk=pk).update(
                    first_ts=first
                )
                CaptureSession.objects.filter(Q(last_ts=None) | Q(last_ts__lt=last), pk=pk).update(
                    last_ts=last
                )

    # -- lines -------------------------------------------------------------------------------------

    def _ours(self, keys: Iterable[str]) -> None:
        missing = [k for k in keys if k not in self.key_ours]
        if missing:
            found = dict(
                ToolCall.objects.filter(team=self.team, dedupe_key__in=missing).values_list(
                    "dedupe_key", "job_id"
                )
            )
            for key in missing:
                self.key_ours[key] = found.get(key) == self.job.pk

    def _settle(self, outcomes: list[LineOutcome]) -> None:
        if not outcomes:
            return
        watermark = max(self.watermark, max(o.watermark for o in outcomes))
        self._ours({k for o in outcomes if o.status == CALL for k in o.call_keys})
        for outcome in outcomes:
            if outcome.agent is not None and outcome.session_key:
                self._remember_client(outcome.session_key, outcome.agent)
        records: list[LineRecord] = []
        for outcome in outcomes:
            if outcome.line_no in self.settled_above:
                self.settled_above.discard(outcome.line_no)
                continue
            reason = outcome.reason or ""
            if outcome.status == CALL:
                stored = any(self.key_ours.get(k) for k in outcome.call_keys)
                status = LineRecord.Status.STORED if stored else LineRecord.Status.DUPLICATE
                reason = "" if stored else "already_ingested"
            elif outcome.status == QUARANTINED:
                status = LineRecord.Status.QUARANTINED
                self.quarantined_reasons[reason] += 1
            else:
                status = LineRecord.Status.IGNORED
                self.ignored_reasons[reason] += 1
            self.counts[str(status)] += 1
            keep_row = status in (LineRecord.Status.QUARANTINED, LineRecord.Status.DUPLICATE)
            if keep_row or outcome.line_no > watermark:
                records.append(self._record(outcome, status, reason))
        LineRecord.objects.bulk_create(records, ignore_conflicts=True, batch_size=500)
        self.watermark = watermark

    def _record(self, outcome: LineOutcome, status: str, reason: str) -> LineRecord:
        raw_text, raw_data = "", None
        data = outcome.raw
        if data is not None:
            try:
                raw_text = data.decode("utf-8")
            except UnicodeDecodeError:
                raw_text = None  # type: ignore[assignment]
            if raw_text is None or "\x00" in raw_text:
                raw_text = data.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")
                raw_data = data
        return LineRecord(
            job=self.job,
            team=self.team,
            line_no=outcome.line_no,
            status=status,
            reason=reason[:200],
            raw=raw_text,
            raw_bytes=len(data) if data is not None else 0,
            raw_data=raw_data,
        )

    # -- progress ------------------------------------------------------------------------------------

    def _save_progress(self, bytes_done: int, **extra: Any) -> None:
        updated = IngestJob.objects.filter(pk=self.job.pk, run_token=self.token).update(
            **self.counts,
            lines_read=sum(self.counts.values()),
            calls_stored=self.calls_stored,
            ignored_reasons=dict(self.ignored_reasons),
            quarantined_reasons=dict(self.quarantined_reasons),
            watermark=self.watermark,
            bytes_done=bytes_done,
            heartbeat_at=timezone.now(),
            **extra,
        )
        if updated != 1:
            raise _LeaseLost()

    def finish(self, *, bytes_done: int, total_bytes: int, lines_in_input: int | None, final: bool) -> None:
        """Close the run: counts checked against the input, lease released; ``final`` = job done."""
        extra: dict[str, Any] = {"run_token": "", "total_bytes": total_bytes}
        settled = sum(self.counts.values())
        if final:
            extra.update(status=Status.DONE, finished=timezone.now(), verdict_counts=verdict_counts(self.job))
            self.calls_stored = ToolCall.objects.filter(job=self.job).count()
            if lines_in_input is not None and settled != lines_in_input:
                # Should never happen; say so loudly rather than show counts that do not add up.
                extra["error"] = f"accounting error: {lines_in_input} lines read but {settled} settled"
                logger.error("ingest job %s: %s", self.job.pk, extra["error"])
        self._save_progress(bytes_done, **extra)


def verdict_counts(job: IngestJob) -> dict[str, int]:
    """{verdict: n} over the job's bulk arguments ("pending" = not judged yet), plus ``by_reference``."""
    counts = {
        (row["verdict"] or "pending"): row["n"]
        for row in BulkArgument.objects.filter(call__job=job).values("verdict").annotate(n=Count("pk"))
    }
    by_reference = ToolCall.objects.filter(job=job, is_reference_call=True).count()
    if by_reference:
        counts["by_reference"] = by_reference
    return counts


def refresh_verdict_counts(job: IngestJob) -> IngestJob:
    """Recompute the job's verdict counts (for the fidelity step, once it has judged)."""
    IngestJob.objects.filter(pk=job.pk).update(verdict_counts=verdict_counts(job))
    job.refresh_from_db(fields=["verdict_counts"])
    return job


def _fail(job_id: int, token: str, exc: BaseException) -> None:
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    logger.exception("ingest job %s failed", job_id)
    IngestJob.objects.filter(pk=job_id, run_token=token).update(
        status=Status.FAILED, error=detail[:4000], finished=timezone.now(), run_token=""
    )


# -- running a job --------------------------------------------------------------------------------


def run_job(job_id: int) -> IngestJob:
    """Run or resume job ``job_id`` to the end of its file (see the module docstring).

    Returns the job as stored afterwards: done, failed (``error`` says why), or untouched when it
    was already done or another live run holds it. Raises IngestJob.DoesNotExist only.
    """
    job, token = _claim(job_id)
    if job is None:
        return IngestJob.objects.get(pk=job_id)
    try:
        _run(job, token)
    except _LeaseLost:
        logger.warning("ingest job %s was taken over by another run", job_id)
    except Exception as exc:  # a job must never take the worker down with it
        _fail(job_id, token, exc)
    return IngestJob.objects.get(pk=job_id)


def _run(job: IngestJob, token: str) -> None:
    try:
        raw, stream = _open(job.path)
    except OSError as exc:
        raise RuntimeError(f"cannot open {job.path}: {exc.strerror or exc}") from exc
    with raw, stream:
        total = os.fstat(raw.fileno()).st_size
        format, problem = (job.format, "") if job.format else _detect(stream)
        if not job.format:
            job.format = format
            IngestJob.objects.filter(pk=job.pk, run_token=token).update(format=format, total_bytes=total)
        lines = _Lines(stream, position=raw.tell)
        run = _Run(job, token)
        run.consume(_outputs(lines, format, skip_through_line=job.watermark, finish=True), lines)
        # A HAR's units are its entries (the parser numbers them); other formats are physical lines.
        units = run.watermark if format == "har" else lines.count
        run.finish(bytes_done=total, total_bytes=total, lines_in_input=units, final=True)
    if problem and lines.count:
        IngestJob.objects.filter(pk=job.pk).update(error=problem[:4000])


# -- watched files --------------------------------------------------------------------------------


def ingest_watched_file(watched: WatchedFile, *, final: bool = False) -> IngestJob | None:
    """Ingest ``watched``'s complete lines from its byte offset on; the watched-folder tail.

    Contract with the folder scanner (``ingest.tasks.scan_watched_folders``):

    - The scanner finds files, identifies each by ``(device, inode)`` (a rotated file keeps its
      inode under a new name: update ``path`` and keep tailing it; a new file at the old name is a
      new WatchedFile) and calls this for every file that grew (``size > offset``).
    - Only complete lines (up to the last ``\\n``) are read; ``offset`` ends at a line end and
      ``line_no`` counts the lines up to it. A file that shrank below ``offset`` (truncated in
      place) starts over with a new job; dedupe keys keep anything seen before from being stored
      twice.
    - One IngestJob per file (``watched.job``, source ``watch``) accumulates the counts; it stays
      ``running`` (without a lease) while the file is tailed. A request whose response has not
      been written yet keeps its lines pending, so each call is stored once, complete. The file
      is re-read from its start on each call (that is how pending requests and the session's
      client identity are rebuilt) but lines up to the job's watermark are not settled again.
    - ``final=True`` (the file was rotated away and is quiet, or deleted) ends the input: requests
      still unanswered are stored as such and the job is marked done.

    Returns the job, or None when the path no longer holds this file (the scanner re-identifies
    it) or another run holds the job's lease.
    """
    try:
        raw = open(watched.path, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return None
    with raw:
        st = os.fstat(raw.fileno())
        if (st.st_dev, st.st_ino) != (watched.device, watched.inode):
            return None
        size = st.st_size
        folder = watched.folder
        if watched.job_id is not None and size < watched.offset:
            # Truncated in place: the old content is gone, so its job ends here.
            IngestJob.objects.filter(pk=watched.job_id, status=Status.RUNNING, run_token="").update(
                status=Status.DONE, finished=timezone.now()
            )
            watched.job = None
            watched.offset = watched.line_no = 0
        if watched.job is None:
            watched.job = create_job(
                folder.team,
                source=IngestJob.Source.WATCH,
                filename=os.path.basename(watched.path),
                path=watched.path,
                format=folder.format,
            )
            watched.save(update_fields=["job", "offset", "line_no"])
        # The final read takes the whole file: a last line without its newline is still a line.
        end = size if final else _last_line_end(raw, watched.offset, size)
        if end <= watched.offset and not final:
            WatchedFile.objects.filter(pk=watched.pk).update(size_seen=size, last_read_at=timezone.now())
            return watched.job
        job, token = _claim(watched.job.pk)
        if job is None:
            return None
        try:
            raw.seek(0)
            format, problem = (job.format, "") if job.format else _detect(raw)
            if not job.format:
                job.format = format
                IngestJob.objects.filter(pk=job.pk).update(format=format)
            raw.seek(0)
            lines = _Lines(raw, limit=end)
            run = _Run(job, token)
            run.consume(_outputs(lines, format, skip_through_line=job.watermark, finish=final), lines)
            units = run.watermark if format == "har" else lines.count
            run.finish(bytes_done=end, total_bytes=end, lines_in_input=units if final else None, final=final)
            if not final:
                IngestJob.objects.filter(pk=job.pk).update(status=Status.RUNNING)
            if problem:
                IngestJob.objects.filter(pk=job.pk).update(error=problem[:4000])
        except _LeaseLost:
            return None
        except Exception as exc:
            _fail(job.pk, token, exc)
            return IngestJob.objects.get(pk=job.pk)
        WatchedFile.objects.filter(pk=watched.pk).update(
            offset=end, line_no=lines.count, size_seen=size, last_read_at=timezone.now()
        )
        watched.offset, watched.line_no, watched.size_seen = end, lines.count, size
        return IngestJob.objects.get(pk=job.pk)


def _last_line_end(raw: IO[bytes], offset: int, size: int) -> int:
    """Offset just after the last ``\\n`` in the file at or after ``offset`` (``offset`` if none)."""
    position = size
    chunk = 64 * 1024
    while position > offset:
        start = max(offset, position - chunk)
        raw.seek(start)
        data = raw.read(position - start)
        index = data.rfind(b"\n")
        if index >= 0:
            return start + index + 1
        position = start
    return offset


__all__ = [
    "UploadTooLarge",
    "create_job",
    "enqueue_job",
    "ingest_bytes",
    "ingest_path",
    "ingest_watched_file",
    "refresh_verdict_counts",
    "run_job",
    "server_reported_sha256",
    "store_upload",
    "verdict_counts",
]
