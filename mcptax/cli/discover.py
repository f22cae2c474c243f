"""Where the MCP clients installed on this machine keep their server lists (`mcp-tax measure --discover`).

Each location follows the client's own documentation: user-level files under the home directory
(or the platform's application-data folder), project-level files under the current directory.
Only files that exist are returned; reading them is the caller's job.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Found:
    client: str
    scope: str  # "user" or "project"
    path: Path


def _app_data(home: Path, environ: dict[str, str], platform: str) -> Path:
    """The folder desktop applications keep their settings in."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        return Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    return Path(environ.get("XDG_CONFIG_HOME") or home / ".config")


def candidates(
    home: Path, cwd: Path, environ: dict[str, str] | None = None, platform: str | None = None
) -> list[Found]:
    """Every location a supported client reads, in a stable order (existing or not)."""
    environ = dict(os.environ) if environ is None else environ
    platform = platform or sys.platform
    app = _app_data(home, environ, platform)
    codex_home = Path(environ.get("CODEX_HOME") or home / ".codex")
    zed_user = home / ".config" / "zed" if not platform.startswith("win") else app / "Zed"
    out = [
        # Claude Code: user and local scopes live in ~/.claude.json (local scope under
        # projects.<path>), the project scope in .mcp.json at the project root.
        Found("Claude Code", "user", home / ".claude.json"),
        Found("Claude Code", "project", cwd / ".mcp.json"),
        Found("Claude Desktop", "user", app / "Claude" / "claude_desktop_config.json"),
        Found("Cursor", "user", home / ".cursor" / "mcp.json"),
        Found("Cursor", "project", cwd / ".cursor" / "mcp.json"),
        Found("Codex CLI", "user", codex_home / "config.toml"),
        Found("Codex CLI", "project", cwd / ".codex" / "config.toml"),
        Found("Gemini CLI", "user", home / ".gemini" / "settings.json"),
        Found("Gemini CLI", "project", cwd / ".gemini" / "settings.json"),
        Found("Windsurf", "user", home / ".codeium" / "windsurf" / "mcp_config.json"),
        Found("Kiro", "user", home / ".kiro" / "settings" / "mcp.json"),
        Found("Kiro", "project", cwd / ".kiro" / "settings" / "mcp.json"),
        Found("Zed", "user", zed_user / "settings.json"),
        Found("Zed", "project", cwd / ".zed" / "settings.json"),
        Found("VS Code", "project", cwd / ".vscode" / "mcp.json"),
        Found("Roo Code", "project", cwd / ".roo" / "mcp.json"),
        # Goose keeps its extensions in config.yaml (on Windows under %APPDATA%\Block\goose\config).
        Found("Goose", "user", _goose_dir(home, app, platform) / "config.yaml"),
        Found("LibreChat", "project", cwd / "librechat.yaml"),
        # Continue: the user's config.yaml, and a workspace's folder of one-server block files.
        Found("Continue", "user", home / ".continue" / "config.yaml"),
        Found("Continue", "project", cwd / ".continue" / "mcpServers"),
        Found("Amazon Q", "user", home / ".aws" / "amazonq" / "mcp.json"),
        Found("Amazon Q", "project", cwd / ".amazonq" / "mcp.json"),
    ]
    opencode_user = Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    for folder, scope in ((opencode_user, "user"), (cwd, "project"), (cwd / ".opencode", "project")):
        out += [Found("opencode", scope, folder / name) for name in ("opencode.json", "opencode.jsonc")]
    for product, label in (("Code", "VS Code"), ("Code - Insiders", "VS Code Insiders")):
        user = app / product / "User"
        out += [
            Found(label, "user", user / "mcp.json"),
            Found(label, "user", user / "settings.json"),
            Found(
                "Cline",
                "user",
                user / "globalStorage" / "saoudrizwan.claude-dev" / "settings" / "cline_mcp_settings.json",
            ),
            Found(
                "Roo Code",
                "user",
                user / "globalStorage" / "rooveterinaryinc.roo-cline" / "settings" / "mcp_settings.json",
            ),
        ]
    return out


def _goose_dir(home: Path, app: Path, platform: str) -> Path:
    if platform.startswith("win"):
        return app / "Block" / "goose" / "config"
    return home / ".config" / "goose"


def discover(home: Path | None = None, cwd: Path | None = None) -> list[Found]:
    """The client config files (and block-file folders) that exist here, the same one once, under
    its first client."""
    seen: set[Path] = set()
    found = []
    for entry in candidates(home or Path.home(), cwd or Path.cwd()):
        resolved = entry.path.resolve()
        folder = entry.path.name == "mcpServers" and entry.path.is_dir()
        if (entry.path.is_file() or folder) and resolved not in seen:
            seen.add(resolved)
            found.append(entry)
    return found
