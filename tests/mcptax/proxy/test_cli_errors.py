"""The proxy's command line refuses bad input with one clear line and exit status 2, before it
says it is listening or starts relaying: a port that is not a port, a busy port, --push without
a token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests.mcptax.proxy.support import PROXY, ROOT


def _run(args: list[str], tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "MCP_TAX_TOKEN"} | env
    return subprocess.run(
        [*PROXY, "--server-label", "fs", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=environment,
    )


def test_a_listen_address_without_a_port_is_refused_without_a_traceback(tmp_path):
    done = _run(
        [
            "--log",
            str(tmp_path / "x.jsonl"),
            "--listen",
            "127.0.0.1:notaport",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ],
        tmp_path,
    )
    assert done.returncode == 2
    assert "--listen wants HOST:PORT with a port from 1 to 65535, got '127.0.0.1:notaport'" in done.stderr
    assert "Traceback" not in done.stderr
    too_big = _run(
        [
            "--log",
            str(tmp_path / "x.jsonl"),
            "--listen",
            "127.0.0.1:70000",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ],
        tmp_path,
    )
    assert too_big.returncode == 2 and "port from 1 to 65535" in too_big.stderr


def test_a_busy_port_fails_before_saying_listening(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _run(
            [
                "--log",
                str(tmp_path / "x.jsonl"),
                "--listen",
                f"127.0.0.1:{port}",
                "--upstream",
                "http://127.0.0.1:9/mcp",
            ],
            tmp_path,
        )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "listening" not in done.stderr and "Traceback" not in done.stderr
    # Nothing was logged as started.
    log = tmp_path / "x.jsonl"
    assert not log.exists() or '"event": "start"' not in log.read_text()


def test_push_without_a_token_is_refused_at_start(tmp_path):
    done = _run(["--push", "http://127.0.0.1:9/api/v1/ingest", "--", sys.executable, "-c", "pass"], tmp_path)
    assert done.returncode == 2
    assert "--push needs an API token: give --token or set MCP_TAX_TOKEN" in done.stderr
    with_env = _run(
        [
            "--push",
            "http://127.0.0.1:9/api/v1/ingest",
            "--log",
            str(tmp_path / "x.jsonl"),
            "--",
            sys.executable,
            "-c",
            "pass",
        ],
        tmp_path,
        MCP_TAX_TOKEN="mcpt_abc_def",
    )
    assert "needs an API token" not in with_env.stderr
