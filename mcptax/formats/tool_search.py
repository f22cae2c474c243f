"""Tool-discovery records (``mcptax.discovery``) from the logs that show them.

- **Claude Code** transcripts and ``--output-format stream-json``: an assistant ``tool_use``
  named ``ToolSearch`` (input ``{"query", "max_results"}``), the user line's ``tool_result`` whose
  content lists ``{"type": "tool_reference", "tool_name"}`` blocks, and the line's
  ``tool_use_result`` ``{"matches", "query", "total_deferred_tools"}`` (the client's own account,
  preferred when present); ``system`` lines of subtype ``compact_boundary`` with
  ``compactMetadata.preCompactDiscoveredTools`` (stream-json: ``compact_metadata``,
  snake case); each assistant ``message.id`` is one model request; ``mcp__`` tool_use blocks
  are calls of deferrable tools.
- **Anthropic Messages API** bodies (through a logging proxy, or a HAR): a ``server_tool_use``
  of ``tool_search_tool_regex`` / ``tool_search_tool_bm25`` with its
  ``tool_search_tool_result`` (content ``tool_search_tool_search_result`` with
  ``tool_references``), and a client-side search returned as ``tool_reference`` blocks in a
  ``tool_result``; client ``tool_use`` blocks are calls; each response is one model request;
  the deferred total is the request's count of tools with ``defer_loading: true``.
- **OpenAI Responses** bodies: ``tool_search_call`` items (``arguments.query``) paired by
  ``call_id`` with ``tool_search_output`` items (``tools``: functions, or namespaces holding
  functions); ``function_call`` items are calls; each response is one model request.

Sequence numbers: ``line_no * 1000 + position``, so the records of one line keep their order. An
API response's model request comes before the searches its content shows (``RESPONSE_BASE``, after
those of the request body in a HAR entry): a load is carried from the next request on.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from mcptax.discovery import (
    CLAUDE_CODE_SEARCH_TOOL,
    Compaction,
    DiscoveryEvent,
    RequestTurn,
    ToolSearch,
    ToolUse,
)

MCP_PREFIX = "mcp__"
ANTHROPIC_SEARCH_RESULT = "tool_search_tool_result"
# Positions of one HAR entry: the request body's records first, then the response's.
RESPONSE_BASE = 500
_MAX_POSITION = 998


class MalformedSearch(ValueError):
    """A search record the log shows in a shape we cannot read; the message says what is wrong."""


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _str_list(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MalformedSearch(f"{what} is not a list of names")
    return tuple(value)


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedSearch(f"{what} is not a count")
    return value


def _references(content: Any) -> tuple[str, ...] | None:
    """Names of the ``tool_reference`` blocks of a result's content; None when it has none."""
    if not isinstance(content, list):
        return None
    blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_reference"]
    if not blocks:
        return None
    names = [b.get("tool_name") for b in blocks]
    if not all(isinstance(n, str) and n for n in names):
        raise MalformedSearch("a tool_reference has no tool_name")
    return tuple(names)  # type: ignore[arg-type]


# -- Claude Code ------------------------------------------------------------------------------------


def claude_code_assistant(
    message: dict[str, Any],
    blocks: list[dict[str, Any]],
    at: datetime | None,
    line_no: int,
    queries: dict[str, str],
) -> list[DiscoveryEvent]:
    """A model request, the ToolSearch queries (remembered in ``queries`` by tool_use id) and the
    MCP tool calls of one assistant line. Raises MalformedSearch for a ToolSearch without a query."""
    events: list[DiscoveryEvent] = []
    turn = message.get("id")
    if isinstance(turn, str) and turn:
        events.append(RequestTurn(turn, at, line_no * 1000))
    for position, block in enumerate(blocks, start=1):
        if block.get("type") != "tool_use":
            continue
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            continue
        if name == CLAUDE_CODE_SEARCH_TOOL:
            arguments = block.get("input")
            query = arguments.get("query") if isinstance(arguments, dict) else None
            if not isinstance(query, str):
                raise MalformedSearch("ToolSearch input has no query")
            queries[call_id] = query
        elif name.startswith(MCP_PREFIX):
            events.append(ToolUse(call_id, at, name, line_no * 1000 + position))
    return events


def claude_code_user(
    record: dict[str, Any],
    blocks: list[dict[str, Any]],
    at: datetime | None,
    line_no: int,
    queries: dict[str, str],
) -> list[DiscoveryEvent]:
    """The searches whose results a user line carries. Raises MalformedSearch (see the module docstring)."""
    events: list[DiscoveryEvent] = []
    reported = record.get("tool_use_result") if isinstance(record.get("tool_use_result"), dict) else None
    for position, block in enumerate(blocks, start=1):
        if block.get("type") != "tool_result":
            continue
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            continue
        references = _references(block.get("content"))
        own = reported is not None and "total_deferred_tools" in reported
        if call_id not in queries and references is None and not own:
            continue
        if own and reported is not None:
            matches = _str_list(reported.get("matches"), "tool_use_result.matches")
            query = reported.get("query", queries.get(call_id, ""))
            total = _count(reported.get("total_deferred_tools"), "tool_use_result.total_deferred_tools")
        else:
            matches, query, total = references or (), queries.get(call_id, ""), None
        if not isinstance(query, str):
            raise MalformedSearch("tool_use_result.query is not text")
        queries.pop(call_id, None)
        events.append(
            ToolSearch(call_id, at, query, matches, total, CLAUDE_CODE_SEARCH_TOOL, line_no * 1000 + position)
        )
    return events


def claude_code_search_ids(
    blocks: list[dict[str, Any]], record: dict[str, Any], queries: dict[str, str]
) -> set[str]:
    """Ids of the ToolSearch tool_use blocks, and of the results of searches, on one line."""
    reported = record.get("tool_use_result")
    own = isinstance(reported, dict) and "total_deferred_tools" in reported
    found: set[str] = set()
    for block in blocks:
        if block.get("type") == "tool_use" and block.get("name") == CLAUDE_CODE_SEARCH_TOOL:
            found.add(str(block.get("id")))
        elif block.get("type") == "tool_result":
            content = block.get("content")
            refs = isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_reference" for b in content
            )
            if own or refs or block.get("tool_use_id") in queries:
                found.add(str(block.get("tool_use_id")))
    return found


def claude_code_compaction(record: dict[str, Any], at: datetime | None, line_no: int) -> Compaction | None:
    """A ``compact_boundary`` line's Compaction; None for any other system line."""
    if record.get("subtype") != "compact_boundary":
        return None
    meta = record.get("compactMetadata")
    if not isinstance(meta, dict):
        meta = record.get("compact_metadata")
    meta = meta if isinstance(meta, dict) else {}
    kept = meta.get("preCompactDiscoveredTools", meta.get("pre_compact_discovered_tools", []))
    key = record.get("uuid")
    if not isinstance(key, str) or not key:
        key = f"line:{line_no}"
    return Compaction(key, at, _str_list(kept or [], "preCompactDiscoveredTools"), line_no * 1000)


# -- model APIs -------------------------------------------------------------------------------------


def is_model_api_body(body: Any) -> bool:
    """An Anthropic Messages or OpenAI Responses request or response body (not JSON-RPC)."""
    if not isinstance(body, dict) or "jsonrpc" in body:
        return False
    if "model" in body and ("messages" in body or "input" in body):
        return True
    return body.get("type") == "message" or body.get("object") == "response"


def deferred_total(request: dict[str, Any]) -> int | None:
    """Tools a request marks ``defer_loading: true`` (Anthropic and OpenAI), None when none."""
    tools = request.get("tools")
    if not isinstance(tools, list):
        return None
    total = 0
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("defer_loading") is True:
            total += 1
        nested = tool.get("tools")
        if isinstance(nested, list):
            total += sum(1 for t in nested if isinstance(t, dict) and t.get("defer_loading") is True)
    return total or None


def _anthropic_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    content = body.get("content")
    if isinstance(content, list):
        yield from (b for b in content if isinstance(b, dict))
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        inner = message.get("content") if isinstance(message, dict) else None
        if isinstance(inner, list):
            yield from (b for b in inner if isinstance(b, dict))


def _anthropic_result(block: dict[str, Any]) -> tuple[str, ...]:
    content = block.get("content")
    if not isinstance(content, dict):
        raise MalformedSearch("tool_search_tool_result has no content object")
    if content.get("type") != "tool_search_tool_search_result":
        return ()  # an error result (tool_search_tool_result_error) found nothing
    references = content.get("tool_references")
    if not isinstance(references, list):
        raise MalformedSearch("tool_search_tool_search_result has no tool_references")
    return _references(references) or ()


def _turn(body: dict[str, Any], at: datetime | None, seq: int, kind: str, value: str) -> list[DiscoveryEvent]:
    key = body.get("id")
    if body.get(kind) == value and isinstance(key, str) and key:
        return [RequestTurn(key, at, seq)]
    return []


def anthropic_events(
    body: dict[str, Any], at: datetime | None, seq0: int, total: int | None = None
) -> list[DiscoveryEvent]:
    """The model request (a response body), then the searches (server-side and client-side) and
    client tool calls of one Messages API request or response body, numbered from ``seq0``.
    ``total``: the deferred tools of the request (a response body does not list them)."""
    events = _turn(body, at, seq0, "type", "message")
    total = deferred_total(body) or total
    searches: dict[str, tuple[str, str]] = {}
    for position, block in enumerate(_anthropic_blocks(body), start=1):
        kind, seq = block.get("type"), seq0 + min(position, _MAX_POSITION - RESPONSE_BASE)
        block_id = block.get("id")
        if kind in ("server_tool_use", "tool_use") and isinstance(block_id, str):
            name = str(block.get("name") or "")
            given = block.get("input")
            arguments: dict[str, Any] = given if isinstance(given, dict) else {}
            query = arguments.get("query", arguments.get("pattern"))
            if kind == "server_tool_use" or name == CLAUDE_CODE_SEARCH_TOOL:
                if "tool_search" in name or name == CLAUDE_CODE_SEARCH_TOOL:
                    searches[block_id] = (name, query if isinstance(query, str) else "")
            else:
                events.append(ToolUse(block_id, at, name, seq))
            continue
        use_id = block.get("tool_use_id")
        if not isinstance(use_id, str) or use_id not in searches:
            continue
        if kind == ANTHROPIC_SEARCH_RESULT:
            matches = _anthropic_result(block)
        elif kind == "tool_result":
            matches = _references(block.get("content")) or ()
        else:
            continue
        name, query = searches.pop(use_id)
        events.append(ToolSearch(use_id, at, query, matches, total, _search_tool_name(name), seq))
    return events


def _search_tool_name(name: str) -> str:
    for known in ("tool_search_tool_regex", "tool_search_tool_bm25"):
        if name.startswith(known):
            return known
    return name or "tool_search"


def _openai_name(item: dict[str, Any], namespace: str | None = None) -> str:
    name = str(item.get("name") or "")
    space = namespace or item.get("namespace")
    if isinstance(space, str) and space:
        return f"{space}__{name}" if space.startswith(MCP_PREFIX) else f"{space}.{name}"
    return name


def _openai_loaded(tools: Any) -> tuple[str, ...]:
    if not isinstance(tools, list):
        raise MalformedSearch("tool_search_output has no tools list")
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        inner = tool.get("tools")
        if tool.get("type") == "namespace" and isinstance(inner, list):
            names += [_openai_name(t, str(tool.get("name") or "")) for t in inner if isinstance(t, dict)]
        elif tool.get("name"):
            names.append(_openai_name(tool))
    return tuple(names)


def _openai_query(item: dict[str, Any]) -> str:
    arguments = item.get("arguments")
    if isinstance(arguments, str):
        return arguments
    query = arguments.get("query") if isinstance(arguments, dict) else None
    return query if isinstance(query, str) else ""


def openai_events(
    body: dict[str, Any], at: datetime | None, seq0: int, total: int | None = None
) -> list[DiscoveryEvent]:
    """The model request (a response body), then the searches and function calls of one Responses
    body, numbered from ``seq0``."""
    items = [
        item
        for key in ("input", "output")
        if isinstance(body.get(key), list)
        for item in body[key]
        if isinstance(item, dict)
    ]
    total = deferred_total(body) or total
    calls = {i.get("call_id") or i.get("id"): i for i in items if i.get("type") == "tool_search_call"}
    events = _turn(body, at, seq0, "object", "response")
    for position, item in enumerate(items, start=1):
        seq = seq0 + min(position, _MAX_POSITION - RESPONSE_BASE)
        key = item.get("call_id")
        if item.get("type") == "function_call" and isinstance(key, str):
            events.append(ToolUse(key, at, _openai_name(item), seq))
        elif item.get("type") == "tool_search_output" and isinstance(key, str):
            call = calls.get(key, {})
            events.append(
                ToolSearch(
                    key, at, _openai_query(call), _openai_loaded(item.get("tools")), total, "tool_search", seq
                )
            )
    return events


def api_events(
    body: Any, at: datetime | None, line_no: int, *, response: bool, total: int | None = None
) -> list[DiscoveryEvent]:
    """Discovery records of a model API request or response body (Anthropic or OpenAI); [] for
    anything else. ``total``: the deferred tools its request declared (for a response body)."""
    if not is_model_api_body(body):
        return []
    seq0 = line_no * 1000 + (RESPONSE_BASE if response else 0)
    if "input" in body or body.get("object") == "response":
        return openai_events(body, at, seq0, total)
    return anthropic_events(body, at, seq0, total)


def api_session_key(request: Any, fallback: str) -> str:
    """A model API conversation's session: Claude Code's ``metadata.user_id`` (it names the
    session), else ``fallback``."""
    metadata = request.get("metadata") if isinstance(request, dict) else None
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    return f"api:{user}" if isinstance(user, str) and user else fallback
