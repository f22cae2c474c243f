"""Operational state the pages show: is a worker alive?"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models
from django.utils import timezone

# Beat asks for a heartbeat every 30 s; a few missed ones mean no worker is consuming.
STALE_AFTER = timedelta(minutes=2)


@dataclass(frozen=True)
class WorkerStatus:
    last_seen: datetime | None
    alive: bool


class WorkerHeartbeat(models.Model):
    """Written by a periodic task; its age tells the user whether polls and ingests will run."""

    hostname = models.CharField(max_length=255, unique=True)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.last_seen:%Y-%m-%d %H:%M:%S}"

    @classmethod
    def beat(cls, hostname: str) -> "WorkerHeartbeat":
        heartbeat, _ = cls.objects.update_or_create(hostname=hostname, defaults={"last_seen": timezone.now()})
        return heartbeat

    @classmethod
    def latest(cls) -> "WorkerHeartbeat | None":
        return cls.objects.order_by("-last_seen").first()

    @classmethod
    def status(cls, now: datetime | None = None) -> WorkerStatus:
        latest = cls.latest()
        now = now or timezone.now()
        last_seen = latest.last_seen if latest else None
        return WorkerStatus(
            last_seen=last_seen, alive=last_seen is not None and now - last_seen < STALE_AFTER
        )
