"""A requested poll ("poll now") until the worker has run it: the token a page carries in its
refresh URL, and whether the poll still counts as running."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from dashboard.servers.models import McpServer

# A "poll now" whose worker has not picked it up yet still counts as running for this long.
PENDING_POLL_GRACE = timedelta(minutes=2)
# A server's first poll waits for the dispatcher's next tick, and a stdio server's first start may
# download its package: the page waits longer for it.
FIRST_POLL_WAIT = timedelta(minutes=5)


def parse_pending(raw: str | None) -> tuple[int, datetime] | None:
    """`<server id>:<epoch seconds>`, as carried by a poll-now refresh URL."""
    if not raw or ":" not in raw:
        return None
    pk, _, stamp = raw.partition(":")
    try:
        return int(pk), datetime.fromtimestamp(float(stamp), tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


def pending_token(server: McpServer, at: datetime | None = None) -> str:
    return f"{server.pk}:{(at or timezone.now()).timestamp():.6f}"


def poll_in_flight(
    server: McpServer, pending: tuple[int, datetime] | None, now: datetime | None = None
) -> bool:
    """Polling now, or asked to poll (poll now) and the worker has not finished it yet."""
    if server.is_polling:
        return True
    if pending is None or pending[0] != server.pk:
        return False
    now = now or timezone.now()
    requested = pending[1]
    if requested > now + timedelta(seconds=5):
        return False  # a request "from the future" is not ours; never poll forever on it
    finished = server.last_poll_at is not None and server.last_poll_at >= requested
    return not finished and now - requested < PENDING_POLL_GRACE


def first_poll_pending(server: McpServer, now: datetime | None = None) -> tuple[int, datetime] | None:
    """A new server's first poll, as if requested when the server was created: it is due at once
    (the dispatcher sends it within a tick), so the page waits for it like a "poll now"."""
    now = now or timezone.now()
    # A lock left by a worker that died is no poll to wait for: the page says it was abandoned.
    stale = server.lock_is_stale(now)
    if (
        server.enabled
        and server.last_poll_at is None
        and not stale
        and now - server.created < FIRST_POLL_WAIT
    ):
        return server.pk, server.created
    return None
