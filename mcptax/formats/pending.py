"""What the call assembler holds between lines: open lines, pending calls and open turns.

Kept apart from ``assemble`` so that ``state`` can write them out and read them back (a watched
file's pairing state is saved with its byte offset after each scan).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcptax.formats.records import AgentInfo, Frame


@dataclass
class LineState:
    """A line read but not settled yet: the calls it formed and why it is kept open."""

    open: bool = True
    pending: int = 0
    call_keys: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    # An initialize request names the session's client; passed on so a later batch of the same
    # session (a separate ingest) still knows who made its calls.
    context: tuple[str, AgentInfo] | None = None


@dataclass(eq=False)
class PendingCall:
    """A tools/call request waiting for its response (or, in a transcript, for its turn's tokens)."""

    request: Frame
    lines: list[int]
    dedupe_key: str
    response: Frame | None = None
    responded: bool = False
    attributed: bool = True
    output_tokens: int | None = None
    turn_output_tokens: int | None = None
    turn_tool_calls: int | None = None
    output_tokens_estimated: bool = False


@dataclass(eq=False)
class Turn:
    """A transcript turn still open: its output tokens are shared among its calls once it closes."""

    key: tuple[str, str]
    output_tokens: int | None = None
    # Argument text of every tool call of the turn (MCP or built-in), by call id, in order.
    inputs: dict[str, str] = field(default_factory=dict)
    calls: list[PendingCall] = field(default_factory=list)
