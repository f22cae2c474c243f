"""Where a run hands the tool-discovery records it reads beside the calls.

The app that stores them (``ingest.discovery``) depends on capture, not the other way round, so it
registers itself here at start-up (``ingest.apps``); a run calls it explicitly for each batch.
Without one registered, the records are dropped (counted nowhere).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from dashboard.teams.models import Team
from ingest.capture.models import CaptureSession
from mcptax.discovery import DiscoveryEvent


class DiscoverySink(Protocol):
    def record(self, session: CaptureSession, events: list[DiscoveryEvent]) -> dict[str, int]:
        """Store the records not stored yet; what was new (``searches``, ``loads``, ...)."""
        ...

    def after_batch(self, team: Team, tools: Iterable[str]) -> Any:
        """After the batch committed: the work the new records start (alerts)."""
        ...


_sink: DiscoverySink | None = None


def register_discovery_sink(sink: DiscoverySink) -> None:
    global _sink
    _sink = sink


def discovery_sink() -> DiscoverySink | None:
    return _sink
