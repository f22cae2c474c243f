"""Writing a CallAssembler's state out and reading it back, so a tailed file resumes at a byte offset.

``dump(assembler, parser_state)`` gives compact bytes (zlib over ASCII JSON: any text a log holds,
NUL and lone surrogates included, survives any database column that takes bytes); ``load(data)``
gives back ``(assembler, parser_state)``. An assembler restored this way and fed the lines after
the offset yields exactly what one assembler fed the whole file would have yielded for them:
pending requests still pair, a session's client is still known, a frame read again is still a
duplicate and occurrence numbers (hence dedupe keys) carry on.

What it costs: the open lines, pending calls and open turns (a handful in a live log), plus one
short digest per distinct tools/call identity and the frame numbers seen, kept as ranges.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections import Counter
from typing import Any

from mcptax.formats.assemble import CallAssembler
from mcptax.formats.pending import LineState, PendingCall, Turn
from mcptax.formats.records import AgentInfo, Frame

VERSION = 1


class StateError(ValueError):
    """The bytes are not a state this version can read (start the file over instead)."""


def _spans(numbers: set[int] | list[int]) -> list[list[int]]:
    """Sorted integers as [first, last] runs: consecutive frame and line numbers stay tiny."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return runs


def _unspan(runs: list[list[int]]) -> set[int]:
    return {n for first, last in runs for n in range(first, last + 1)}


def _agent(info: AgentInfo | None) -> dict[str, Any] | None:
    return dataclasses.asdict(info) if info is not None else None


def _agent_back(data: dict[str, Any] | None) -> AgentInfo | None:
    return AgentInfo(**data) if data is not None else None


def _frame(frame: Frame) -> dict[str, Any]:
    data = {f.name: getattr(frame, f.name) for f in dataclasses.fields(frame)}
    data["agent"] = _agent(frame.agent)
    data["truncated_pointers"] = list(frame.truncated_pointers)
    return data


def _frame_back(data: dict[str, Any]) -> Frame:
    data = dict(data)
    data["agent"] = _agent_back(data.get("agent"))
    data["truncated_pointers"] = tuple(data.get("truncated_pointers") or ())
    return Frame(**data)


def _call(call: PendingCall) -> dict[str, Any]:
    data = {f.name: getattr(call, f.name) for f in dataclasses.fields(call)}
    data["request"] = _frame(call.request)
    data["response"] = _frame(call.response) if call.response is not None else None
    return data


def _call_back(data: dict[str, Any]) -> PendingCall:
    data = dict(data)
    data["request"] = _frame_back(data["request"])
    data["response"] = _frame_back(data["response"]) if data.get("response") is not None else None
    return PendingCall(**data)


def _line(state: LineState) -> dict[str, Any]:
    context = [state.context[0], _agent(state.context[1])] if state.context is not None else None
    return {
        "open": state.open,
        "pending": state.pending,
        "call_keys": state.call_keys,
        "reasons": state.reasons,
        "context": context,
    }


def _line_back(data: dict[str, Any]) -> LineState:
    context = data.get("context")
    agent = _agent_back(context[1]) if context else None
    return LineState(
        open=data["open"],
        pending=data["pending"],
        call_keys=list(data["call_keys"]),
        reasons=list(data["reasons"]),
        context=(context[0], agent) if context and agent is not None else None,
    )


def to_json(a: CallAssembler) -> dict[str, Any]:
    """The assembler's whole state as JSON-able values."""
    calls: list[PendingCall] = list(
        dict.fromkeys([*a._calls.values(), *(c for t in a._turns.values() for c in t.calls)])
    )
    index = {id(call): i for i, call in enumerate(calls)}
    turns = list(dict.fromkeys([*a._turns.values(), *a._open_turn_by_chain.values()]))
    turn_index = {id(turn): i for i, turn in enumerate(turns)}
    seen: dict[str, list[int]] = {}
    for session, seq in a._seen_frames:
        seen.setdefault(session, []).append(seq)
    return {
        "version": VERSION,
        "format": a.format,
        "watermark": a.watermark,
        "done_above": _spans(a._done_above_watermark),
        "lines": [[n, _line(s)] for n, s in sorted(a._lines.items())],
        "calls": [_call(c) for c in calls],
        "pending": [[list(key), index[id(c)]] for key, c in a._calls.items()],
        "other_requests": [[list(key), method] for key, method in a._other_requests.items()],
        "occurrences": dict(a._occurrences),
        "client_info": {k: _agent(v) for k, v in a._client_info.items()},
        "server_info": a._server_info,
        "turns": [
            {
                "key": list(t.key),
                "output_tokens": t.output_tokens,
                "inputs": list(t.inputs.items()),
                "calls": [index[id(c)] for c in t.calls],
                "current": a._turns.get(t.key) is t,
            }
            for t in turns
        ],
        "open_turns": [[chain, turn_index[id(t)]] for chain, t in a._open_turn_by_chain.items()],
        "seen_frames": {session: _spans(seqs) for session, seqs in seen.items()},
        "idless": [
            [list(key), [[_frame(f), n] for f, n in waiting]] for key, waiting in a._idless.items() if waiting
        ],
    }


def from_json(data: dict[str, Any], assembler: CallAssembler | None = None) -> CallAssembler:
    """An assembler in the state ``to_json`` wrote (``assembler``: fill this one, e.g. a subclass)."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise StateError("not a pairing state of this version")
    a = assembler if assembler is not None else CallAssembler(data["format"])
    a.watermark = data["watermark"]
    a._done_above_watermark = _unspan(data["done_above"])
    a._lines = {n: _line_back(s) for n, s in data["lines"]}
    calls = [_call_back(c) for c in data["calls"]]
    a._calls = {(k[0], k[1], k[2], k[3]): calls[i] for k, i in data["pending"]}
    a._other_requests = {(k[0], k[1], k[2], k[3]): m for k, m in data["other_requests"]}
    a._occurrences = Counter(data["occurrences"])
    a._client_info = {k: AgentInfo(**v) for k, v in data["client_info"].items()}
    a._server_info = dict(data["server_info"])
    turns: list[Turn] = []
    a._turns = {}
    for t in data["turns"]:
        turn = Turn(
            (t["key"][0], t["key"][1]), t["output_tokens"], dict(t["inputs"]), [calls[i] for i in t["calls"]]
        )
        turns.append(turn)
        if t["current"]:
            a._turns[turn.key] = turn
    a._open_turn_by_chain = {chain: turns[i] for chain, i in data["open_turns"]}
    a._seen_frames = {
        (session, seq) for session, runs in data["seen_frames"].items() for seq in _unspan(runs)
    }
    a._idless = {(k[0], k[1]): [(_frame_back(f), n) for f, n in waiting] for k, waiting in data["idless"]}
    return a


def pack(value: Any) -> bytes:
    """JSON-able ``value`` as zlib-compressed ASCII JSON (NUL and lone surrogates escaped)."""
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode("ascii"), 6)


def unpack(data: bytes | memoryview) -> Any:
    """The value ``pack`` wrote; StateError when the bytes are not one."""
    try:
        return json.loads(zlib.decompress(bytes(data)))
    except (zlib.error, ValueError) as exc:
        raise StateError(f"unreadable state: {exc}") from exc


def dump(assembler: CallAssembler, parser_state: dict[str, Any] | None = None) -> bytes:
    """The assembler's and the parser's state as compact bytes (see the module docstring)."""
    return pack({"assembler": to_json(assembler), "parser": parser_state or {}})


def load(
    data: bytes | memoryview, assembler: CallAssembler | None = None
) -> tuple[CallAssembler, dict[str, Any]]:
    """``(assembler, parser_state)`` from bytes ``dump`` wrote; StateError when they are not one."""
    value = unpack(data)
    try:
        return from_json(value["assembler"], assembler), dict(value["parser"])
    except (zlib.error, ValueError, KeyError, TypeError, IndexError) as exc:
        if isinstance(exc, StateError):
            raise
        raise StateError(f"unreadable pairing state: {exc}") from exc
