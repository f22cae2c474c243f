"""What a poll is asked to reach and what it returns: the target, the result, the failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from mcptax.tokens import canonical_utf8

# How the poller reaches a server. Named apart from the SDK's ``Transport`` (a stream pair factory)
# and the dashboard's ``Transport`` model choices, which store the same three values.
TransportKind = Literal["stdio", "http", "sse"]
Outcome = Literal[
    "timeout", "refused_too_large", "protocol_error", "connect_error", "crashed", "internal_error"
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)

# Whether a fetch counts prompts and resources: always, never, or by the protocol version the
# server negotiated (a caller that keeps only one era's counts asks for those only).
Listings = bool | Callable[[str], bool]

PREVIEW_CHARS = 120
# One message may carry a little more than the tools themselves (JSON-RPC envelope, _meta), so the
# transports allow this much above max_bytes; the exact limit is applied to the tools/list results.
ENVELOPE_SLACK_BYTES = 256 * 1024
MAX_PAGES = 1000


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
    # The tools are what ``json.loads`` made of answers with no float in them (the fast paths know
    # it as they read): their canonical JSON needs no plainness check (``fastjson``). Set only by
    # the reader; anyone who changes ``tools`` afterwards must clear it.
    float_free_json: bool = False


def wants_listings(listings: Listings, protocol_version: str) -> bool:
    """Whether prompts and resources are counted for a server that negotiated ``protocol_version``."""
    return listings(protocol_version) if callable(listings) else listings


def canonical_bytes(value: Any, *, float_free_json: bool = False) -> bytes:
    """The compact JSON a client sends (docs/definitions.md, ``canonical``), as UTF-8
    (``tokens.canonical_utf8``)."""
    return canonical_utf8(value, float_free_json=float_free_json)


def preview(data: bytes | str) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return text[:PREVIEW_CHARS] + ("..." if len(text) > PREVIEW_CHARS else "")


def exception_summary(exc: BaseException) -> str:
    """What kind of failure ``exc`` is, without the text it carries: pydantic's message repeats
    the input it refused, which is the server's reply."""
    from pydantic import ValidationError  # here: the SDK-free fast path never needs pydantic

    if isinstance(exc, ValidationError):
        kinds = sorted({error["type"] for error in exc.errors(include_url=False, include_input=False)})
        return f"{exc.error_count()} validation error(s): {', '.join(kinds[:5])}"
    return type(exc).__name__


def message_too_large(size: int, waiting_for: str, max_bytes: int, message_limit: int) -> PollError:
    """One message passed the transport's bound: refused before the rest of it is read."""
    return PollError(
        "refused_too_large",
        f"a message from the server passed {message_limit} bytes ({size} read) while answering "
        f"{waiting_for}; tools/list may be at most {max_bytes} bytes (plus "
        f"{message_limit - max_bytes} bytes of envelope); refused without reading the rest",
    )


def payload_too_large(total: int, pages: int, size: int, max_bytes: int) -> PollError:
    """The tools/list results, summed over `pages` pages, passed `max_bytes`."""
    return PollError(
        "refused_too_large",
        f"tools/list payload is {total} bytes after {pages} page(s) (this page {size} bytes); "
        f"the limit is {max_bytes} bytes",
    )


def repeated_cursor(cursor: str) -> PollError:
    return PollError("protocol_error", f"tools/list repeated the cursor {cursor!r}; it would never end")


def too_many_pages() -> PollError:
    return PollError("protocol_error", f"tools/list did not end within {MAX_PAGES} pages")
