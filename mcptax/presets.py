"""Client presets for loading modes: which modes a client has, how it renders a deferred request,
and its setting (Claude Code's ENABLE_TOOL_SEARCH). mcptax.loading counts with them and re-exports
every name here; docs/methodology.md gives each preset's source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Mode(StrEnum):
    EAGER = "eager"
    DEFERRED = "deferred"


class UnknownClient(ValueError):
    pass


class BadSetting(ValueError):
    pass


# Claude Code's ToolSearch tool as we count it. Claude Code's own definition text is not published;
# this is our rendering of what its documentation says the tool takes (a query, either
# `select:<name>[,<name>...]` or keywords, and an optional result limit), in the Anthropic tool
# shape the `claude` profile uses. docs/methodology.md says so.
CLAUDE_CODE_TOOL_SEARCH: dict[str, Any] = {
    "name": "ToolSearch",
    "description": (
        "Loads the full definitions of deferred tools so they can be called. Deferred tools are "
        "listed by name only; a deferred tool cannot be called until its definition is loaded. "
        'Query with "select:<name>[,<name>...]" to load tools by name, or with keywords to '
        "search tool names and descriptions."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "select:<names> or keywords"},
            "max_results": {"type": "number", "description": "most tools to return", "default": 5},
        },
        "required": ["query"],
    },
}
# The Messages API server tool as a request declares it (Anthropic's tool search tool docs). The
# prompt the API expands it into on its side is not published and is not counted.
ANTHROPIC_TOOL_SEARCH: dict[str, Any] = {
    "type": "tool_search_tool_regex_20251119",
    "name": "tool_search_tool_regex",
}
# The Responses API hosted tool as a request declares it (OpenAI's tool search guide).
OPENAI_TOOL_SEARCH: dict[str, Any] = {"type": "tool_search"}

NAME_LIST_OPEN = "<available-deferred-tools>\n"
NAME_LIST_CLOSE = "</available-deferred-tools>"
DEFAULT_AUTO_SHARE = 10.0
DEFAULT_CONTEXT_WINDOW = 200_000


@dataclass(frozen=True)
class Preset:
    """One client's loading behaviour, as docs/methodology.md describes it with its source."""

    client: str
    label: str
    profile: str  # how a full tool definition is rendered (mcptax.profiles)
    modes: tuple[Mode, ...]
    default_setting: str
    search_tool: dict[str, Any] | None = None
    lists_names: bool = False  # a deferred request names each tool (Claude Code's name list)
    server_entry: bool = False  # a deferred request shows each server (OpenAI namespaces)
    source: str = ""

    @property
    def can_defer(self) -> bool:
        return Mode.DEFERRED in self.modes


_EAGER_ONLY = (Mode.EAGER,)
_BOTH = (Mode.EAGER, Mode.DEFERRED)
PRESETS: dict[str, Preset] = {
    preset.client: preset
    for preset in (
        Preset(
            "claude-code",
            "Claude Code",
            "claude",
            _BOTH,
            "",
            CLAUDE_CODE_TOOL_SEARCH,
            lists_names=True,
            source="Claude Code MCP documentation: tool search, ENABLE_TOOL_SEARCH, alwaysLoad",
        ),
        Preset(
            "anthropic-api",
            "Anthropic Messages API (defer_loading)",
            "claude",
            _BOTH,
            "deferred",
            ANTHROPIC_TOOL_SEARCH,
            source="Anthropic docs: tool search tool, defer_loading",
        ),
        Preset(
            "openai-tool-search",
            "OpenAI Responses API (tool_search)",
            "openai",
            _BOTH,
            "deferred",
            OPENAI_TOOL_SEARCH,
            server_entry=True,
            source="OpenAI docs: tool search guide (gpt-5.4 and later)",
        ),
        Preset("cursor", "Cursor", "mcp", _EAGER_ONLY, "eager", source="sends every MCP tool"),
        Preset("vscode", "VS Code", "mcp", _EAGER_ONLY, "eager", source="sends every MCP tool"),
        Preset("codex", "Codex CLI (MCP servers)", "openai", _EAGER_ONLY, "eager", source="codex-rs"),
        Preset("opencode", "OpenCode", "mcp", _EAGER_ONLY, "eager", source="sends every MCP tool"),
    )
}
CLIENTS = tuple(PRESETS)


def preset_for(client: str | Preset) -> Preset:
    if isinstance(client, Preset):
        return client
    try:
        return PRESETS[client]
    except KeyError:
        raise UnknownClient(f"unknown client {client!r} (known: {', '.join(CLIENTS)})") from None


# --- settings ---------------------------------------------------------------------------------

_AUTO = re.compile(r"^auto(?::(\d+(?:\.\d+)?))?$")


@dataclass(frozen=True)
class Setting:
    """A client's loading setting. For Claude Code, the value of ENABLE_TOOL_SEARCH ("" when unset,
    which recent releases treat as "always defer"); for the API presets "deferred" or "eager"."""

    raw: str
    kind: str  # "auto" | "defer" | "eager"
    share_percent: float = DEFAULT_AUTO_SHARE


def parse_setting(client: str | Preset, value: str | None) -> Setting:
    preset = preset_for(client)
    raw = (value if value is not None else preset.default_setting).strip()
    if not preset.can_defer:
        if raw.lower() not in ("", "eager", "false", "0"):
            raise BadSetting(f"{preset.label} sends every tool; it has no setting {raw!r}")
        return Setting(raw, "eager")
    text = raw.lower()
    if preset.client == "claude-code":
        match = _AUTO.match(text)
        if match:
            share = float(match.group(1)) if match.group(1) else DEFAULT_AUTO_SHARE
            if not 0 < share <= 100:
                raise BadSetting(f"ENABLE_TOOL_SEARCH={raw}: the share must be between 0 and 100")
            return Setting(raw, "auto", share)
        if text in ("", "true", "1", "yes", "on"):
            return Setting(raw, "defer")
        if text in ("false", "0", "no", "off"):
            return Setting(raw, "eager")
        raise BadSetting(f"ENABLE_TOOL_SEARCH={raw!r}: expected auto, auto:N, true or false")
    if text in ("deferred", "defer", "true"):
        return Setting(raw, "defer")
    if text in ("eager", "false"):
        return Setting(raw, "eager")
    raise BadSetting(f"{preset.label}: expected deferred or eager, got {raw!r}")
