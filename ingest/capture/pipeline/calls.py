"""Storing a batch of calls: ToolCall rows with their agents and sessions, bulk arguments and their
contents, and the pairing of a proxy capture with the transcript's record of the same call.

Calls are deduplicated per team by ``dedupe_key``; ``key_ours`` remembers, per key, whether this
job stored the call (a call stored by an earlier, killed run of the same job is still ours).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.servers.models import McpServer
from ingest import bulkwrite
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
from ingest.capture.pipeline.fidelity_step import FidelityStep
from ingest.capture.pipeline.figures import call_figures
from ingest.capture.pipeline.links import link_calls
from ingest.capture.pipeline.values import (
    db_safe_json,
    fit,
    jsonrpc_id_text,
    parse_ts,
    server_reported_sha256,
    stored_arguments,
)
from ingest.capture.signals import calls_storing
from mcptax.bulk import BulkArg, find_reference
from mcptax.formats.records import AgentInfo, ObservedCall


@dataclass
class _NewCall:
    observed: ObservedCall
    row: ToolCall
    bulk: list[BulkArg]  # one per stored pointer (``pointers``), in the order found
    pointers: list[str]
    kept: list[bool]  # whether the argument's content is stored


class CallStore:
    """Writes the calls of one job's run, caching the team's agents, sessions and servers.

    A batch costs a constant number of statements whatever its size: the new ToolCalls, contents
    and BulkArguments are each written with one ``COPY`` on PostgreSQL (``bulkwrite``), each
    content once per sha256, and sessions, agents' and sessions' time spans in one statement each.
    """

    # Forget the ownership of old keys past this many; a miss just costs one query.
    KEY_CACHE_LIMIT = 200_000

    def __init__(self, job: IngestJob, fidelity: FidelityStep) -> None:
        self.job = job
        self.fidelity = fidelity
        self.team = job.team
        self.capture = TeamCaptureSettings.for_team(self.team)
        self.servers = dict(McpServer.objects.filter(team=self.team).values_list("name", "id"))
        self.agents: dict[tuple[str, str, str, str], Agent] = {}
        self.sessions: dict[tuple[str, str], CaptureSession] = {}
        self.key_ours: dict[str, bool] = {}
        self.calls_stored = job.calls_stored
        self.use_copy = bulkwrite.copy_supported()
        # {content id: text} of the contents the last batch's calls point at, for the fidelity step.
        self.contents: dict[int, str] = {}
        # The rows of the last batch's new calls and their arguments, as written.
        self.rows: list[ToolCall] = []
        self.arguments: list[BulkArgument] = []

    def ensure_parties(
        self,
        calls: list[ObservedCall],
        clients: list[tuple[str, AgentInfo]],
        discovered: list[tuple[str, str]],
    ) -> None:
        """Create the agents and sessions a batch will point at, before its transaction and in
        sorted order: each is committed at once, so two runs writing batches of one team side by
        side (the ranges of a file) never wait for each other's uncommitted agent or session
        while holding their own (a deadlock on ``unique_agent``). ``clients``: (session key,
        agent) of the batch's lines that name a session's client; ``discovered``: (format,
        session key) of its discovery records. The same rows the batch would create itself (a new
        agent starts at its first new call's time, widened by the stored calls as before); calls
        already stored create nothing."""
        by_key: dict[str, ObservedCall] = {}
        for call in calls:
            by_key.setdefault(call.dedupe_key, call)
        existing = self._existing(list(by_key))
        new = [call for key, call in by_key.items() if key not in existing]
        first: dict[tuple[str, str, str, str], tuple[AgentInfo, datetime | None]] = {}
        for call in new:
            if call.agent is not None:
                first.setdefault(self._agent_key(call.agent, []), (call.agent, parse_ts(call.request_ts)))
        for _, info in clients:
            first.setdefault(self._agent_key(info, []), (info, None))
        for key in sorted(k for k in first if k not in self.agents):
            self._agent(*first[key], [])
        self._load_sessions(new)
        for format, session_key in sorted(set(discovered)):
            self.session_for(format, session_key)
        for session_key, info in sorted(clients, key=lambda pair: pair[0]):
            self.remember_client(session_key, info)

    def _existing(self, keys: list[str]) -> dict[str, tuple[int, int]]:
        """``{dedupe key: (call id, job id)}`` of the calls of the team among ``keys``."""
        return {
            key: (pk, job_id)
            for key, pk, job_id in ToolCall.objects.filter(team=self.team, dedupe_key__in=keys).values_list(
                "dedupe_key", "pk", "job_id"
            )
        }

    def store(self, calls: list[ObservedCall]) -> list[int]:
        """Store the calls not in the team yet; returns the ids of this job's calls among them."""
        self.forget_batch()
        by_key: dict[str, ObservedCall] = {}
        for call in calls:
            by_key.setdefault(call.dedupe_key, call)
        if not by_key:
            return []
        if len(self.key_ours) > self.KEY_CACHE_LIMIT:
            self.key_ours.clear()
        signal_ids: list[int] = []
        new: list[ObservedCall] = []
        existing = self._existing(list(by_key))
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
        self._load_sessions(new)
        prepared = [self._prepare(call) for call in new]
        contents = self._batch_contents(prepared)
        content_ids = self._store_contents(contents)
        self.contents = {
            content_ids[sha]: text for sha, (_, _, text) in contents.items() if sha in content_ids
        }
        written = self._write_at_once(prepared, content_ids) if self.use_copy else None
        created = written if written is not None else self._write_in_steps(prepared, content_ids)
        signal_ids.extend(item.row.pk for item in created)
        self.calls_stored += len(created)
        self._touch_agents_and_sessions(created)
        return signal_ids

    def forget_batch(self) -> None:
        self.contents, self.rows, self.arguments = {}, [], []

    def _storing(self, calls: list[ToolCall], arguments: list[BulkArgument], *, written: bool) -> None:
        self.rows, self.arguments = calls, arguments
        # The fidelity step judges and rolls up the batch here, in its transaction; then the
        # extension point (docs/architecture.md).
        self.fidelity.storing(self.team, calls, arguments, self.contents, written=written)
        calls_storing.send(
            sender=IngestJob,
            team=self.team,
            calls=calls,
            arguments=arguments,
            contents=self.contents,
            written=written,
        )

    def _write_at_once(self, prepared: list[_NewCall], content_ids: dict[str, int]) -> list[_NewCall] | None:
        """COPY (PostgreSQL): the ids are reserved, so the rows are complete, verdicts and rollups
        included (``calls_storing``), before each table is written once. None, with nothing of it
        kept, when a concurrent run stored one of the calls first."""
        rows = [p.row for p in prepared]
        call_ids, argument_ids = bulkwrite.reserve_many(
            [(ToolCall, len(rows)), (BulkArgument, sum(len(p.bulk) for p in prepared))]
        )
        for row, pk in zip(rows, call_ids, strict=True):
            row.pk = pk
        arguments = self._argument_rows(prepared, content_ids)  # made once the calls have their ids
        for argument, pk in zip(arguments, argument_ids, strict=True):
            argument.pk = pk
        mark = bulkwrite.later_mark()
        try:
            with transaction.atomic():  # a savepoint: the links and rollups go if the calls do
                link_calls(self.team, rows, written=False)
                self._storing(rows, arguments, written=False)
                bulkwrite.copy_rows(ToolCall, rows, savepoint=False)
                bulkwrite.copy_rows(BulkArgument, arguments, savepoint=False)
        except IntegrityError:
            bulkwrite.later_drop(mark)  # the rollups of the rows not written
            for row in rows:
                row.pk, row.linked_call_id, row.counts_in_rollups, row.in_rollups = None, None, True, False
            return None
        for item in prepared:
            self.key_ours[item.observed.dedupe_key] = True
        return prepared

    def _write_in_steps(self, prepared: list[_NewCall], content_ids: dict[str, int]) -> list[_NewCall]:
        """INSERTs (SQLite, or a COPY refused): the calls, then their arguments, then verdicts and
        rollups of the stored rows."""
        created = self._insert_calls(prepared)
        link_calls(self.team, [i.row for i in created], written=True)
        arguments = self._argument_rows(created, content_ids)
        BulkArgument.objects.bulk_create(arguments, batch_size=500)
        if any(a.pk is None for a in arguments):  # a database that does not return the ids
            ids = {
                (call_id, pointer): pk
                for pk, call_id, pointer in BulkArgument.objects.filter(
                    call_id__in=[i.row.pk for i in created]
                ).values_list("pk", "call_id", "pointer")
            }
            for argument in arguments:
                argument.pk = ids[(argument.call_id, argument.pointer)]
        self._storing([i.row for i in created], arguments, written=True)
        return created

    def _insert_calls(self, prepared: list[_NewCall]) -> list[_NewCall]:
        """Insert the rows; returns those this job stored (not those a concurrent run stored first)."""
        rows = [p.row for p in prepared]
        ToolCall.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
        inserted = {
            key: (pk, job_id)
            for key, pk, job_id in ToolCall.objects.filter(
                team=self.team, dedupe_key__in=[r.dedupe_key for r in rows]
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
        return created

    def _agent_key(self, info: AgentInfo, notes: list[str]) -> tuple[str, str, str, str]:
        family = fit(info.family, 60, "agent", notes) or "unknown"
        name = fit(info.name, 200, "agent", notes)
        version = fit(info.version, 100, "agent", notes)
        title = fit(info.title, 200, "agent", notes)
        return (family, name, version, title)

    def _agent(self, info: AgentInfo | None, ts: datetime | None, notes: list[str]) -> Agent | None:
        if info is None:
            return None
        key = self._agent_key(info, notes)
        family, name, version, title = key
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

    def _session_key(self, call: ObservedCall, notes: list[str]) -> tuple[str, str]:
        return (call.format, fit(call.session_key, 300, "session", notes))

    def _load_sessions(self, calls: list[ObservedCall]) -> None:
        """Bring the sessions of these calls into the cache: one query, and one insert for the new."""
        wanted: dict[tuple[str, str], ObservedCall] = {}
        for call in calls:
            key = self._session_key(call, [])
            if key not in self.sessions:
                wanted.setdefault(key, call)
        if not wanted:
            return

        def fetch() -> None:
            for session in CaptureSession.objects.filter(
                team=self.team,
                format__in={f for f, _ in wanted},
                session_key__in={k for _, k in wanted},
            ):
                key = (session.format, session.session_key)
                if key in wanted:
                    self.sessions[key] = session

        fetch()
        missing = sorted(key for key in wanted if key not in self.sessions)  # one order for every run
        if not missing:
            return
        rows = []
        for key in missing:
            call = wanted[key]
            rows.append(
                CaptureSession(
                    team=self.team,
                    format=key[0],
                    session_key=key[1],
                    server_label=fit(call.server_label, 200, "server_label", []),
                    agent=self._agent(call.agent, parse_ts(call.request_ts), []),
                )
            )
        CaptureSession.objects.bulk_create(rows, ignore_conflicts=True)
        fetch()

    def _session(self, call: ObservedCall, agent: Agent | None, notes: list[str]) -> CaptureSession:
        key = self._session_key(call, notes)
        session = self.sessions.get(key)
        if session is None:
            session, _ = CaptureSession.objects.get_or_create(
                team=self.team,
                format=key[0],
                session_key=key[1],
                defaults={"server_label": fit(call.server_label, 200, "server_label", []), "agent": agent},
            )
            self.sessions[key] = session
        if session.agent_id is None and agent is not None:
            session.agent = agent
            CaptureSession.objects.filter(pk=session.pk, agent__isnull=True).update(agent=agent)
        return session

    def session_for(self, format: str, session_key: str) -> CaptureSession:
        """The session of discovery records (created when no call of it was stored yet)."""
        key = (format, fit(session_key, 300, "session", []))
        session = self.sessions.get(key)
        if session is None:
            session, _ = CaptureSession.objects.get_or_create(
                team=self.team, format=key[0], session_key=key[1]
            )
            self.sessions[key] = session
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
        bulk = call_figures(call)
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
            no_content=call.no_content,
            ingest_notes=notes,
        )
        stored, pointers, kept = stored_arguments(self.capture, bulk, notes)
        return _NewCall(call, row, stored, pointers, kept)

    def _batch_contents(self, prepared: list[_NewCall]) -> dict[str, tuple[int, bool, str]]:
        """``{sha256: (bytes, is_array, text)}`` of the contents the batch keeps."""
        contents: dict[str, tuple[int, bool, str]] = {}
        for item in prepared:
            for arg, kept in zip(item.bulk, item.kept, strict=True):
                if kept and arg.sha256 and arg.content is not None:
                    contents.setdefault(arg.sha256, (arg.bytes or 0, arg.kind == "array", arg.content))
        return contents

    def _argument_rows(self, created: list[_NewCall], content_ids: dict[str, int]) -> list[BulkArgument]:
        rows: list[BulkArgument] = []
        for item in created:
            truncated = set(item.observed.truncated_pointers)
            # The caller's stated hash is only in the arguments, which are not stored: keep it now.
            expectations = caller_expectations(item.observed.arguments, item.observed.meta, item.bulk)
            whole_call_truncated = item.observed.capture_truncated and not truncated
            for arg, pointer, kept in zip(item.bulk, item.pointers, item.kept, strict=True):
                expected = expectations.get(arg.pointer, ("", ""))
                rows.append(
                    BulkArgument(
                        call=item.row,
                        team=self.team,
                        pointer=pointer,
                        kind=arg.kind,
                        bytes=arg.bytes or 0,
                        lines=arg.lines or 0,
                        sha256=arg.sha256 or "",
                        tokens=arg.tokens or 0,
                        ends_with_newline=bool(arg.ends_with_newline),
                        crlf_count=arg.crlf_count or 0,
                        elements=arg.elements,
                        content_id=content_ids.get(arg.sha256 or "") if kept else None,
                        capture_truncated=whole_call_truncated or arg.pointer in truncated,
                        expected_sha256=expected[0],
                        expected_source=expected[1],
                    )
                )
        return rows

    def _store_contents(self, contents: dict[str, tuple[int, bool, str]]) -> dict[str, int]:
        """``{sha256: content id}``: each content of the batch looked up once and written once if new."""
        if not contents:
            return {}
        found = dict(
            BulkContent.objects.filter(team=self.team, sha256__in=list(contents)).values_list("sha256", "pk")
        )
        missing = [
            BulkContent(team=self.team, sha256=sha, bytes=size, is_array=is_array, text=text)
            for sha, (size, is_array, text) in contents.items()
            if sha not in found
        ]
        if not missing:
            return found
        if self.use_copy:
            for row, pk in zip(missing, bulkwrite.reserve_ids(BulkContent, len(missing)), strict=True):
                row.pk = pk
            if bulkwrite.copy_rows(BulkContent, missing):
                return found | {row.sha256: row.pk for row in missing}
            for row in missing:  # stored meanwhile by a concurrent run: the read-back finds it
                row.pk = None
        BulkContent.objects.bulk_create(missing, ignore_conflicts=True, batch_size=100)
        return dict(
            BulkContent.objects.filter(team=self.team, sha256__in=list(contents)).values_list("sha256", "pk")
        )

    def _touch_agents_and_sessions(self, created: list[_NewCall]) -> None:
        """Widen the agents' and sessions' first/last seen to this batch's calls: one statement each."""
        agents: dict[int, tuple[datetime, datetime]] = {}
        sessions: dict[int, tuple[datetime, datetime]] = {}
        for item in created:
            ts = item.row.request_ts
            if ts is None:
                continue
            for spans, pk in ((agents, item.row.agent_id), (sessions, item.row.session_id)):
                if pk is not None:
                    first, last = spans.get(pk, (ts, ts))
                    spans[pk] = (min(first, ts), max(last, ts))
        bulkwrite.later(lambda: bulkwrite.widen_spans(Agent, agents, "first_seen", "last_seen"))
        bulkwrite.later(lambda: bulkwrite.widen_spans(CaptureSession, sessions, "first_ts", "last_ts"))
