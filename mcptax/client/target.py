"""What a poll is asked to reach and what it returns: the target, the result, the failure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import ValidationError

from mcptax.tokens import canonical

# How the poller reaches a server. Named apart from the SDK's ``Transport`` (a stream pair factory)
# and the dashboard's ``Transport`` model choices, which store the same three values.
TransportKind = Literal["stdio", "http", "sse"]
Outcome = Literal[
    "timeout", "refused_too_large", "protocol_error", "connect_error", "crashed", "internal_error"
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)

PREVIEW_CHARS = 120


class PollError(Exception):
    """A poll that produced no snapshot. ``outcome`` is one of ``OUTCOMES``."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown poll outcome {outcome!r}")
        super().__init__(f"{outcome}: {message}")
        self.outcome: Outcome = outcome
        self.message = message


@dataclass
class ServerTarget:
    """How to reach one MCP server."""

    transport: TransportKind
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.transport not in get_args(TransportKind):
            raise ValueError(f"unknown transport {self.transport!r}")
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio target needs a command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"an {self.transport} target needs a url")

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return self.url


@dataclass
class FetchResult:
    """One successful fetch. ``tools`` are the raw tool objects, all pages, in server order."""

    tools: list[dict[str, Any]]
    server_name: str | None
    server_version: str | None
    server_title: str | None
    protocol_version: str
    instructions: str | None
    prompts_count: int | None
    resources_count: int | None
    pages: int
    payload_bytes: int
    # The raw ``tools/list`` results (one per page) and the raw initialize/discover result.
    raw_pages: list[dict[str, Any]] = field(default_factory=list)
    handshake: dict[str, Any] | None = None
    elapsed_seconds: float = 0.0


def canonical_bytes(value: Any) -> bytes:
    """The compact JSON a client sends (docs/definitions.md, ``canonical``), as UTF-8."""
    return canonical(value).encode("utf-8")


def preview(data: bytes | str) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return text[:PREVIEW_CHARS] + ("..." if len(text) > PREVIEW_CHARS else "")


def exception_summary(exc: BaseException) -> str:
    """What kind of failure ``exc`` is, without the text it carries: pydantic's message repeats
    the input it refused, which is the server's reply."""
    if isinstance(exc, ValidationError):
        kinds = sorted({error["type"] for error in exc.errors(include_url=False, include_input=False)})
        return f"{exc.error_count()} validation error(s): {', '.join(kinds[:5])}"
    return type(exc).__name__
