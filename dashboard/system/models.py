"""Operational state the pages show: is a worker alive, and is every queue consumed?"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import models
from django.utils import timezone

# Each worker writes its heartbeat every 30 s; a few missed ones mean it is gone.
STALE_AFTER = timedelta(minutes=2)
HEARTBEAT_EVERY = 30.0
# The queues the product's work goes through; a queue no live worker consumes only grows.
WORK_QUEUES = ("poll", "ingest", "notify")


@dataclass(frozen=True)
class WorkerStatus:
    last_seen: datetime | None
    alive: bool
    # Work queues no live worker consumes (empty when none is alive: the banner says that first).
    unconsumed: tuple[str, ...] = field(default=())


class WorkerHeartbeat(models.Model):
    """Written by a periodic task; its age tells the user whether polls and ingests will run."""

    hostname = models.CharField(max_length=255, unique=True)
    last_seen = models.DateTimeField(default=timezone.now)
    # What this worker consumes (its -Q), as it reported it.
    queues = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.last_seen:%Y-%m-%d %H:%M:%S}"

    @classmethod
    def beat(cls, hostname: str, queues: Iterable[str]) -> "WorkerHeartbeat":
        heartbeat, _ = cls.objects.update_or_create(
            hostname=hostname, defaults={"last_seen": timezone.now(), "queues": sorted(set(queues))}
        )
        return heartbeat

    @classmethod
    def latest(cls) -> "WorkerHeartbeat | None":
        return cls.objects.order_by("-last_seen").first()

    @classmethod
    def status(cls, now: datetime | None = None) -> WorkerStatus:
        latest = cls.latest()
        now = now or timezone.now()
        last_seen = latest.last_seen if latest else None
        alive = last_seen is not None and now - last_seen < STALE_AFTER
        consumed: set[str] = set()
        for queues in cls.objects.filter(last_seen__gte=now - STALE_AFTER).values_list("queues", flat=True):
            consumed.update(queues or ())
        unconsumed = tuple(q for q in WORK_QUEUES if q not in consumed) if alive else ()
        return WorkerStatus(last_seen=last_seen, alive=alive, unconsumed=unconsumed)


class OutageRecord(models.Model):
    """What one process counted of one kind of outage (broker or database), as it last wrote it.

    dashboard.system.outages writes a process's counts to every store that does not depend on the
    failing part: a broker outage lands here (the database is another service), a database outage
    in Redis and in a file under VAR_DIR. One row per process and kind; the count only grows.
    """

    source = models.CharField(max_length=255, help_text="host:pid of the process that counted")
    kind = models.CharField(max_length=20)
    count = models.PositiveIntegerField(default=0)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()
    message = models.TextField(blank=True)
    where = models.CharField(max_length=200, blank=True, help_text="What was being done")

    class Meta:
        ordering = ["-last_at"]
        constraints = [
            models.UniqueConstraint(fields=["source", "kind"], name="one_outage_record_per_source")
        ]

    def __str__(self) -> str:
        return f"{self.kind} x{self.count} from {self.source}"
