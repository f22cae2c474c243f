"""Loading modes: what each client really sends up front for MCP tools, and what a tool costs once loaded.

A dimension beside profiles (how a tool is rendered) and encodings (how it is counted):

- `eager`: every tool's full definition in every request: the fixed tax, under the client's profile;
- `deferred`: each request carries only each tool's entry in the client's deferred-name list (if the
  client lists names), a per-server entry (if the client shows servers), the client's search-tool
  definition (counted once per stack and shared out per server) and each server's `instructions`;
  a tool's full definition is paid from its load onwards (`load_tokens`).

Every figure is the token count of a text this module renders, and the parts of a mode always add
up exactly to its `upfront` total (token merges across separators land in `overhead`, as in the
fixed tax). docs/methodology.md names each client's public source, and says which renderings are
ours because the client's own is not public.

Django-free and pure: the CLI, the dashboard and the CI gate call the same functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mcptax import profiles, tokens


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


# --- figures ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerTools:
    """One server's tools as a stack carries them."""

    name: str
    tools: list[dict[str, Any]]
    instructions: str | None = None
    always_load: bool = False  # Claude Code's per-server opt-out of deferral


@dataclass(frozen=True)
class ModeFigures:
    """One mode's tokens per request for one server (or a stack), with its parts.

    upfront == sum(tools) + server_entry + search_tool + instructions + overhead, always.
    `tools` is each tool's part up front: its full definition (eager), or its entry in the client's
    name list (deferred; 0 where the client lists no names). `load_tokens` is what each tool costs
    in every request from its load onwards (deferred; 0 for a tool already sent up front).
    """

    mode: Mode
    upfront: int
    tools: dict[str, int]
    server_entry: int
    search_tool: int
    instructions: int
    overhead: int
    load_tokens: dict[str, int]

    def parts_sum(self) -> int:
        return (
            sum(self.tools.values())
            + self.server_entry
            + self.search_tool
            + self.instructions
            + self.overhead
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": str(self.mode),
            "upfront": self.upfront,
            "parts": {
                "tools": sum(self.tools.values()),
                "server_entry": self.server_entry,
                "search_tool": self.search_tool,
                "instructions": self.instructions,
                "overhead": self.overhead,
            },
            "tools": [
                {"name": name, "upfront": tokens_up, "load_tokens": self.load_tokens.get(name, 0)}
                for name, tokens_up in self.tools.items()
            ],
        }


def _add(figures: Sequence[ModeFigures], mode: Mode) -> ModeFigures:
    """Several servers' figures as one (tool names need not be unique across servers: summed)."""
    tools: dict[str, int] = {}
    loads: dict[str, int] = {}
    for f in figures:
        for name, value in f.tools.items():
            tools[name] = tools.get(name, 0) + value
        for name, value in f.load_tokens.items():
            loads[name] = loads.get(name, 0) + value
    return ModeFigures(
        mode,
        sum(f.upfront for f in figures),
        tools,
        sum(f.server_entry for f in figures),
        sum(f.search_tool for f in figures),
        sum(f.instructions for f in figures),
        sum(f.overhead for f in figures),
        loads,
    )


@dataclass(frozen=True)
class Threshold:
    """Claude Code's `auto` rule for a stack: defer when the deferrable tools' eager definitions
    exceed `share_percent` of the context window."""

    share_percent: float
    context_window: int
    threshold_tokens: int
    deferrable_tokens: int

    @property
    def crosses(self) -> bool:
        return self.deferrable_tokens > self.threshold_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": f"auto:{self.share_percent:g}",
            "share_percent": self.share_percent,
            "context_window": self.context_window,
            "threshold_tokens": self.threshold_tokens,
            "deferrable_tokens": self.deferrable_tokens,
            "crosses": self.crosses,
            "verdict": "defers" if self.crosses else "stays eager",
        }


@dataclass(frozen=True)
class ServerLoading:
    """One server's figures in each mode the client has (inside a stack: with its shares)."""

    server: str
    always_load: bool
    modes: dict[Mode, ModeFigures]
    mode: Mode  # the mode the client uses for this server

    @property
    def upfront(self) -> int:
        return self.modes[self.mode].upfront

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "always_load": self.always_load,
            "mode": str(self.mode),
            "upfront": self.upfront,
            "modes": {str(m): f.to_dict() for m, f in self.modes.items()},
        }


@dataclass(frozen=True)
class StackLoading:
    client: str
    setting: str
    encoding: str
    mode: Mode  # eager, or deferred (alwaysLoad servers stay eager even then)
    modes: dict[Mode, ModeFigures]
    servers: list[ServerLoading] = field(default_factory=list)
    threshold: Threshold | None = None

    @property
    def upfront(self) -> int:
        return self.modes[self.mode].upfront

    def to_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "setting": self.setting,
            "encoding": self.encoding,
            "mode": str(self.mode),
            "upfront": self.upfront,
            "threshold": self.threshold.to_dict() if self.threshold else None,
            "modes": {str(m): {"upfront": f.upfront, **f.to_dict()["parts"]} for m, f in self.modes.items()},
            "servers": [s.to_dict() for s in self.servers],
        }


def share_out(total: int, weights: Sequence[int]) -> list[int]:
    """`total` split in proportion to `weights`, in whole tokens that add up to `total` exactly
    (largest remainder; ties go to the earlier entry). All-zero weights split evenly."""
    if not weights:
        return []
    if not any(weights):
        weights = [1] * len(weights)
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _eager(server: ServerTools, preset: Preset, enc: str, instructions: int) -> ModeFigures:
    report = profiles.account(server.tools, profile=preset.profile, encoding=enc, server=server.name)
    per_tool = {t.name: t.tokens for t in report.tools}
    return ModeFigures(
        Mode.EAGER,
        report.fixed_tax_tokens + instructions,
        per_tool,
        0,
        0,
        instructions,
        report.overhead_tokens,
        {name: 0 for name in per_tool},
    )


def load_tokens(
    server: ServerTools, client: str | Preset, encoding: str = tokens.DEFAULT_ENCODING
) -> dict[str, int]:
    """Each tool's full definition in the client's rendering: what it costs per request once loaded."""
    preset = preset_for(client)
    enc = tokens.get_encoding(encoding)
    return {
        str(tool.get("name", "")): tokens.count(
            tokens.canonical(profiles.render_tool(preset.profile, tool, server.name)), enc
        )
        for tool in server.tools
    }


def _names(server: ServerTools) -> list[str]:
    return [profiles.qualified_name(server.name, str(t.get("name", ""))) for t in server.tools]


def _deferred_stack(
    servers: Sequence[ServerTools], preset: Preset, encoding: str, eager: list[ModeFigures]
) -> list[ModeFigures]:
    """Each server's deferred figures inside the stack; alwaysLoad servers keep their eager ones.

    The client's name list is one text for the whole stack and its search tool one definition:
    each is counted once, and what is not any one tool's (the list's wrapper, the search tool)
    is shared out per server by its number of deferred tools, so the servers add up to the stack.
    """
    enc = tokens.get_encoding(encoding)
    deferred = [i for i, s in enumerate(servers) if not (s.always_load and preset.client == "claude-code")]
    entries: dict[int, dict[str, int]] = {}
    for i in deferred:
        names = _names(servers[i])
        entries[i] = {
            str(t.get("name", "")): (tokens.count(n + "\n", enc) if preset.lists_names else 0)
            for t, n in zip(servers[i].tools, names, strict=True)
        }
    any_tool = any(servers[i].tools for i in deferred)
    search = tokens.count(tokens.canonical(preset.search_tool), enc) if preset.search_tool and any_tool else 0
    wrapper = 0
    if preset.lists_names and any_tool:
        text = (
            NAME_LIST_OPEN + "".join(n + "\n" for i in deferred for n in _names(servers[i])) + NAME_LIST_CLOSE
        )
        wrapper = tokens.count(text, enc) - sum(sum(e.values()) for e in entries.values())
    weights = [len(servers[i].tools) for i in deferred]
    search_shares = share_out(search, weights)
    wrapper_shares = share_out(wrapper, weights)
    out = list(eager)
    for k, i in enumerate(deferred):
        server = servers[i]
        header = 0
        if preset.server_entry and server.tools:
            namespace = {"type": "namespace", "name": f"mcp__{profiles.server_part(server.name)}"}
            header = tokens.count(tokens.canonical(namespace), enc)
        instructions = eager[i].instructions
        tool_parts = entries[i]
        upfront = sum(tool_parts.values()) + header + search_shares[k] + instructions + wrapper_shares[k]
        out[i] = ModeFigures(
            Mode.DEFERRED,
            upfront,
            tool_parts,
            header,
            search_shares[k],
            instructions,
            wrapper_shares[k],
            load_tokens(server, preset, encoding),
        )
    return out


def stack_figures(
    servers: Iterable[ServerTools],
    client: str | Preset,
    *,
    encoding: str = tokens.DEFAULT_ENCODING,
    setting: str | None = None,
    context_window: int = DEFAULT_CONTEXT_WINDOW,
) -> StackLoading:
    """The stack's figures in every mode its client has, the mode it uses, and (Claude Code) the
    `auto` rule's verdict at `context_window`, whatever the setting."""
    preset = preset_for(client)
    parsed = parse_setting(preset, setting)
    servers = list(servers)
    enc = tokens.get_encoding(encoding)
    instructions = [tokens.count(s.instructions, enc) if s.instructions else 0 for s in servers]
    eager = [_eager(s, preset, encoding, n) for s, n in zip(servers, instructions, strict=True)]
    per_mode: dict[Mode, list[ModeFigures]] = {Mode.EAGER: eager}
    if preset.can_defer:
        per_mode[Mode.DEFERRED] = _deferred_stack(servers, preset, encoding, eager)
    threshold = None
    if preset.client == "claude-code":
        deferrable = sum(
            e.upfront - e.instructions for s, e in zip(servers, eager, strict=True) if not s.always_load
        )
        threshold = Threshold(
            parsed.share_percent, context_window, int(context_window * parsed.share_percent / 100), deferrable
        )
    mode = _resolve(parsed, threshold)
    rows = [
        ServerLoading(
            s.name,
            s.always_load,
            {m: figures[i] for m, figures in per_mode.items()},
            Mode.EAGER if s.always_load and preset.client == "claude-code" else mode,
        )
        for i, s in enumerate(servers)
    ]
    return StackLoading(
        preset.client,
        parsed.raw,
        tokens.public_encoding_name(encoding),
        mode,
        {m: _add(figures, m) for m, figures in per_mode.items()},
        rows,
        threshold,
    )


def _resolve(setting: Setting, threshold: Threshold | None) -> Mode:
    if setting.kind == "eager":
        return Mode.EAGER
    if setting.kind == "auto":
        return Mode.DEFERRED if threshold is not None and threshold.crosses else Mode.EAGER
    return Mode.DEFERRED


def server_figures(
    tools: list[dict[str, Any]],
    client: str | Preset,
    *,
    server: str = "",
    instructions: str | None = None,
    encoding: str = tokens.DEFAULT_ENCODING,
    always_load: bool = False,
    setting: str | None = None,
    context_window: int = DEFAULT_CONTEXT_WINDOW,
) -> ServerLoading:
    """One server on its own (a stack of one): its figures in every mode its client has."""
    stack = stack_figures(
        [ServerTools(server, tools, instructions, always_load)],
        client,
        encoding=encoding,
        setting=setting,
        context_window=context_window,
    )
    return stack.servers[0]
