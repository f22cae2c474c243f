"""What the client tests share: targets for the example servers, a fetch with roomy limits, and
process-state probes (read from /proc, not from the client under test)."""

from __future__ import annotations

from typing import Any

from examples.servers.launch import stdio_command
from mcptax.client import FetchResult, ServerTarget, fetch_tools_sync
from mcptax.outbound import OutboundPolicy
from tests.helpers import CONNECT_BUDGET, LOOPBACK_NETWORKS, compact, wait_until

CONNECT_TIMEOUT = 2.0
TOTAL_TIMEOUT = 4.0
# Timeouts no fault may wait for: a fault noticed at once cannot be reported as a timeout.
NEVER = {"connect_timeout": CONNECT_BUDGET, "total_timeout": 2 * CONNECT_BUDGET}
MAX_BYTES = 2_000_000
# The example servers listen on loopback.
LOOPBACK = OutboundPolicy.from_entries(LOOPBACK_NETWORKS)


def stdio_target(server: str, *args: str, env: dict[str, str] | None = None) -> ServerTarget:
    command, argv, child_env = stdio_command(server, *args, env=env)
    return ServerTarget("stdio", command=command, args=argv, env=child_env)


def fetch(target: ServerTarget, **overrides: Any) -> FetchResult:
    # Roomy: spawning a server on a loaded 2-core machine can take many seconds, and these calls are
    # not about timeouts (the tests that are pass their own).
    options: dict[str, Any] = {
        **NEVER,
        "max_bytes": MAX_BYTES,
        "outbound": LOOPBACK,
        **overrides,
    }
    return fetch_tools_sync(target, **options)


def compact_size(value: Any) -> int:
    """Bytes of the compact JSON a client would send for ``value`` (the payload_bytes definition)."""
    return len(compact(value).encode("utf-8"))


def process_state(pid: int) -> str:
    """'gone' once reaped, else the /proc state letter ('Z' for a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def assert_dead(pid: int) -> None:
    """``pid`` is reaped or a zombie, allowing a killed process a moment to be scheduled out."""
    wait_until(lambda: process_state(pid) in ("gone", "Z"), timeout=30, message=f"pid {pid} to die")
