"""Assembling a large line-based log in ranges read side by side, and stitching their edges.

A file is cut on line boundaries into ranges (``split_points``). Each range is assembled on its own
by a ``RangeAssembler`` that starts knowing who opened each session before it (``Seed``: the
clients and servers that ``initialize`` named, found by ``split_points`` in its one pass). What a
range cannot settle alone it hands on instead of settling it:

- a response no request in the range claims (its request may be in an earlier range), unless it
  is the first range;
- a request still waiting for its response when the range ends (the response may come later);

with the dedupe keys those requests got in their range and the requests still unanswered that
are no tools/call (``initialize``, ``tools/list``: their late response is no orphan). ``stitch``
then reads only the handed-on lines, in line order, through one more assembler that learns each
range's edge state after that range's lines, and finishes the input. So every line is settled by
exactly one range or by the stitch, a request and its response in different ranges still form
one call, and a request answered nowhere is stored unanswered, as a single reader would.

What differs from one reader: a frame repeated in two different ranges (same session and seq) is
not recognised as a repeat, and occurrence numbers of a request repeated verbatim (same session,
connection, id and bytes) count within a range, so such a pair in two ranges forms one call.
Only stateless line formats (``envelope``) can be split: a transcript line needs the lines before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from mcptax.formats.assemble import CallAssembler, Output, PairKey
from mcptax.formats.envelope import parse_line
from mcptax.formats.records import AgentInfo, Frame, LineEvent, LineOutcome, RawLine
from mcptax.formats.state import _agent, _agent_back

SPLIT_FORMATS = frozenset({"envelope"})
# Substrings of the only lines the split pass parses: those that name a session's client or server.
_SESSION_MARKERS = (b'"initialize"', b'"serverInfo"')


@dataclass
class Seed:
    """What a range knows before its first line: the sessions' clients and servers so far."""

    client_info: dict[str, AgentInfo] = field(default_factory=dict)
    server_info: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "client_info": {k: _agent(v) for k, v in self.client_info.items()},
            "server_info": self.server_info,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Seed:
        clients = {
            k: a for k, v in (data.get("client_info") or {}).items() if (a := _agent_back(v)) is not None
        }
        return cls(clients, dict(data.get("server_info") or {}))


@dataclass
class Split:
    """One range: bytes [start, end) of the file, after ``lines_before`` lines."""

    start: int
    end: int
    lines_before: int
    seed: Seed


def split_points(
    raw: IO[bytes], size: int, parts: int, *, chunk: int = 8 << 20, max_line: int = 16 << 20
) -> list[Split]:
    """Cut the file ``raw`` (``size`` bytes) into up to ``parts`` ranges of similar size, each
    starting just after a ``\\n``, in one sequential pass up to the last cut that counts lines
    (``bytes.count``) and parses only the lines that open sessions. Fewer ranges come back when
    lines are too long to cut the file that finely."""
    targets = [size * i // parts for i in range(1, parts)]
    sessions = CallAssembler("envelope")
    cuts: list[tuple[int, int, Seed]] = []  # (offset, lines before it, seed)
    pos, lines_seen, carry = 0, 0, b""
    raw.seek(0)
    while targets:
        block = raw.read(chunk)
        if not block:
            break
        data, base = carry + block, pos - len(carry)
        pos += len(block)
        whole = data.rfind(b"\n") + 1
        data, carry = data[:whole], data[whole:]
        if len(carry) > max_line:
            carry = b""  # an oversize line opens no session; the cut search resumes after it
        marks: set[tuple[int, int]] = set()
        for marker in _SESSION_MARKERS:
            i = data.find(marker)
            while i >= 0:
                line_end = data.index(b"\n", i) + 1
                marks.add((data.rfind(b"\n", 0, i) + 1, line_end))
                i = data.find(marker, line_end)
        here: list[int] = []
        while targets and targets[0] < base + len(data):
            cut = data.index(b"\n", max(0, targets.pop(0) - base)) + 1
            if base + cut < size and (not here or cut > here[-1]) and (not cuts or base + cut > cuts[-1][0]):
                here.append(cut)
        opened = sorted(marks)
        for cut in here:
            while opened and opened[0][1] <= cut:
                first, last = opened.pop(0)
                line_no = lines_seen + data.count(b"\n", 0, first) + 1
                sessions.feed(
                    parse_line(RawLine(line_no, base + first, last - first, data[first : last - 1]), max_line)
                )
            seed = Seed(dict(sessions._client_info), dict(sessions._server_info))
            cuts.append((base + cut, lines_seen + data.count(b"\n", 0, cut), seed))
        for first, last in opened:
            line_no = lines_seen + data.count(b"\n", 0, first) + 1
            sessions.feed(
                parse_line(RawLine(line_no, base + first, last - first, data[first : last - 1]), max_line)
            )
        lines_seen += data.count(b"\n")
    starts = [(0, 0, Seed()), *cuts]
    ends = [c[0] for c in cuts] + [size]
    return [Split(start, end, before, seed) for (start, before, seed), end in zip(starts, ends, strict=True)]


def shifted(events: Iterable[LineEvent], lines_before: int, offset: int) -> Iterator[LineEvent]:
    """Events of a range, numbered as lines of the whole file (a range's parser counts from 1)."""
    for event in events:
        event.line_no += lines_before
        event.offset += offset
        yield event


class RangeAssembler(CallAssembler):
    """Assembles one range (see the module docstring); ``stitch`` uses one for the edges."""

    def __init__(
        self,
        format: str,
        *,
        lines_before: int = 0,
        seed: Seed | None = None,
        hand_on_orphans: bool = False,
        keys: dict[str, str] | None = None,
    ) -> None:
        super().__init__(format)
        self.watermark = lines_before  # the lines before the range are not this range's to settle
        if seed is not None:
            self._client_info.update(seed.client_info)
            self._server_info.update(seed.server_info)
        self.hand_on_orphans = hand_on_orphans
        self.handed_on: set[int] = set()
        # Dedupe key of the i-th tools/call request of a line, "line:i" (the range's, in the stitch).
        self.keys: dict[str, str] = dict(keys or {})
        self._key_line = 0
        self._keys_in_line: Counter[int] = Counter()
        self._events: dict[int, tuple[int, int]] = {}

    def feed(self, event: LineEvent) -> list[Output]:
        self._events[event.line_no] = (event.offset, event.length)
        out = super().feed(event)
        if event.line_no not in self._lines and event.line_no not in self.handed_on:
            del self._events[event.line_no]  # settled (or handed on): its place is not needed
        return out

    def _request(self, frame: Frame, line_no: int, out: list[Output]) -> None:
        self._key_line = line_no
        super()._request(frame, line_no, out)

    def _dedupe_key(self, frame: Frame) -> str:
        slot = f"{self._key_line}:{self._keys_in_line[self._key_line]}"
        self._keys_in_line[self._key_line] += 1
        if slot not in self.keys:
            self.keys[slot] = super()._dedupe_key(frame)
        return self.keys[slot]

    def _orphan(self, frame: Frame, line_no: int) -> None:
        if self.hand_on_orphans:
            self.handed_on.add(line_no)
        else:
            super()._orphan(frame, line_no)

    def _settle(
        self, line_no: int, out: list[Output], status: str | None = None, raw: bytes | None = None
    ) -> None:
        if line_no not in self.handed_on:
            super()._settle(line_no, out, status, raw)
            return
        state = self._lines.get(line_no)
        if state is None or state.open or state.pending > 0:
            return
        del self._lines[line_no]  # the stitch settles it; for this range it is done
        self._done_above_watermark.add(line_no)
        while self.watermark + 1 in self._done_above_watermark:
            self.watermark += 1
            self._done_above_watermark.discard(self.watermark)

    def handoff(self, lines: int) -> dict[str, Any]:
        """End of the range (``lines`` read): what the stitch needs, JSON-able; settles nothing."""
        waiting = {n for n, state in self._lines.items() if state.pending > 0 or state.open}
        edge = sorted(self.handed_on | waiting)
        places = {n: self._events[n] for n in edge if n in self._events}
        keys = {slot: key for slot, key in self.keys.items() if int(slot.split(":")[0]) in places}
        return {
            "lines": lines,
            "edge": [[n, *places[n]] for n in edge if n in places],
            "keys": keys,
            "other_requests": [[list(k), m] for k, m in self._other_requests.items()],
            "seed_after": Seed(self._client_info, self._server_info).to_json(),
        }


def stitch(
    format: str, handoffs: list[dict[str, Any]], read: Callable[[int, int], bytes], max_line_bytes: int
) -> Iterator[Output]:
    """Settle the lines the ranges handed on (``handoffs`` in range order; ``read(offset,
    length)`` gives a line's bytes), finishing the input: pairs across ranges form their calls,
    the rest ends as one reader would have ended it."""
    keys = {slot: key for h in handoffs for slot, key in h["keys"].items()}
    assembler = RangeAssembler(format, keys=keys)
    for handoff in handoffs:
        for line_no, offset, length in handoff["edge"]:
            data = read(offset, length)
            body = data[:-1] if data.endswith(b"\n") else data
            body = body[:-1] if body.endswith(b"\r") else body
            yield from assembler.feed(parse_line(RawLine(line_no, offset, length, body), max_line_bytes))
        for key, method in handoff["other_requests"]:
            pair: PairKey = (key[0], key[1], key[2], key[3])
            assembler._other_requests[pair] = method
        seed = Seed.from_json(handoff["seed_after"])
        assembler._client_info.update(seed.client_info)
        assembler._server_info.update(seed.server_info)
    yield from assembler.finish()


__all__ = [
    "SPLIT_FORMATS",
    "LineOutcome",
    "RangeAssembler",
    "Seed",
    "Split",
    "shifted",
    "split_points",
    "stitch",
]
