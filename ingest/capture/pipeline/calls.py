"""Storing a batch of calls: ToolCall rows with their agents and sessions, bulk arguments and their
contents, and the pairing of a proxy capture with the transcript's record of the same call.

Calls are deduplicated per team by ``dedupe_key``; ``key_ours`` remembers, per key, whether this
job stored the call (a call stored by an earlier, killed run of the same job is still ours).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from dashboard.servers.models import McpServer
from ingest.capture.expectations import caller_expectations
from ingest.capture.models import (
    Agent,
    BulkArgument,
    BulkContent,
    CaptureSession,
    IngestJob,
    TeamCaptureSettings,
    ToolCall,
)
from ingest.capture.pipeline.values import (
    db_safe_json,
    fit,
    jsonrpc_id_text,
    parse_ts,
    server_reported_sha256,
    text_is_db_safe,
)
from mcptax.bulk import BulkArg, find_bulk_arguments, find_reference, resolve_pointer, text_figures
from mcptax.formats.records import PROXY_FORMATS, AgentInfo, ObservedCall


@dataclass
class _NewCall:
    observed: ObservedCall
    row: ToolCall
    bulk: list[BulkArg]


class CallStore:
    """Writes the calls of one job's run, caching the team's agents, sessions and servers."""

    # Forget the ownership of old keys past this many; a miss just costs one query.
    KEY_CACHE_LIMIT = 200_000

    def __init__(self, job: IngestJob) -> None:
        self.job = job
        self.team = job.team
        self.capture = TeamCaptureSettings.for_team(self.team)
        self.servers = dict(McpServer.objects.filter(team=self.team).values_list("name", "id"))
        self.agents: dict[tuple[str, str, str, str], Agent] = {}
        self.sessions: dict[tuple[str, str], CaptureSession] = {}
        self.key_ours: dict[str, bool] = {}
        self.calls_stored = job.calls_stored

    def store(self, calls: list[ObservedCall]) -> list[int]:
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
        family = fit(info.family, 60, "agent", notes) or "unknown"
        name = fit(info.name, 200, "agent", notes)
        version = fit(info.version, 100, "agent", notes)
        title = fit(info.title, 200, "agent", notes)
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
        session_key = fit(call.session_key, 300, "session", notes)
        key = (call.format, session_key)
        session = self.sessions.get(key)
        if session is None:
            session, _ = CaptureSession.objects.get_or_create(
                team=self.team,
                format=call.format,
                session_key=session_key,
                defaults={"server_label": fit(call.server_label, 200, "server_label", []), "agent": agent},
            )
            self.sessions[key] = session
        if session.agent_id is None and agent is not None:
            session.agent = agent
            CaptureSession.objects.filter(pk=session.pk, agent__isnull=True).update(agent=agent)
        return session

    def remember_client(self, session_key: str, info: AgentInfo) -> None:
        """Record who opened a session even when this input holds none of its calls."""
        notes: list[str] = []
        agent = self._agent(info, None, notes)
        key = (self.job.format, fit(session_key, 300, "session", notes))
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
        request_ts = parse_ts(call.request_ts)
        agent = self._agent(call.agent, request_ts, notes)
        session = self._session(call, agent, notes)
        if agent is None and session.agent_id is not None:
            # A later batch of a session (the proxy pushes in batches) no longer holds its
            # initialize; the session remembers who the client was.
            agent = session.agent
        bulk = find_bulk_arguments(call.arguments)
        bulk += _cut_strings(call, {b.pointer for b in bulk})
        reference = find_reference(call.arguments)
        server_label = fit(call.server_label, 200, "server_label", notes)
        error = db_safe_json(call.jsonrpc_error, notes, "jsonrpc_error") if call.jsonrpc_error else None
        row = ToolCall(
            team=self.team,
            dedupe_key=call.dedupe_key,
            source_format=call.format,
            job=self.job,
            session=session,
            agent=agent,
            server_label=server_label,
            server_id=self.servers.get(call.server_label),
            tool=fit(call.tool, 200, "tool", notes),
            jsonrpc_id=fit(jsonrpc_id_text(call.jsonrpc_id), 100, "jsonrpc_id", notes),
            client_call_id=fit(call.client_call_id, 200, "client_call_id", notes),
            claudecode_tool_use_id=fit(call.claudecode_tool_use_id, 200, "tool_use_id", notes),
            request_ts=request_ts,
            response_ts=parse_ts(call.response_ts),
            duration_ms=call.duration_ms,
            argument_bytes=call.arguments_raw_bytes,
            argument_sha256=call.arguments_sha256,
            is_error=call.is_error,
            jsonrpc_error=error,
            output_tokens=call.output_tokens,
            turn_output_tokens=call.turn_output_tokens,
            output_tokens_estimated=call.output_tokens_estimated,
            is_reference_call=reference is not None and not bulk,
            reference_key=fit(reference[0], 60, "reference_key", notes) if reference else "",
            reference_value=fit(reference[1], None, "reference_value", notes) if reference else "",
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
                if not text_is_db_safe(arg.content):
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
                        pointer=fit(pointer, 500, "pointer", item.row.ingest_notes),
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


def _cut_strings(call: ObservedCall, found_already: set[str]) -> list[BulkArg]:
    """The strings a capture cut that are too short to be found as bulk arguments: the value the
    cut went through was bulk (the capturing tool only cuts large frames), so it is recorded with
    the bytes seen, to be judged ``capture_truncated``."""
    found: list[BulkArg] = []
    for pointer in call.truncated_pointers:
        if pointer in found_already:
            continue
        try:
            value = resolve_pointer(call.arguments, pointer)
        except (KeyError, IndexError, ValueError):
            continue
        if isinstance(value, str):
            found.append(BulkArg(pointer, "string", content=value, **asdict(text_figures(value))))
    return found
