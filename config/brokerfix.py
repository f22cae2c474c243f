"""A work-around for kombu's Redis transport (5.7), so a Redis restart cannot kill a worker.

What happens: when the broker connection drops, the worker closes the connection. Closing it
clears the transport's ``client`` (``Connection._do_close_transport``), and a channel of that
connection that still holds unacknowledged messages restores them afterwards ("Restoring N
unacknowledged message(s)", ``QoS.restore_unacked_once``, also on garbage collection) or acks a
finished task. Each needs a Redis client, and when the channel's pool is gone it builds a new one
from ``self.connection.client``, which is None by then: ``AttributeError: 'NoneType' object has
no attribute 'hostname'`` in ``Channel._connparams``. Celery treats an AttributeError as a bug, not
a connection error, so the worker stops with "Unrecoverable error".

The fix: a channel whose connection is gone raises redis-py's ``ConnectionError`` instead, which
is one of the transport's connection errors: the worker reconnects as it does for any broker
outage. The messages that could not be restored stay in Redis's unacked hash and come back after
the visibility timeout; our own sweeps (a queued ingest job is sent again after
INGEST_QUEUED_RESEND_SECONDS; polls and deliveries have leases) do not wait that long.

``install()`` is idempotent and is called by config.celery. Remove it once kombu checks for a
closed connection there itself (``tests/config/test_brokerfix.py`` says when: it fails once
kombu no longer needs the patch).
"""

from __future__ import annotations

from typing import Any

import redis.exceptions
from kombu.transport import redis as kombu_redis

_MARK = "_mcptax_closed_connection_guard"


def install() -> None:
    channel: Any = kombu_redis.Channel  # the stubs leave the private method out
    if getattr(channel._connparams, _MARK, False):
        return
    original = channel._connparams

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        if self.connection is None or self.connection.client is None:
            raise redis.exceptions.ConnectionError(
                "the broker connection of this channel was closed (Redis went away); reconnecting"
            )
        return original(self, asynchronous=asynchronous)

    setattr(_connparams, _MARK, True)
    _connparams.__wrapped__ = original  # type: ignore[attr-defined]
    channel._connparams = _connparams
