"""The specs a client config is read into (stacks of servers, skipped entries), the errors, and
the shapes understood."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TRANSPORTS = ("stdio", "http", "sse")
KNOWN_SHAPES = (
    "'mcpServers' (Claude Desktop, Claude Code, Cursor, Windsurf, Cline, Roo, Kiro, Gemini CLI, "
    "Amazon Q, LibreChat librechat.yaml)",
    "Claude Code ~/.claude.json (user 'mcpServers' and 'projects.<path>.mcpServers')",
    "a Claude Code plugin .mcp.json (servers at the top level)",
    "'servers' or 'mcp.servers' (VS Code)",
    "'context_servers' (Zed)",
    "[mcp_servers.<name>] tables (Codex config.toml)",
    "'extensions' (Goose config.yaml)",
    "a 'mcpServers' list (Continue config.yaml and .continue/mcpServers/*.yaml)",
    "'mcp' with local/remote servers (opencode.json, JSONC)",
)


class ConfigError(ValueError):
    """The file is not a client config this module understands; the message says why."""


class EntryError(ConfigError):
    """One entry of a config cannot be imported; the rest of the file still is."""


@dataclass
class ServerSpec:
    name: str
    transport: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    disabled: bool = False
    placeholders: list[str] = field(default_factory=list)
    always_load: bool = False  # Claude Code's `alwaysLoad`: never deferred behind tool search
    # Why the entry is imported switched off when the file itself does not say so (a placeholder).
    disabled_reason: str = ""
    # What the entry holds that is kept on the developer's machine, never read (an env file).
    notes: list[str] = field(default_factory=list)

    def definition(self) -> tuple[str, str, tuple[str, ...], str, str]:
        """What makes two entries the same server: how it is started or reached, not its secrets."""
        return (self.transport, self.command, tuple(self.args), self.cwd, self.url)


@dataclass(frozen=True)
class SkippedEntry:
    name: str
    reason: str


@dataclass
class StackSpec:
    """The servers of one scope of a config. `scope` is None for the file's main list, else the
    project path it belongs to (Claude Code's per-project servers)."""

    shape: str
    servers: list[ServerSpec]
    scope: str | None = None
    skipped: list[SkippedEntry] = field(default_factory=list)
    # ENABLE_TOOL_SEARCH from the file's `env` (Claude Code settings), kept as written.
    tool_search: str | None = None

    def name(self, base: str) -> str:
        return self.scope if self.scope else base


EntryReader = Callable[[str, dict[str, Any]], ServerSpec]


def _unknown(what: str) -> str:
    return f"{what}; the shapes understood are: " + "; ".join(KNOWN_SHAPES)
