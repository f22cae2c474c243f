"""The one way a child started in its own process group is stopped.

The policy, for every caller: SIGTERM the group, give it ``term_grace`` seconds, SIGKILL the group
if the leader is still running, SIGKILL the group once more anyway (helpers the leader started must
not outlive it, even when the leader exited by itself), then reap the leader.

Children must be started with ``start_new_session=True`` so that the group id is their pid.
Synchronous callers (``subprocess.Popen``) use :func:`stop_process_groups`; asyncio/anyio callers
use :func:`stop_process_group_async`. Both take their timing from the same defaults.

A process that is about to die cannot wait for its callers' ``finally`` blocks, so the groups it
started are also kept in a per-process registry (:func:`track_group` while a group may be alive):
:func:`kill_tracked_groups` SIGKILLs every one of them, from a shutdown hook or a signal handler.
A Celery worker calls it when it shuts down (``config/celery.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence

import anyio
import anyio.abc

TERM_GRACE = 1.0
KILL_GRACE = 2.0


# No lock: set.add/discard and list(set) are atomic under the GIL, and a signal handler that
# interrupted a holder of a lock would wait for it forever.
_tracked: set[int] = set()
_killed_at_shutdown: set[int] = set()


def track_group(pgid: int) -> None:
    """Record a live process group this process started (until :func:`untrack_group`)."""
    _tracked.add(pgid)


def untrack_group(pgid: int) -> None:
    _tracked.discard(pgid)


def tracked_groups() -> list[int]:
    return sorted(_tracked)


def kill_tracked_groups() -> list[int]:
    """SIGKILL every tracked group at once and return their ids; safe in a signal handler.

    SIGKILL, not the SIGTERM-then-wait policy: the caller is shutting down and cannot wait, and
    whatever a poll subject was doing is abandoned anyway. The owners still reap their leaders.
    """
    groups = list(_tracked)
    for pgid in groups:
        _killed_at_shutdown.add(pgid)
        signal_group(pgid, signal.SIGKILL)
    return groups


def killed_at_shutdown(pgid: int) -> bool:
    """Whether :func:`kill_tracked_groups` killed this group (its owner should not blame it)."""
    return pgid in _killed_at_shutdown


def signal_group(pgid: int, signum: int) -> None:
    """Signal a whole process group; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def stop_process_groups(
    processes: Sequence[subprocess.Popen[bytes]],
    *,
    term_grace: float = TERM_GRACE,
    kill_grace: float = KILL_GRACE,
) -> None:
    """Stop several groups at once: they share one SIGTERM grace, so stopping N takes no longer
    than stopping one."""
    running = [p for p in processes if p.poll() is None]
    for process in running:
        signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + term_grace
    for process in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        signal_group(process.pid, signal.SIGKILL)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=kill_grace)


def stop_process_group(
    process: subprocess.Popen[bytes], *, term_grace: float = TERM_GRACE, kill_grace: float = KILL_GRACE
) -> None:
    stop_process_groups([process], term_grace=term_grace, kill_grace=kill_grace)


async def wait_for_exit(process: anyio.abc.Process, timeout: float) -> bool:
    """Whether the process exited within ``timeout`` seconds."""
    # Polling, not process.wait(): asyncio's wait also waits for the pipes to close, which a
    # surviving grandchild holding them would delay indefinitely.
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True


async def stop_process_group_async(
    process: anyio.abc.Process, *, term_grace: float = TERM_GRACE, kill_grace: float = KILL_GRACE
) -> None:
    if process.returncode is None:
        signal_group(process.pid, signal.SIGTERM)
        if not await wait_for_exit(process, term_grace):
            signal_group(process.pid, signal.SIGKILL)
            await wait_for_exit(process, kill_grace)
    signal_group(process.pid, signal.SIGKILL)
    with anyio.move_on_after(kill_grace):
        await process.aclose()
