"""The envelope logs the ingest benchmarks read, generated: a mixed log of sessions (about 10% of its
frames ``tools/call`` requests with a 1-100 KB bulk argument, 10% their responses, the rest
initialize/list/ping traffic, notifications and stderr lines), and a log whose one call line is many
megabytes, written in pieces. Used by bench_ingest.py and bench_ingest_parallel.py."""

from __future__ import annotations

import json
import random
from pathlib import Path

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


def write_long_line_log(path: Path, megabytes: int) -> int:
    """An envelope log of one session whose only call carries a ``megabytes`` MB argument,
    written in pieces (never held whole); returns its number of lines."""
    head = {"session_id": "long", "server_label": "lean", "transport": "stdio"}

    def line(seq: int, direction: str, raw: object) -> str:
        ts = f"2026-02-01T00:00:{seq:02d}.000000Z"
        return json.dumps({**head, "seq": seq, "ts": ts, "direction": direction, "raw": raw}) + "\n"

    init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "claude-code", "version": "2.0.14"}}
    chunk = "0123456789abcdef" * 65536  # 1 MiB of JSON-safe text
    with open(path, "w", encoding="utf-8") as out:
        out.write(line(1, "c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
        out.write(line(2, "s2c", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "x"}}}))
        call = line(
            3,
            "c2s",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "write", "arguments": {"content": "@BULK@"}},
            },
        )
        before, after = call.split("@BULK@")
        out.write(before)
        for _ in range(megabytes):
            out.write(chunk)
        out.write(after)
        out.write(line(4, "s2c", {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}))
    return 4
