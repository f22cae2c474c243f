"""Ingest benchmark: a generated 100,000-frame envelope log into PostgreSQL, beside the raw cost.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax_bench .venv/bin/python scripts/bench_ingest.py

About 10% of the frames are ``tools/call`` requests carrying a 1-100 KB bulk argument (and 10%
their responses); the rest are initialize/list/ping traffic, notifications and stderr lines. The
script creates the database if it is missing, migrates it, ingests the log into a fresh team
and prints frames/s and MB/s of (a) the full ingest and (b) only parsing, hashing and tokenizing
the same log (``mcptax.formats.read_calls`` + ``mcptax.bulk.find_bulk_arguments``), and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/mcptax_bench"

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "café",
    "naïve",
    "—",
    "✓",
    "42",
    "data",
    "row",
    "value",
]


def _text(rng: random.Random, size: int) -> str:
    parts, total = [], 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))) + "\n"
        parts.append(line)
        total += len(line.encode())
    return "".join(parts)


def generate(path: Path, frames: int, seed: int = 7) -> dict[str, int]:
    """Write ``frames`` envelope lines; return what was written."""
    rng = random.Random(seed)
    written = {"frames": 0, "calls": 0, "bulk_bytes": 0}
    seq = 0
    session = 0
    pool = [_text(rng, 100 * 1024) for _ in range(8)]  # slices of these make the pastes

    with open(path, "w", encoding="utf-8") as out:

        def frame(direction: str, raw: object, **extra: object) -> None:
            nonlocal seq
            seq += 1
            record = {
                "session_id": f"bench-{session}",
                "server_label": "lean",
                "seq": seq,
                "ts": f"2026-02-01T{(seq // 3600) % 24:02d}:{(seq // 60) % 60:02d}:{seq % 60:02d}.{seq % 10**6:06d}Z",
                "direction": direction,
                "transport": "stdio",
                "raw": raw,
                **extra,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            written["frames"] += 1

        while written["frames"] < frames:
            if frames - written["frames"] < 8:  # too few left for a session: pad with stderr lines
                frame("stderr", None, text="server log line")
                continue
            session += 1
            seq = 0
            client = rng.choice(
                [("claude-code", "2.0.14"), ("codex-mcp-client", "0.40.0"), ("cursor-vscode", "1.7")]
            )
            init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": client[0], "version": client[1]}}
            frame("c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            frame(
                "s2c",
                {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "files-lean", "version": "2"}}},
            )
            frame("c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"})
            next_id = 1
            for _ in range(rng.randint(20, 60)):
                if written["frames"] >= frames - 2:
                    break
                roll = rng.random()
                if roll < 0.2:  # a fifth of the frame pairs: 10% tools/call requests, 10% their responses
                    size = rng.randint(1024, 100 * 1024)
                    start = rng.randint(0, 8 * 1024)
                    body = (rng.choice(pool) * 2)[start : start + size]
                    args = {"target": f"f{next_id}.md", "content": body}
                    frame(
                        "c2s",
                        {
                            "jsonrpc": "2.0",
                            "id": next_id,
                            "method": "tools/call",
                            "params": {"name": "write", "arguments": args},
                        },
                    )
                    frame(
                        "s2c",
                        {
                            "jsonrpc": "2.0",
                            "id": next_id,
                            "result": {"content": [{"type": "text", "text": "ok"}]},
                        },
                    )
                    written["calls"] += 1
                    written["bulk_bytes"] += len(body.encode())
                elif roll < 0.55:
                    frame("c2s", {"jsonrpc": "2.0", "id": next_id, "method": "tools/list"})
                    tools = [
                        {"name": f"t{i}", "description": "d" * 80, "inputSchema": {"type": "object"}}
                        for i in range(5)
                    ]
                    frame("s2c", {"jsonrpc": "2.0", "id": next_id, "result": {"tools": tools}})
                elif roll < 0.85:
                    frame("c2s", {"jsonrpc": "2.0", "id": next_id, "method": "ping"})
                    frame("s2c", {"jsonrpc": "2.0", "id": next_id, "result": {}})
                else:
                    frame(
                        "s2c", {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "hi"}}
                    )
                    frame("stderr", None, text="server log line " + "x" * rng.randint(0, 80))
                next_id += 1
    return written


def ensure_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def raw_cost(path: Path) -> tuple[float, int, int]:
    """Seconds to parse, assemble, hash and tokenize the log with no database; (s, calls, bulk)."""
    from mcptax.bulk import find_bulk_arguments
    from mcptax.formats import ObservedCall, read_calls

    started = time.perf_counter()
    calls = bulk = 0
    with open(path, "rb") as f:
        for item in read_calls(f, "envelope"):
            if isinstance(item, ObservedCall):
                calls += 1
                bulk += len(find_bulk_arguments(item.arguments))
    return time.perf_counter() - started, calls, bulk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--keep-log", help="write the generated log here and keep it")
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", DEFAULT_DB)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    url = os.environ["DATABASE_URL"]
    if url.startswith("postgres"):
        ensure_database(url)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from dashboard.teams.models import Team
    from ingest.capture.pipeline import ingest_path
    from mcptax.bulk import count_tokens

    call_command("migrate", verbosity=0, skip_checks=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    path = Path(args.keep_log) if args.keep_log else workdir / "bench.jsonl"
    t0 = time.perf_counter()
    written = generate(path, args.frames)
    size = path.stat().st_size
    mb = size / 1e6
    print(
        f"generated {written['frames']} frames, {written['calls']} tools/call with bulk "
        f"({written['bulk_bytes'] / 1e6:.1f} MB of bulk), {mb:.1f} MB in {time.perf_counter() - t0:.1f} s"
    )
    count_tokens("warm up the tokenizer")

    raw_s, calls, bulk = raw_cost(path)
    team = Team.objects.create(name=f"bench {time.strftime('%Y%m%d-%H%M%S')}")
    started = time.perf_counter()
    job = ingest_path(team, path, format="envelope")
    ingest_s = time.perf_counter() - started
    assert job.status == "done" and job.reconciles and job.lines_read == written["frames"], job.error
    assert job.calls_stored == calls == written["calls"], (job.calls_stored, calls)

    frames = written["frames"]
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    print(
        f"ingest job: read {job.lines_read}, stored {job.stored}, ignored {job.ignored}, "
        f"quarantined {job.quarantined}, calls {job.calls_stored}, bulk arguments {bulk}"
    )
    print(f"raw parse+hash+tokenize: {raw_s:7.2f} s  {frames / raw_s:9.0f} frames/s  {mb / raw_s:7.2f} MB/s")
    print(
        f"full ingest (database):  {ingest_s:7.2f} s  {frames / ingest_s:9.0f} frames/s  {mb / ingest_s:7.2f} MB/s"
    )
    print(
        f"ratio ingest/raw time: {ingest_s / raw_s:.2f}x (the ingest runs at {100 * raw_s / ingest_s:.0f}% of raw speed)"
    )
    if not args.keep_log:
        path.unlink()
        workdir.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
