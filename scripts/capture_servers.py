"""Install popular MCP servers from PyPI and npm, poll each one's tools/list, and save the captures.

    .venv/bin/python scripts/capture_servers.py              # all of them
    .venv/bin/python scripts/capture_servers.py --only playwright notion
    .venv/bin/python scripts/capture_servers.py --list       # what would be captured

Each capture is written to tests/data/servers/<name>@<version>.json as
`{"initialize": {"serverInfo": ..., "instructions": ...}, "tools": [...]}`: the raw tools of every
tools/list page in server order, exactly as received, which `manage.py tokens FILE` and
`mcp-tax tokens FILE` read. The suite runs tokens, findings, the gate, the diff and the server page
over every capture, so the product is tested against what users really run.

Installs are cached under var/servers/ (npm packages in one prefix, each PyPI server in its own
virtualenv, because their pinned dependencies conflict), so a second run installs nothing. No
server here needs a credential to list its tools; the few that refuse to start without one get a
placeholder value, which listing tools never sends anywhere.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import venv
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcptax.client import FetchResult, PollError, ServerTarget, fetch_tools_sync  # noqa: E402

OUT_DIR = ROOT / "tests" / "data" / "servers"
PLACEHOLDER = "placeholder-not-a-real-credential"


@dataclass(frozen=True)
class CorpusServer:
    name: str
    registry: str  # "npm" or "pypi"
    package: str
    version: str
    bin: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def capture_name(self) -> str:
        return f"{self.name}@{self.version}.json"


CORPUS: list[CorpusServer] = [
    CorpusServer("playwright", "npm", "@playwright/mcp", "0.0.83", "playwright-mcp"),
    CorpusServer("notion", "npm", "@notionhq/notion-mcp-server", "2.5.2", "notion-mcp-server"),
    CorpusServer("github", "npm", "@modelcontextprotocol/server-github", "2025.4.8", "mcp-server-github"),
    CorpusServer("context7", "npm", "@upstash/context7-mcp", "4.1.1", "context7-mcp"),
    CorpusServer("chrome-devtools", "npm", "chrome-devtools-mcp", "1.11.0", "chrome-devtools-mcp"),
    CorpusServer(
        "filesystem",
        "npm",
        "@modelcontextprotocol/server-filesystem",
        "2026.8.31",
        "mcp-server-filesystem",
        args=("{tmp}",),
    ),
    CorpusServer("memory", "npm", "@modelcontextprotocol/server-memory", "2026.8.31", "mcp-server-memory"),
    CorpusServer(
        "sequential-thinking",
        "npm",
        "@modelcontextprotocol/server-sequential-thinking",
        "2026.8.31",
        "mcp-server-sequential-thinking",
    ),
    CorpusServer(
        "everything", "npm", "@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything"
    ),
    CorpusServer(
        "postgres",
        "npm",
        "@modelcontextprotocol/server-postgres",
        "0.6.2",
        "mcp-server-postgres",
        args=("postgresql://127.0.0.1:5432/postgres",),
    ),
    CorpusServer("redis", "npm", "@modelcontextprotocol/server-redis", "2025.4.25", "mcp-server-redis"),
    CorpusServer(
        "brave-search",
        "npm",
        "@modelcontextprotocol/server-brave-search",
        "0.6.2",
        "mcp-server-brave-search",
        env={"BRAVE_API_KEY": PLACEHOLDER},
    ),
    CorpusServer(
        "slack",
        "npm",
        "@modelcontextprotocol/server-slack",
        "2025.4.25",
        "mcp-server-slack",
        env={"SLACK_BOT_TOKEN": PLACEHOLDER, "SLACK_TEAM_ID": PLACEHOLDER},
    ),
    CorpusServer(
        "gitlab",
        "npm",
        "@modelcontextprotocol/server-gitlab",
        "2025.4.25",
        "mcp-server-gitlab",
        env={"GITLAB_PERSONAL_ACCESS_TOKEN": PLACEHOLDER},
    ),
    CorpusServer(
        "google-maps",
        "npm",
        "@modelcontextprotocol/server-google-maps",
        "0.6.2",
        "mcp-server-google-maps",
        env={"GOOGLE_MAPS_API_KEY": PLACEHOLDER},
    ),
    CorpusServer(
        "desktop-commander", "npm", "@wonderwhy-er/desktop-commander", "0.2.52", "desktop-commander"
    ),
    CorpusServer("tavily", "npm", "tavily-mcp", "0.2.22", "tavily-mcp"),
    CorpusServer("firecrawl", "npm", "firecrawl-mcp", "3.26.0", "firecrawl-mcp"),
    CorpusServer("exa", "npm", "exa-mcp-server", "3.4.1", "exa-mcp-server"),
    CorpusServer("kubernetes", "npm", "mcp-server-kubernetes", "4.1.7", "mcp-server-kubernetes"),
    CorpusServer(
        "sentry", "npm", "@sentry/mcp-server", "0.39.0", "sentry-mcp", args=(f"--access-token={PLACEHOLDER}",)
    ),
    CorpusServer(
        "time", "pypi", "mcp-server-time", "2026.10.19", "mcp-server-time", args=("--local-timezone", "UTC")
    ),
    CorpusServer("fetch", "pypi", "mcp-server-fetch", "2026.10.24", "mcp-server-fetch"),
    CorpusServer("git", "pypi", "mcp-server-git", "2026.10.19", "mcp-server-git"),
    CorpusServer("calculator", "pypi", "mcp-server-calculator", "0.2.1", "mcp-server-calculator"),
    CorpusServer("duckduckgo", "pypi", "duckduckgo-mcp-server", "0.7.0", "duckduckgo-mcp-server"),
    CorpusServer("wikipedia", "pypi", "wikipedia-mcp", "2.0.1", "wikipedia-mcp"),
    CorpusServer(
        "arxiv", "pypi", "arxiv-mcp-server", "0.8.2", "arxiv-mcp-server", args=("--storage-path", "{tmp}")
    ),
]


def servers_dir() -> Path:
    return Path(os.environ.get("VAR_DIR", ROOT / "var")) / "servers"


def npm_prefix() -> Path:
    return servers_dir() / "npm"


def _installed_npm_version(server: CorpusServer) -> str | None:
    manifest = npm_prefix() / "node_modules" / server.package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def install_npm(servers: list[CorpusServer]) -> None:
    missing = [s for s in servers if _installed_npm_version(s) != s.version]
    if not missing:
        return
    prefix = npm_prefix()
    prefix.mkdir(parents=True, exist_ok=True)
    if not (prefix / "package.json").exists():
        (prefix / "package.json").write_text('{"name": "mcp-tax-server-corpus", "private": true}\n')
    # --ignore-scripts: no install script downloads a browser or a binary of its own.
    cmd = ["npm", "install", "--prefix", str(prefix), "--ignore-scripts", "--no-audit", "--no-fund"]
    subprocess.run([*cmd, *(f"{s.package}@{s.version}" for s in missing)], check=True)


def pypi_venv(server: CorpusServer) -> Path:
    return servers_dir() / "pypi" / server.name


def install_pypi(server: CorpusServer) -> None:
    env_dir = pypi_venv(server)
    stamp = env_dir / ".installed"
    wanted = f"{server.package}=={server.version}"
    if stamp.exists() and stamp.read_text() == wanted:
        return
    venv.create(env_dir, with_pip=True, clear=True)
    subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", wanted], check=True)
    stamp.write_text(wanted)


def install(servers: list[CorpusServer]) -> None:
    install_npm([s for s in servers if s.registry == "npm"])
    pypi = [s for s in servers if s.registry == "pypi"]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(install_pypi, pypi))


def target_for(server: CorpusServer, tmp: Path) -> ServerTarget:
    if server.registry == "npm":
        command = npm_prefix() / "node_modules" / ".bin" / server.bin
    else:
        command = pypi_venv(server) / "bin" / server.bin
    args = [a.replace("{tmp}", str(tmp)) for a in server.args]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), **server.env}
    return ServerTarget("stdio", command=str(command), args=args, env=env, cwd=str(tmp))


def poll(server: CorpusServer, tmp: Path, timeout: float = 60.0) -> FetchResult:
    return fetch_tools_sync(
        target_for(server, tmp), connect_timeout=timeout, total_timeout=timeout, max_bytes=64 * 1024 * 1024
    )


def capture_document(result: FetchResult) -> dict[str, object]:
    server_info = {"name": result.server_name, "version": result.server_version}
    if result.server_title:
        server_info["title"] = result.server_title
    initialize: dict[str, object] = {"protocolVersion": result.protocol_version, "serverInfo": server_info}
    if result.instructions:
        initialize["instructions"] = result.instructions
    return {"initialize": initialize, "tools": result.tools}


def capture(server: CorpusServer, out_dir: Path, tmp_root: Path) -> tuple[CorpusServer, str]:
    tmp = tmp_root / server.name
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        result = poll(server, tmp)
    except PollError as exc:
        return server, f"FAILED {exc.outcome}: {str(exc)[:200]}"
    # Written as received (no re-ordering of keys), so the capture's sha256 is the snapshot identity.
    document = capture_document(result)
    text = json.dumps(document, ensure_ascii=False, indent=1) + "\n"
    (out_dir / server.capture_name).write_text(text, encoding="utf-8")
    return server, f"ok  {len(result.tools):3d} tools, {result.payload_bytes:7d} bytes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="names to capture (default: all)")
    parser.add_argument("--list", action="store_true", help="print the corpus and exit")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    chosen = [s for s in CORPUS if not args.only or s.name in args.only]
    if args.list:
        for s in chosen:
            print(f"{s.name:22s} {s.registry:5s} {s.package}@{s.version}")
        return 0
    install(chosen)
    args.out.mkdir(parents=True, exist_ok=True)
    tmp_root = servers_dir() / "tmp"
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        for server, line in pool.map(lambda s: capture(s, args.out, tmp_root), chosen):
            print(f"{server.name:22s} {server.version:12s} {line}")
            failed += line.startswith("FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
