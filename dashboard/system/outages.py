"""Broker and database outages: what counts as one, and where a process records it.

An outage cannot be stored in the part that is down, so each process keeps its own counts (per
kind: how many, first and last time, the last message) in memory and writes them, on every error,
to each store that does not depend on the failing part:

- the database (`OutageRecord`): for broker errors (Redis down leaves PostgreSQL up);
- Redis (one hash, `REDIS_URL`): for database errors; every host of the full stack reads it;
- a file per process under `VAR_DIR/health/`: for both kinds; the embedded run (one host, no
  Redis) and every process sharing the `var/` volume read it, and it survives both being down.

Readers merge every store they reach (and their own memory), keeping each process's latest counts.
Recording never raises: a failing store is skipped.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import kombu.exceptions
import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

logger = logging.getLogger(__name__)

DATABASE, BROKER = "database", "broker"
# A process's record is forgotten once it is this old (files pruned, Redis fields dropped).
KEEP_FOR = timedelta(days=7)
REDIS_KEY = "mcptax:health:outages"
# Seconds a client waits before trying again after a 503 for an outage.
RETRY_AFTER_SECONDS = 30

# Everything the broker's client raises when the broker cannot be reached: kombu's own errors
# (publishing through Celery, the filesystem transport's ChannelError) and redis-py's (the cache).
BROKER_ERRORS: tuple[type[BaseException], ...] = (
    kombu.exceptions.OperationalError,
    kombu.exceptions.ChannelError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
# The database is unreachable or dropped the connection (not a constraint or a bad query).
DATABASE_ERRORS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)


class ServiceUnavailable(Exception):
    """A request needs a part that is down; answered 503 with Retry-After (never a 500)."""

    def __init__(self, kind: str, detail: str, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.retry_after = retry_after


def kind_of(exc: BaseException) -> str | None:
    """`broker`, `database`, or None when `exc` is no outage (the cause chain is followed)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ServiceUnavailable):
            return current.kind
        if isinstance(current, BROKER_ERRORS):
            return BROKER
        if isinstance(current, DATABASE_ERRORS):
            return DATABASE
        current = current.__cause__ or current.__context__
    return None


def unavailable_message(kind: str) -> str:
    part = "task queue (the broker, Redis)" if kind == BROKER else "database"
    return f"The {part} is unavailable right now; try again in {RETRY_AFTER_SECONDS} s."


@dataclass(frozen=True)
class Entry:
    """One process's counts of one kind."""

    source: str
    kind: str
    count: int
    first_at: datetime
    last_at: datetime
    message: str
    where: str = ""

    def to_json(self) -> str:
        data = asdict(self)
        data["first_at"] = self.first_at.isoformat()
        data["last_at"] = self.last_at.isoformat()
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> Entry:
        data = json.loads(text)
        data["first_at"] = datetime.fromisoformat(data["first_at"])
        data["last_at"] = datetime.fromisoformat(data["last_at"])
        return cls(**data)


_lock = threading.Lock()
_mine: dict[str, Entry] = {}


def source() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def record(kind: str, exc: BaseException | str, where: str = "") -> Entry:
    """Count one outage of `kind` in this process and write the counts where they survive it."""
    message = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}".strip()
    now = timezone.now()
    with _lock:
        before = _mine.get(kind)
        if before is None:
            entry = Entry(source(), kind, 1, now, now, message[:2000], where[:200])
        else:
            entry = replace(
                before, count=before.count + 1, last_at=now, message=message[:2000], where=where[:200]
            )
        _mine[kind] = entry
    for store in STORES:
        if kind in store.holds:
            try:
                store.write(entry)
            except Exception:  # that store is down too: the others (and the log) still have it
                logger.debug("could not write the %s outage to %s", kind, store.name, exc_info=True)
    logger.warning("%s outage (%s): %s", kind, where or "no context", message)
    return entry


def record_exception(exc: BaseException, where: str = "") -> str | None:
    """Record `exc` if it is an outage; its kind, or None."""
    kind = kind_of(exc)
    if kind is not None:
        record(kind, exc, where)
    return kind


# -- stores ----------------------------------------------------------------------------------------


class DatabaseStore:
    name = "database"
    holds = (BROKER,)

    def write(self, entry: Entry) -> None:
        from dashboard.system.models import OutageRecord

        OutageRecord.objects.update_or_create(
            source=entry.source,
            kind=entry.kind,
            defaults={
                "count": entry.count,
                "first_at": entry.first_at,
                "last_at": entry.last_at,
                "message": entry.message,
                "where": entry.where,
            },
        )

    def read(self) -> Iterator[Entry]:
        from dashboard.system.models import OutageRecord

        cutoff = timezone.now() - KEEP_FOR
        for row in OutageRecord.objects.filter(last_at__gte=cutoff):
            yield Entry(row.source, row.kind, row.count, row.first_at, row.last_at, row.message, row.where)


def redis_client() -> redis.Redis | None:
    url = settings.REDIS_URL
    if not url:
        return None
    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)


class RedisStore:
    name = "redis"
    holds = (DATABASE,)

    def write(self, entry: Entry) -> None:
        client = redis_client()
        if client is not None:
            client.hset(REDIS_KEY, f"{entry.source}|{entry.kind}", entry.to_json())

    def read(self) -> Iterator[Entry]:
        client = redis_client()
        if client is None:
            return
        cutoff = timezone.now() - KEEP_FOR
        for field, value in client.hgetall(REDIS_KEY).items():
            entry = Entry.from_json(value)
            if entry.last_at < cutoff:
                client.hdel(REDIS_KEY, field)
            else:
                yield entry


def files_dir() -> Path:
    return Path(settings.VAR_DIR) / "health"


class FileStore:
    name = "file"
    holds = (DATABASE, BROKER)

    def write(self, entry: Entry) -> None:
        folder = files_dir()
        folder.mkdir(parents=True, exist_ok=True)
        with _lock:
            mine = [e.to_json() for e in _mine.values() if e.source == entry.source]
        path = folder / f"{entry.source.replace(':', '-')}.json"
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(mine))
        tmp.replace(path)  # atomic: a reader sees the old file or the new one

    def read(self) -> Iterator[Entry]:
        folder = files_dir()
        if not folder.is_dir():
            return
        cutoff = time.time() - KEEP_FOR.total_seconds()
        for path in folder.glob("*.json"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink(missing_ok=True)
                    continue
                entries = [Entry.from_json(text) for text in json.loads(path.read_text())]
            except (OSError, ValueError, TypeError, KeyError):
                continue  # being replaced, or not ours: skip it
            yield from entries


STORES: tuple[Any, ...] = (DatabaseStore(), RedisStore(), FileStore())


def _reachable(stores: Iterable[Any]) -> Iterator[Entry]:
    for store in stores:
        try:
            yield from list(store.read())
        except Exception:  # that store is down: what the others hold is still shown
            logger.debug("could not read outages from %s", store.name, exc_info=True)


def recorded() -> list[Entry]:
    """Every process's latest counts, from every store this process reaches, newest first."""
    best: dict[tuple[str, str], Entry] = {}
    with _lock:
        mine = list(_mine.values())
    for entry in [*mine, *_reachable(STORES)]:
        key = (entry.source, entry.kind)
        held = best.get(key)
        if held is None or (entry.count, entry.last_at) > (held.count, held.last_at):
            best[key] = entry
    return sorted(best.values(), key=lambda e: e.last_at, reverse=True)


def forget_mine() -> None:
    """Drop this process's counts (tests start from nothing)."""
    with _lock:
        _mine.clear()
