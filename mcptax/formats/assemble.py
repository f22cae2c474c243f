"""Turn LineEvents into ObservedCalls and one LineOutcome per input line.

Output contract (what the Django layer relies on):

- Every line number read yields exactly one ``LineOutcome``: ``call`` (with the dedupe keys of
  the calls it formed), ``ignored`` or ``quarantined`` (with a reason). So
  ``read == stored + duplicate + ignored + quarantined`` where stored/duplicate split the
  ``call`` lines by whether any of their ``call_keys`` was new.
- An ``ObservedCall`` is always yielded before the outcomes of the lines that formed it.
- A call is yielded once its response is seen (transcripts: also once its turn's output tokens
  are final); requests still unanswered at the end of input are yielded then, response fields
  None and ``unanswered=True``.
- The order of everything yielded depends only on the input, so a re-run yields the same items.

Resuming after a kill: re-read the input from the start (the assembler's state, e.g. pending
requests and the session's ``initialize``, is rebuilt that way) with
``assemble(..., skip_through_line=W)`` where W is the last persisted ``LineOutcome.watermark``.
Outcomes of lines <= W and calls whose first line is <= W are then not yielded (they were
persisted before the kill: a call is always persisted before its lines' outcomes). Outcomes of
lines > W may have been persisted too (they are emitted out of line order), so persist them
idempotently keyed by line number; a re-yielded call straddling W is already stored, under the
same dedupe key, by this same ingest.

Dedupe keys are sha256 over identity independent of the log's format: for proxy captures
(envelope, HAR) session, connection, JSON-RPC id, sha256 of the canonical request and the
occurrence number of that identity in the input (so a client reusing an id for an identical
request still yields two calls); for transcripts session and the client's call id.

Output tokens (transcripts): the turn's ``output_tokens`` (Claude Code: the largest among the
usage copies of ``message.id``; Codex: the ``token_count`` after the calls) are split across all
tool calls of the turn, MCP and built-in, in proportion to their argument bytes (largest
remainder, so the parts sum to the turn total); text the model wrote besides the calls is not
separated out. The whole figure is kept in ``turn_output_tokens``. A Claude Code figure below the
cl100k tokens of the turn's own tool inputs is replaced by those counted tokens (each call its
own) and the calls are marked ``output_tokens_estimated``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from mcptax.fastjson import canonical_bytes
from mcptax.formats.measures import duration_between, turn_shares
from mcptax.formats.pending import LineState, PendingCall, Turn
from mcptax.formats.records import (
    CALL,
    DUPLICATE,
    FRAME,
    IGNORED,
    RAW_ARGUMENT_FORMATS,
    SESSION_TURN_FORMATS,
    TRANSCRIPT_FORMATS,
    AgentInfo,
    Discovered,
    Frame,
    LineEvent,
    LineOutcome,
    ObservedCall,
    agent_from_client_info,
    canonical,
    sha256_hex,
    utf8,
)

CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo"

# (session key, connection, direction, canonical JSON-RPC id): what pairs a response with its request.
PairKey = tuple[str, str, str, str]
TOOL_USE_ID_META_KEY = "claudecode/toolUseId"

Output = ObservedCall | LineOutcome | Discovered


def _ends_call(frame: Frame, earlier: Frame) -> bool:
    return frame.duration_ms is not None and earlier.duration_ms is None


class CallAssembler:
    """Stateful assembler for one input file of one format (see module docstring)."""

    def __init__(self, format: str) -> None:
        self.format = format
        self.is_transcript = format in TRANSCRIPT_FORMATS
        self._lines: dict[int, LineState] = {}
        self._done_above_watermark: set[int] = set()
        self.watermark = 0
        self._calls: dict[PairKey, PendingCall] = {}
        self._other_requests: dict[PairKey, str] = {}
        self._occurrences: Counter[str] = Counter()
        self._client_info: dict[str, AgentInfo] = {}
        self._server_info: dict[str, dict[str, Any]] = {}
        self._turns: dict[tuple[str, str], Turn] = {}
        self._open_turn_by_chain: dict[str, Turn] = {}
        self._seen_frames: set[tuple[str, int]] = set()
        # Cut requests whose id was lost, per (session, connection), waiting for a response.
        self._idless: dict[tuple[str, str], list[tuple[Frame, int]]] = {}

    # -- public API ----------------------------------------------------------------------------

    def feed(self, event: LineEvent) -> list[Output]:
        """Consume one LineEvent; return what became final because of it, in order."""
        out: list[Output] = list(self._discovered(event))
        if event.status != FRAME:
            self._lines[event.line_no] = LineState(open=False, reasons=[event.reason or event.status])
            self._settle(event.line_no, out, status=event.status, raw=event.raw)
            return out
        frame_keys = {(f.session_key, f.seq) for f in event.frames if f.seq is not None}
        if frame_keys and frame_keys <= self._seen_frames:
            self._lines[event.line_no] = LineState(open=False, reasons=["duplicate_frame"])
            self._settle(event.line_no, out, status=DUPLICATE)
            return out
        self._seen_frames.update(frame_keys)
        self._lines[event.line_no] = state = LineState()
        for frame in event.frames:
            try:
                self._frame(frame, event.line_no, out)
            except (TypeError, ValueError, RecursionError):  # never let one odd message stop an ingest
                state.reasons.append("unprocessable_message")
        state.open = False
        self._settle(event.line_no, out)
        return out

    def _discovered(self, event: LineEvent) -> Iterator[Discovered]:
        by_session: dict[str, list[Any]] = {}
        for session, record in event.discovery:
            by_session.setdefault(session, []).append(record)
        for session, records in by_session.items():
            yield Discovered(self.format, event.line_no, session, tuple(records))

    def finish(self) -> list[Output]:
        """End of input: close open turns, emit unanswered requests, settle every line."""
        out: list[Output] = []
        for turn in list(self._turns.values()):
            self._close_turn(turn, out)
        for call in list(self._calls.values()):
            self._emit(call, out)
        for _, line_no in (item for waiting in self._idless.values() for item in waiting):
            self._lines[line_no].pending -= 1
            self._note(line_no, "truncated_unpaired")
        for line_no in sorted(self._lines):  # defensive: nothing should be left
            state = self._lines[line_no]
            state.pending = 0
            if not state.call_keys and not state.reasons:
                state.reasons.append("unresolved")
            self._settle(line_no, out)
        return out

    # -- lines ---------------------------------------------------------------------------------

    def _settle(
        self, line_no: int, out: list[Output], status: str | None = None, raw: bytes | None = None
    ) -> None:
        state = self._lines.get(line_no)
        if state is None or state.open or state.pending > 0:
            return
        del self._lines[line_no]
        if status is None:
            status = CALL if state.call_keys else IGNORED
        reason = None if status == CALL else (state.reasons[0] if state.reasons else "not_a_tool_call")
        self._done_above_watermark.add(line_no)
        while self.watermark + 1 in self._done_above_watermark:
            self.watermark += 1
            self._done_above_watermark.discard(self.watermark)
        keys = tuple(dict.fromkeys(state.call_keys))
        outcome = LineOutcome(line_no, status, reason, keys, raw, self.watermark)  # type: ignore[arg-type]
        if state.context is not None:
            outcome.session_key, outcome.agent = state.context
        out.append(outcome)

    def _note(self, line_no: int, reason: str) -> None:
        self._lines[line_no].reasons.append(reason)

    # -- frames --------------------------------------------------------------------------------

    def _frame(self, frame: Frame, line_no: int, out: list[Output]) -> None:
        if self.is_transcript and frame.chain is not None:
            self._track_turn_chain(frame, out)
        if frame.kind == "request":
            self._request(frame, line_no, out)
        elif frame.kind == "response":
            self._response(frame, line_no, out)
        elif frame.kind == "usage":
            self._usage(frame, out)
            self._note(line_no, "token_count" if self.format in SESSION_TURN_FORMATS else "not_a_tool_call")
        elif frame.kind == "notification":
            self._note(line_no, "notification")
        else:
            self._note(line_no, "meta")

    def _pair_key(self, frame: Frame, direction: str) -> PairKey:
        message = frame.message or {}
        return (frame.session_key, frame.conn_id, direction, canonical(message.get("id")))

    def _request(self, frame: Frame, line_no: int, out: list[Output]) -> None:
        message = frame.message or {}
        method = message.get("method")
        key = self._pair_key(frame, frame.direction)
        params = message.get("params")
        if method == "initialize":
            agent = agent_from_client_info(
                params.get("clientInfo") if isinstance(params, dict) else None, "initialize"
            )
            if agent is not None:
                self._client_info[frame.session_key] = agent
                self._lines[line_no].context = (frame.session_key, agent)
            self._other_requests[key] = "initialize"
            self._note(line_no, "session_context")
            return
        if "id" not in message:
            self._idless.setdefault((frame.session_key, frame.conn_id), []).append((frame, line_no))
            self._lines[line_no].pending += 1
            return
        if method != "tools/call":
            self._other_requests[key] = str(method)
            if self.is_transcript:
                self._register_in_turn(frame, None)
            self._note(line_no, "not_a_tool_call")
            return
        if (
            not isinstance(params, dict)
            or not isinstance(params.get("name"), str)
            or not isinstance(params.get("arguments", {}), dict)
        ):
            self._note(line_no, "invalid_tools_call")
            return

        existing = self._calls.get(key)
        if existing is not None:
            if self.is_transcript and existing.request.message == message:
                # The same tool_use written twice: one call, formed by both lines.
                existing.lines.append(line_no)
                self._lines[line_no].pending += 1
                return
            # A proxy saw the id reused while still pending: the earlier request got no answer.
            self._emit(existing, out)
        call = PendingCall(request=frame, lines=[line_no], dedupe_key=self._dedupe_key(frame))
        self._calls[key] = call
        self._lines[line_no].pending += 1
        if self.is_transcript:
            call.attributed = False
            self._register_in_turn(frame, call)

    def _response(self, frame: Frame, line_no: int, out: list[Output]) -> None:
        opposite = "c2s" if frame.direction == "s2c" else "s2c"
        key = self._pair_key(frame, opposite)
        call = self._calls.get(key)
        if call is not None and not call.responded:
            call.response = frame
            call.responded = True
            call.lines.append(line_no)
            self._lines[line_no].pending += 1
            if call.attributed:
                self._emit(call, out)
            return
        if call is not None and call.response is not None and _ends_call(frame, call.response):
            call.response = frame  # the record of the call's end says more than its output
            call.lines.append(line_no)
            self._lines[line_no].pending += 1
            return
        if call is not None:
            self._note(line_no, "duplicate_response")
            return
        method = self._other_requests.pop(key, None)
        if method == "initialize":
            result = (frame.message or {}).get("result")
            if isinstance(result, dict) and isinstance(result.get("serverInfo"), dict):
                self._server_info[frame.session_key] = result["serverInfo"]
            self._note(line_no, "session_context")
        elif method is not None:
            self._note(line_no, "not_a_tool_call")
        elif self._idless.get((frame.session_key, frame.conn_id)):
            self._adopt(frame, line_no, out)
        else:
            self._orphan(frame, line_no)

    def _orphan(self, frame: Frame, line_no: int) -> None:
        """A response no request read so far claims (``ranges`` hands it on to a later step)."""
        self._note(line_no, "tool_result_only" if self.is_transcript else "orphan_response")

    def _adopt(self, response: Frame, line_no: int, out: list[Output]) -> None:
        """Pair the oldest cut request without an id with ``response``, which gives it its id."""
        request, request_line = self._idless[(response.session_key, response.conn_id)].pop(0)
        request.message = {**(request.message or {}), "id": (response.message or {}).get("id")}
        self._lines[request_line].pending -= 1
        self._request(request, request_line, out)
        self._response(response, line_no, out)

    # -- transcript turns ----------------------------------------------------------------------

    def _turn_key(self, frame: Frame) -> tuple[str, str] | None:
        if self.format in SESSION_TURN_FORMATS:
            return (frame.session_key, "codex")  # one open turn per session until its token_count
        if frame.turn_id is None:
            return None
        return (frame.session_key, frame.turn_id)

    def _track_turn_chain(self, frame: Frame, out: list[Output]) -> None:
        """Claude Code: a line of the chain that is not a copy of the open message closes it."""
        open_turn = self._open_turn_by_chain.get(frame.chain or "")
        key = self._turn_key(frame) if frame.kind in ("request", "usage") else None
        if open_turn is not None and open_turn.key != key:
            self._close_turn(open_turn, out)
        if key is not None:
            turn = self._turns.setdefault(key, Turn(key))
            self._open_turn_by_chain[frame.chain or ""] = turn

    def _register_in_turn(self, frame: Frame, call: PendingCall | None) -> None:
        key = self._turn_key(frame)
        if key is None:
            if call is not None:
                call.attributed = True
            return
        turn = self._turns.setdefault(key, Turn(key))
        params = (frame.message or {}).get("params") or {}
        call_id = frame.client_call_id or canonical((frame.message or {}).get("id"))
        raw = (
            frame.arguments_raw if frame.arguments_raw is not None else canonical(params.get("arguments", {}))
        )
        turn.inputs[call_id] = raw
        if call is not None:
            turn.calls.append(call)

    def _usage(self, frame: Frame, out: list[Output]) -> None:
        key = self._turn_key(frame)
        if key is None:
            return
        turn = self._turns.setdefault(key, Turn(key))
        if self.format in SESSION_TURN_FORMATS or turn.output_tokens is None:
            turn.output_tokens = frame.output_tokens
        elif frame.output_tokens is not None:
            # Claude Code copies of one message: some carry the streaming-start figure.
            turn.output_tokens = max(turn.output_tokens, frame.output_tokens)
        if self.format in SESSION_TURN_FORMATS:
            self._close_turn(turn, out)

    def _close_turn(self, turn: Turn, out: list[Output]) -> None:
        if self._turns.get(turn.key) is turn:
            del self._turns[turn.key]
        for chain, open_turn in list(self._open_turn_by_chain.items()):
            if open_turn is turn:
                del self._open_turn_by_chain[chain]
        total, shares, estimated = turn_shares(
            turn.output_tokens, turn.inputs, check_against_inputs=self.format == "claude-code"
        )
        for call in turn.calls:
            call.attributed = True
            call.turn_output_tokens = total
            call.turn_tool_calls = len(turn.inputs)
            call.output_tokens = shares.get(call.request.client_call_id or "")
            call.output_tokens_estimated = estimated
            if call.responded:
                self._emit(call, out)

    # -- calls ---------------------------------------------------------------------------------

    def _dedupe_key(self, frame: Frame) -> str:
        message = frame.message or {}
        if self.is_transcript:
            identity: list[Any] = ["transcript", frame.session_key, frame.client_call_id]
        else:
            request_sha = sha256_hex(canonical_bytes(message))
            base = ["proxy", frame.session_key, frame.conn_id, message.get("id"), request_sha]
            # Counted by a digest of the identity: the count outlives a scan (``state``), kept small.
            counted = sha256_hex(canonical_bytes(base))[:32]
            occurrence = self._occurrences[counted]
            self._occurrences[counted] += 1
            identity = [*base, occurrence]
        return sha256_hex(canonical_bytes(identity))

    def _agent(self, frame: Frame, meta: dict[str, Any] | None) -> AgentInfo | None:
        if frame.session_key in self._client_info:
            return self._client_info[frame.session_key]
        if meta is not None:
            agent = agent_from_client_info(meta.get(CLIENT_INFO_META_KEY), "meta")
            if agent is not None:
                return agent
        return frame.agent

    def _emit(self, call: PendingCall, out: list[Output]) -> None:
        request = call.request
        key = self._pair_key(request, request.direction)
        if self._calls.get(key) is call:
            del self._calls[key]
        for turn in self._turns.values():  # an unanswered call must not be emitted twice
            if call in turn.calls:
                turn.calls.remove(call)
        params = (request.message or {}).get("params") or {}
        arguments = params.get("arguments") or {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else None
        if self.format in RAW_ARGUMENT_FORMATS and request.arguments_raw is not None:
            argument_bytes = utf8(request.arguments_raw)
            arguments_raw: str | None = request.arguments_raw
        else:
            argument_bytes = canonical_bytes(arguments)
            arguments_raw = None
        response = call.response.message if call.response is not None else None
        result = response.get("result") if isinstance(response, dict) else None
        result = result if isinstance(result, dict) else None
        error = response.get("error") if isinstance(response, dict) else None
        is_error = None
        if result is not None:
            is_error = result["isError"] if isinstance(result.get("isError"), bool) else False
        tool_use_id = meta.get(TOOL_USE_ID_META_KEY) if meta is not None else None
        if self.format == "claude-code":
            tool_use_id = request.client_call_id
        response_ts = call.response.ts if call.response is not None else None
        observed = ObservedCall(
            format=self.format,
            session_key=request.session_key,
            server_label=request.server_label,
            conn_id=request.conn_id,
            jsonrpc_id=(request.message or {}).get("id"),
            client_call_id=request.client_call_id,
            tool=params["name"],
            arguments=arguments,
            arguments_raw_bytes=len(argument_bytes),
            arguments_sha256=sha256_hex(argument_bytes),
            meta=meta,
            request_ts=request.ts,
            response_ts=response_ts,
            duration_ms=(
                call.response.duration_ms
                if call.response is not None and call.response.duration_ms is not None
                else duration_between(request.ts, response_ts)
            ),
            result=result,
            is_error=is_error,
            jsonrpc_error=error if isinstance(error, dict) else None,
            agent=self._agent(request, meta),
            output_tokens=call.output_tokens,
            line_numbers=tuple(sorted(set(call.lines))),
            dedupe_key=call.dedupe_key,
            claudecode_tool_use_id=tool_use_id if isinstance(tool_use_id, str) else None,
            arguments_raw=arguments_raw,
            turn_output_tokens=call.turn_output_tokens,
            turn_tool_calls=call.turn_tool_calls,
            output_tokens_estimated=call.output_tokens_estimated,
            transport=request.transport,
            capture_truncated=request.capture_truncated,
            truncated_pointers=request.truncated_pointers,
            redacted=request.redacted,
            server_info=self._server_info.get(request.session_key),
            unanswered=not call.responded,
        )
        out.append(observed)
        for line_no in call.lines:
            state = self._lines.get(line_no)
            if state is None:
                continue
            state.call_keys.append(call.dedupe_key)
            state.pending -= 1
            self._settle(line_no, out)


def assemble(
    events: Iterable[LineEvent],
    format: str,
    *,
    skip_through_line: int = 0,
    finish: bool = True,
    assembler: CallAssembler | None = None,
) -> Iterator[Output]:
    """Run a CallAssembler over ``events``; see the module docstring for ``skip_through_line``.

    ``finish=False`` leaves the input open (a tailed file that will grow): requests still waiting
    for their response, and their lines, are not yielded yet. ``assembler``: carry on with one
    that read the input before (e.g. restored by ``mcptax.formats.state``) instead of a new one.
    """
    assembler = assembler if assembler is not None else CallAssembler(format)

    def keep(item: Output) -> bool:
        if skip_through_line <= 0:
            return True
        if isinstance(item, LineOutcome | Discovered):
            return item.line_no > skip_through_line
        return min(item.line_numbers) > skip_through_line

    for event in events:
        for item in assembler.feed(event):
            if keep(item):
                yield item
    if finish:
        for item in assembler.finish():
            if keep(item):
                yield item
