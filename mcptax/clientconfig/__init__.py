"""Read the MCP server lists of every client config people have, without Django.

A config file becomes one or more *stacks* (the servers one agent loads). Shapes understood:

- `mcpServers` objects: Claude Desktop, Claude Code `.mcp.json`, Cursor, Windsurf, Cline, Roo Code,
  Kiro, Gemini CLI (`url` is SSE, `httpUrl` is Streamable HTTP), Amazon Q (`mcp.json`), LibreChat
  (`librechat.yaml`; a bare `url` is SSE, and `interface.mcpServers` is permissions, not servers);
- Claude Code's `~/.claude.json`: user servers at the top, and `projects.<path>.mcpServers`, each
  project its own stack named after its path;
- a Claude Code plugin's `.mcp.json`, with the servers at the top level;
- VS Code: `servers` (and `inputs`) in `.vscode/mcp.json`, or `mcp.servers` in settings.json;
- Zed: `context_servers` in settings.json;
- Codex: `[mcp_servers.<name>]` tables in `~/.codex/config.toml`;
- Goose: `extensions` in `~/.config/goose/config.yaml` (`cmd`/`args`/`envs`, `uri`; builtins run
  inside Goose and have no server to poll);
- Continue: a `mcpServers` *list* in `config.yaml`, or one block per file in `.continue/mcpServers/`
  (read a folder with :func:`parse_config_files`);
- opencode: `mcp` in `opencode.json(c)` (`type: local` with a `command` argv array, `type: remote`).

JSON files may be JSONC (comments, trailing commas), as VS Code, Zed and opencode write them; YAML
is read with PyYAML's safe loader only (no tag may construct an object). `${...}` placeholders are
kept as written and listed, never resolved: resolving them would copy a developer's secrets into
the dashboard.

Reading is tolerant: one odd entry never loses the rest of the file. Each entry becomes a server,
a server marked disabled (the file switches it off, or it is a placeholder with an empty command),
or a skipped entry with the reason (malformed, a builtin, a transport nobody can poll).
"""

from __future__ import annotations

from mcptax.clientconfig.entries import PLACEHOLDER
from mcptax.clientconfig.files import (
    FOLDER_SUFFIXES,
    client_of,
    load_text,
    parse_config_files,
    parse_config_text,
    read_config_path,
)
from mcptax.clientconfig.shapes import parse_config
from mcptax.clientconfig.types import (
    KNOWN_SHAPES,
    TRANSPORTS,
    ConfigError,
    EntryError,
    EntryReader,
    ServerSpec,
    SkippedEntry,
    StackSpec,
)

__all__ = [
    "FOLDER_SUFFIXES",
    "KNOWN_SHAPES",
    "PLACEHOLDER",
    "TRANSPORTS",
    "ConfigError",
    "EntryError",
    "EntryReader",
    "ServerSpec",
    "SkippedEntry",
    "StackSpec",
    "client_of",
    "load_text",
    "parse_config",
    "parse_config_files",
    "parse_config_text",
    "read_config_path",
]
