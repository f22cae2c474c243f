"""mcptax.procgroup: the registry a dying process uses to kill the groups it started."""

from __future__ import annotations

import signal
import subprocess
import sys

from mcptax.procgroup import (
    kill_tracked_groups,
    killed_at_shutdown,
    signal_group,
    track_group,
    tracked_groups,
    untrack_group,
)
from tests.mcptax.client.support import assert_dead

# A leader that ignores SIGTERM and a helper in its group: only a SIGKILL of the group ends both.
LEADER = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(helper.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def test_kill_tracked_groups_kills_every_tracked_group_whole_and_only_those():
    started = [
        subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, start_new_session=True)
        for _ in range(3)
    ]
    kept = started[2]  # never tracked: must survive
    try:
        helpers = [int(p.stdout.readline()) for p in started]
        for p in started[:2]:
            track_group(p.pid)
        untrack_group(started[1].pid)  # reaped by its owner already, in real use
        assert tracked_groups() == [started[0].pid]
        assert kill_tracked_groups() == [started[0].pid]
        started[0].wait(timeout=30)
        assert_dead(helpers[0])
        assert killed_at_shutdown(started[0].pid) and not killed_at_shutdown(started[1].pid)
        assert started[1].poll() is None and kept.poll() is None
    finally:
        untrack_group(started[0].pid)
        for p in started:
            signal_group(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
