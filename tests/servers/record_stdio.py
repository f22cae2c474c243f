"""Test helper: a stdio pass-through that records every line each side writes.

    python tests/servers/record_stdio.py LOG -- COMMAND [ARG ...]

Runs COMMAND, copies this process's stdin to it and its stdout back, and appends each line to
LOG as JSON: ``{"from": "client" | "server", "message": <the line, parsed>}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading


def main() -> None:
    log_path, separator, *command = sys.argv[1:]
    assert separator == "--", "usage: record_stdio.py LOG -- COMMAND [ARG ...]"
    lock = threading.Lock()
    log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life

    def record(side: str, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = {"unparsed": line.decode("utf-8", "replace")}
        with lock:
            log.write(json.dumps({"from": side, "message": message}) + "\n")
            log.flush()

    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    server_out = server.stdout

    def answers() -> None:
        for line in server_out:
            record("server", line)
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    threading.Thread(target=answers, daemon=True).start()
    for line in sys.stdin.buffer:
        record("client", line)
        server.stdin.write(line)
        server.stdin.flush()
    server.stdin.close()
    sys.exit(server.wait())


if __name__ == "__main__":
    main()
