"""Starting a stdio server's process, without the MCP SDK: a caller that measures many servers
starts them all first and loads the SDK (about 0.7 s) while they boot.

The process gets its own process group (so it can be stopped whole) and is tracked until it is
reaped, so a worker that dies kills it (:mod:`mcptax.procgroup`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

import anyio
import anyio.abc

from mcptax.client.target import PollError, ServerTarget
from mcptax.procgroup import track_group


async def start_server(target: ServerTarget, env: Mapping[str, str]) -> anyio.abc.Process:
    """The running server of `target` with exactly `env`; a `connect_error` when it cannot start."""
    try:
        process = await anyio.open_process(
            [target.command, *target.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=target.cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise PollError("connect_error", f"cannot start {target.command!r}: {exc}") from exc
    track_group(process.pid)
    return process
