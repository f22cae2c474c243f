"""Client renderings ("profiles"): the tools as one client sends them to its model, counted.

docs/methodology.md defines each one and names the public source it follows:

- `mcp` (the default): the model-visible tools `{name, description, inputSchema}` as compact JSON,
  the fixed tax of docs/definitions.md, unchanged;
- `claude`: Anthropic Messages API tools as Claude Code sends MCP tools,
  `{"name": "mcp__<server>__<tool>", "description", "input_schema"}`;
- `openai`: Responses API function tools as Codex sends MCP tools,
  `{"type": "function", "name": "mcp__<server>__<tool>", "description", "strict": false, "parameters"}`;
- `wire`: the whole tools/list result as received, `{"tools": [...]}` with every key a server sent
  (title, annotations, outputSchema, _meta...): what counters of the raw response report. Never a
  default: no client sends that to a model.
"""

from __future__ import annotations

import re
from typing import Any

from mcptax import tokens

DEFAULT_PROFILE = "mcp"
PROFILES = ("mcp", "claude", "openai", "wire")
LABELS = {
    "mcp": "MCP (name, description, inputSchema)",
    "claude": "Claude Code (Anthropic tools)",
    "openai": "OpenAI / Codex (function tools)",
    "wire": "Wire (whole tools/list result)",
}

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class UnknownProfile(ValueError):
    pass


def check(profile: str) -> str:
    if profile not in PROFILES:
        raise UnknownProfile(f"unknown profile {profile!r} (known: {', '.join(PROFILES)})")
    return profile


def server_part(server: str) -> str:
    """The server's name as clients put it in tool names: characters outside A-Z a-z 0-9 _ - as `_`."""
    return _UNSAFE.sub("_", server)


def qualified_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, the server part as `server_part` writes it."""
    return f"mcp__{server_part(server)}__{tool}"


def render_tool(profile: str, tool: dict[str, Any], server: str = "") -> dict[str, Any]:
    """One tool as `profile` sends it (key order as the client writes it)."""
    check(profile)
    if profile == "wire":
        return tool
    if profile == "mcp":
        return tokens.visible_tool(tool)
    name = qualified_name(server, str(tool.get("name", "")))
    schema = tool.get("inputSchema", {"type": "object"})
    if profile == "claude":
        rendered: dict[str, Any] = {"name": name}
        if "description" in tool:
            rendered["description"] = tool["description"]
        rendered["input_schema"] = schema
        return rendered
    # Codex fills a missing description with "" and always sends `strict` (false for MCP tools).
    return {
        "type": "function",
        "name": name,
        "description": tool.get("description") or "",
        "strict": False,
        "parameters": schema,
    }


def render(profile: str, tools: list[dict[str, Any]], server: str = "") -> Any:
    """The JSON value counted for the whole list: an array of tools, or for `wire` the result object."""
    rendered = [render_tool(profile, tool, server) for tool in tools]
    return {"tools": rendered} if profile == "wire" else rendered


def payload(profile: str, tools: list[dict[str, Any]], server: str = "") -> str:
    return tokens.canonical(render(profile, tools, server))


def schema_key(profile: str) -> str:
    return {"claude": "input_schema", "openai": "parameters"}.get(profile, "inputSchema")


def account(
    tools: list[dict[str, Any]],
    instructions: str | None = None,
    *,
    profile: str = DEFAULT_PROFILE,
    encoding: str = tokens.DEFAULT_ENCODING,
    server: str = "",
) -> tokens.TokenReport:
    """tokens.account under a profile: the same figures, over what that client sends.

    For `mcp` this is tokens.account itself (identical figures). The per-tool parts are the
    rendered tool, its description and its schema under the profile's key; `overhead_tokens` keeps
    the parts summing to the total (for `wire` it includes the `{"tools":` wrapper).
    """
    check(profile)
    if profile == DEFAULT_PROFILE:
        return tokens.account(tools, instructions, encoding=encoding)
    enc = tokens.get_encoding(encoding)
    text = payload(profile, tools, server)
    total = tokens.count(text, enc)
    key = schema_key(profile)
    per_tool: list[tokens.ToolTokens] = []
    for tool in tools:
        rendered = render_tool(profile, tool, server)
        description = rendered.get("description")
        per_tool.append(
            tokens.ToolTokens(
                name=str(tool.get("name", "")),
                tokens=tokens.count(tokens.canonical(rendered), enc),
                description_tokens=tokens.count(description, enc) if isinstance(description, str) else 0,
                schema_tokens=tokens.count(tokens.canonical(rendered[key]), enc) if key in rendered else 0,
            )
        )
    return tokens.TokenReport(
        encoding=tokens.public_encoding_name(encoding),
        tool_count=len(tools),
        fixed_tax_tokens=total,
        instructions_tokens=tokens.count(instructions, enc) if instructions else 0,
        overhead_tokens=total - sum(t.tokens for t in per_tool),
        bytes=len(text.encode("utf-8")),
        sha256=tokens.snapshot_sha256(tools),
        tools=per_tool,
    )


def matrix(
    tools: list[dict[str, Any]],
    instructions: str | None,
    encodings: list[str],
    server: str = "",
) -> dict[str, dict[str, tokens.TokenReport]]:
    """Every profile × every encoding: {profile: {encoding: report}}."""
    return {
        profile: {
            tokens.public_encoding_name(name): account(
                tools, instructions, profile=profile, encoding=name, server=server
            )
            for name in encodings
        }
        for profile in PROFILES
    }
