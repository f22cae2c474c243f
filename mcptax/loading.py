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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcptax import profiles, tokens
from mcptax.presets import (
    ANTHROPIC_TOOL_SEARCH,
    CLAUDE_CODE_TOOL_SEARCH,
    CLIENTS,
    DEFAULT_AUTO_SHARE,
    DEFAULT_CONTEXT_WINDOW,
    NAME_LIST_CLOSE,
    NAME_LIST_OPEN,
    OPENAI_TOOL_SEARCH,
    PRESETS,
    BadSetting,
    Mode,
    Preset,
    Setting,
    UnknownClient,
    parse_setting,
    preset_for,
)

__all__ = [
    "ANTHROPIC_TOOL_SEARCH",
    "CLAUDE_CODE_TOOL_SEARCH",
    "CLIENTS",
    "DEFAULT_AUTO_SHARE",
    "DEFAULT_CONTEXT_WINDOW",
    "NAME_LIST_CLOSE",
    "NAME_LIST_OPEN",
    "OPENAI_TOOL_SEARCH",
    "PRESETS",
    "BadSetting",
    "Mode",
    "ModeFigures",
    "Preset",
    "ServerLoading",
    "ServerTools",
    "Setting",
    "StackLoading",
    "Threshold",
    "UnknownClient",
    "load_tokens",
    "parse_setting",
    "preset_for",
    "server_figures",
    "share_out",
    "stack_figures",
]


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
    count = tokens.counter(encoding)
    return {
        str(tool.get("name", "")): count(
            tokens.canonical(profiles.render_tool(preset.profile, tool, server.name))
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
    count = tokens.counter(encoding)
    deferred = [i for i, s in enumerate(servers) if not (s.always_load and preset.client == "claude-code")]
    entries: dict[int, dict[str, int]] = {}
    for i in deferred:
        names = _names(servers[i])
        entries[i] = {
            str(t.get("name", "")): (count(n + "\n") if preset.lists_names else 0)
            for t, n in zip(servers[i].tools, names, strict=True)
        }
    any_tool = any(servers[i].tools for i in deferred)
    search = count(tokens.canonical(preset.search_tool)) if preset.search_tool and any_tool else 0
    wrapper = 0
    if preset.lists_names and any_tool:
        text = (
            NAME_LIST_OPEN + "".join(n + "\n" for i in deferred for n in _names(servers[i])) + NAME_LIST_CLOSE
        )
        wrapper = count(text) - sum(sum(e.values()) for e in entries.values())
    weights = [len(servers[i].tools) for i in deferred]
    search_shares = share_out(search, weights)
    wrapper_shares = share_out(wrapper, weights)
    out = list(eager)
    for k, i in enumerate(deferred):
        server = servers[i]
        header = 0
        if preset.server_entry and server.tools:
            namespace = {"type": "namespace", "name": f"mcp__{profiles.server_part(server.name)}"}
            header = count(tokens.canonical(namespace))
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
    count = tokens.counter(encoding)
    instructions = [count(s.instructions) if s.instructions else 0 for s in servers]
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
