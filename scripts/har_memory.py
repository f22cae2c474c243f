"""Peak memory of reading a large HAR: parsed whole (how every HAR was read before) or streamed
entry by entry (what the parser does above ``har.DEFAULT_WHOLE_DOCUMENT_BYTES``).

Usage: ``python scripts/har_memory.py [MEGABYTES]`` (default 60). Each way runs in a fresh child
process; the figure is that process's peak resident set size (ru_maxrss), so it includes the
interpreter (about 20 MB) and is comparable between the two lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _entry(i: int, body_bytes: int) -> dict:
    call = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": f"f{i}.txt", "content": "x" * body_bytes}},
    }
    result = {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "ok"}]}}
    return {
        "startedDateTime": "2026-01-02T03:04:05.000Z",
        "time": 12,
        "request": {
            "method": "POST",
            "url": "http://127.0.0.1:8931/mcp",
            "headers": [{"name": "Mcp-Session-Id", "value": "s1"}],
            "postData": {"mimeType": "application/json", "text": json.dumps(call)},
        },
        "response": {
            "status": 200,
            "headers": [],
            "content": {"mimeType": "application/json", "text": json.dumps(result)},
        },
    }


def write_har(path: Path, megabytes: int) -> None:
    body = 20_000
    entries = megabytes * 1024 * 1024 // (body + 600)
    with open(path, "w") as f:
        f.write('{"log": {"version": "1.2", "creator": {"name": "bench", "version": "1"}, "entries": [')
        for i in range(entries):
            f.write(("," if i else "") + json.dumps(_entry(i, body)))
        f.write("]}}")


CHILD = """
import resource, sys
from mcptax.formats import har
whole = sys.argv[2] == "whole"
def blocks():
    with open(sys.argv[1], "rb") as f:
        while block := f.read(1024 * 1024):
            yield block
limit = 1 << 62 if whole else har.DEFAULT_WHOLE_DOCUMENT_BYTES
n = sum(1 for _ in har.parse(blocks(), whole_document_bytes=limit))
print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def measure(path: Path, how: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), how], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return int(out[0]), int(out[1])


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.har"
        write_har(path, megabytes)
        size = path.stat().st_size
        print(f"HAR of {size / 1e6:.1f} MB")
        for how in ("whole", "streamed"):
            entries, peak_kib = measure(path, how)
            print(f"{how:>8}: {entries} entries, peak RSS {peak_kib / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
