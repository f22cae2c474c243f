"""mcptax.client.stdio: the server's process group is stopped and reaped whatever happens."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from mcptax.client import PollError, fetch_tools
from tests.helpers import CONNECT_BUDGET
from tests.mcptax.client.support import MAX_BYTES, assert_dead, fetch, process_state, stdio_target

pytestmark = pytest.mark.timeout(120)


def test_stuck_stdio_server_and_its_helper_are_killed_and_reaped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    target = stdio_target(
        "misbehaving", "--mode", "hang", "--spawn-child", "--ignore-sigterm", "--pid-file", str(pid_file)
    )
    # The hang must come after the server wrote its pid file: the budget lets it start however
    # loaded the machine is (a 1 s budget ran out before the start on a busy machine).
    with pytest.raises(PollError) as caught:
        fetch(target, connect_timeout=CONNECT_BUDGET, total_timeout=CONNECT_BUDGET)
    assert caught.value.outcome == "timeout"
    server_pid, helper_pid = (int(line) for line in pid_file.read_text().split())
    assert process_state(server_pid) == "gone", "the server must be reaped, not left a zombie"
    # The helper was reparented when the server died; whoever reaps orphans here may be slow,
    # but it must not be running.
    assert_dead(helper_pid)


def test_helper_left_by_a_server_that_exits_politely_is_killed(tmp_path: Path) -> None:
    # quirky answers correctly and exits when its stdin closes, but leaves its helper behind.
    pid_file = tmp_path / "pids"
    result = fetch(
        stdio_target("misbehaving", "--mode", "quirky", "--spawn-child", "--pid-file", str(pid_file))
    )
    assert result.pages == 2
    server_pid, helper_pid = (int(line) for line in pid_file.read_text().split())
    assert process_state(server_pid) == "gone"
    assert_dead(helper_pid)


@pytest.mark.slow
def test_stdio_server_is_reaped_when_the_caller_cancels(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    target = stdio_target("misbehaving", "--mode", "hang", "--ignore-sigterm", "--pid-file", str(pid_file))

    async def main() -> bool:
        with anyio.move_on_after(1.5) as scope:
            await fetch_tools(
                target, connect_timeout=CONNECT_BUDGET, total_timeout=2 * CONNECT_BUDGET, max_bytes=MAX_BYTES
            )
        return scope.cancelled_caught

    # The caller's cancellation wins over the 30 s connect timeout, and the server (which
    # ignores SIGTERM) is already reaped when control comes back.
    assert anyio.run(main)
    assert process_state(int(pid_file.read_text().split()[0])) == "gone"


def test_child_environment_is_passed(tmp_path: Path) -> None:
    # The target's env reaches the server (here: the root it writes under).
    out = tmp_path / "root"
    result = fetch(stdio_target("lean", env={"MCP_EXAMPLE_ROOT": str(out)}))
    assert result.server_name == "files-lean"
    assert out.is_dir()
    assert json.loads(json.dumps(result.tools)) == result.tools
    assert os.environ.get("MCP_EXAMPLE_ROOT") is None
