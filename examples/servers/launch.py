"""Start the example servers as real subprocesses, for the demo command and for tests.

``serve_http("lean", "--grown")`` is a context manager that runs
``python -m examples.servers.lean --transport http`` on a free loopback port, waits until the port
accepts connections, yields the Streamable HTTP URL and always terminates and reaps the process
(its whole process group) on the way out. ``stdio_command("sprawling")`` returns the
``(command, args, env)`` that launch the same server over stdio, and ``stdio_parameters`` wraps it
into the SDK's ``StdioServerParameters``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from mcptax.procgroup import stop_process_group

PROJECT_ROOT = Path(__file__).resolve().parents[2]
URL_PATHS = {"http": "/mcp", "sse": "/sse"}
STOP_GRACE_SECONDS = 5.0
STARTUP_ATTEMPTS = 3


class ServerStartError(RuntimeError):
    pass


def module_name(server: str) -> str:
    """Accept ``"lean"`` as well as ``"examples.servers.lean"``."""
    return server if "." in server else f"examples.servers.{server}"


def _child_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    # The examples package lives in the project tree, which need not be installed.
    pythonpath = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": pythonpath, **(extra or {})}


def stdio_command(
    server: str, *args: str, env: Mapping[str, str] | None = None
) -> tuple[str, list[str], dict[str, str]]:
    """``(command, args, env)`` running an example server over stdio with this interpreter.

    ``env`` holds only the variables to add; the MCP SDK merges them over its safe default
    environment, which is why PYTHONPATH has to be passed explicitly.
    """
    return sys.executable, ["-m", module_name(server), "--transport", "stdio", *args], _child_env(env)


def stdio_parameters(server: str, *args: str, env: Mapping[str, str] | None = None) -> StdioServerParameters:
    command, argv, child_env = stdio_command(server, *args, env=env)
    return StdioServerParameters(command=command, args=argv, env=child_env)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def serve_http(
    server: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    transport: str = "http",
    startup_timeout: float = 20.0,
    log_path: str | os.PathLike[str] | None = None,
) -> Iterator[str]:
    """Run an example server over Streamable HTTP (or ``transport="sse"``) on a free loopback port
    and yield its URL."""
    last_error = ""
    for _attempt in range(STARTUP_ATTEMPTS):
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            module_name(server),
            "--transport",
            transport,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *args,
        ]
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed below
        process = subprocess.Popen(
            argv,
            env={**os.environ, **_child_env(env)},
            cwd=PROJECT_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + startup_timeout
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    # Most likely someone took the port between free_port() and the bind: retry.
                    last_error = f"{module_name(server)} exited with code {process.returncode} on port {port}"
                    break
                if _accepts_connections(port):
                    yield f"http://127.0.0.1:{port}{URL_PATHS[transport]}"
                    return
                time.sleep(0.05)
            else:
                last_error = f"{module_name(server)} did not accept connections within {startup_timeout} s"
                break
        finally:
            stop_process_group(process, term_grace=STOP_GRACE_SECONDS, kill_grace=STOP_GRACE_SECONDS)
            if log is not subprocess.DEVNULL:
                log.close()
    raise ServerStartError(last_error)
