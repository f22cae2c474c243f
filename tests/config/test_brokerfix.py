"""A Redis restart must not stop a worker: kombu's Redis transport, once its connection is closed,
raised ``AttributeError: 'NoneType' object has no attribute 'hostname'`` while restoring a
channel's unacknowledged messages, which Celery reports as "Unrecoverable error" and exits on.
config/brokerfix.py turns it into a connection error, which the worker recovers from.

Run against the real Redis of the services leg, through kombu's own objects.
"""

from __future__ import annotations

import uuid

import pytest
from kombu import Connection

from config import brokerfix


@pytest.fixture
def redis_url(settings):
    if not settings.REDIS_URL:
        from tests.helpers import need

        need("needs REDIS_URL (a real Redis)")
    return settings.REDIS_URL


def _close_with_an_unacked_message(url: str) -> BaseException | None:
    """What the worker does when the broker drops: the connection is closed (its transport's
    client cleared) while a channel still holds a delivered, unacknowledged message; that channel
    then closes and restores the message ("Restoring 1 unacknowledged message(s)")."""
    conn = Connection(url)
    queue_name = f"brokerfix-{uuid.uuid4().hex}"
    queue = conn.SimpleQueue(queue_name)
    queue.put({"job": 1})
    message = queue.get(timeout=5)
    channel = message.channel
    try:
        conn._do_close_transport()
        channel.close()
    except Exception as exc:  # noqa: BLE001 - the test is about which one
        return exc
    finally:
        import redis

        client = redis.Redis.from_url(url)
        client.hdel("unacked", message.delivery_tag)
        client.zrem("unacked_index", message.delivery_tag)
        client.delete(queue_name, f"_kombu.binding.{queue_name}", f"_kombu.binding_permanent.{queue_name}")
    return None


@pytest.mark.services
def test_restoring_messages_on_a_closed_connection_is_a_connection_error_the_worker_survives(redis_url):
    brokerfix.install()
    error = _close_with_an_unacked_message(redis_url)
    assert error is not None
    assert not isinstance(error, AttributeError), error
    # The worker reconnects on these; anything else is "Unrecoverable error" and the worker exits.
    assert isinstance(error, Connection(redis_url).connection_errors)
    assert "closed" in str(error)


@pytest.mark.services
def test_kombu_still_needs_the_work_around(redis_url, monkeypatch):
    """Without the patch, kombu fails with the AttributeError of the report. When this fails, the
    installed kombu handles a closed connection itself: remove config/brokerfix.py."""
    from kombu.transport import redis as kombu_redis

    brokerfix.install()
    monkeypatch.setattr(kombu_redis.Channel, "_connparams", kombu_redis.Channel._connparams.__wrapped__)
    error = _close_with_an_unacked_message(redis_url)
    assert isinstance(error, AttributeError) and "hostname" in str(error)
