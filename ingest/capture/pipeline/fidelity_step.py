"""The fidelity step the pipeline calls on every batch, passed in like `enqueue`.

Capture never imports fidelity (it sits below it), so the step comes from the caller: the flow in
``ingest/tasks.py`` passes ``ingest.fidelity.batches.STEP`` to ``run_job``. Every other way in (the
``ingest`` command, the push API's synchronous path, watched folders, the demo) uses the step the
app names once at start-up (``IngestConfig.ready`` calls ``use``); without one a batch is stored
and left unjudged.

``storing`` runs inside the batch's transaction on the rows about to be written (``written=False``:
set fields on them, they are written as they are; ``written=True``: they are in their tables
already, update them); ``stored`` runs after the commit with the ids of the calls this job stored
in the batch (a resumed job may pass an id again: it must be idempotent); ``verdict_counts`` gives
a finished job its ``{verdict: n}``. An exception fails the job (a resumed run stores the batch
again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from dashboard.teams.models import Team
from ingest.capture.models import BulkArgument, IngestJob, ToolCall


class FidelityStep(Protocol):
    def storing(
        self,
        team: Team,
        calls: list[ToolCall],
        arguments: list[BulkArgument],
        contents: Mapping[int, str],
        *,
        written: bool,
    ) -> None: ...

    def stored(
        self,
        team: Team,
        call_ids: list[int],
        contents: Mapping[int, str],
        rows: Sequence[ToolCall],
        arguments: Sequence[BulkArgument],
    ) -> None: ...

    def verdict_counts(self, job: IngestJob) -> dict[str, int]: ...


class _NoFidelity:
    """Stores batches unjudged (no app named a step)."""

    def storing(
        self,
        team: Team,
        calls: list[ToolCall],
        arguments: list[BulkArgument],
        contents: Mapping[int, str],
        *,
        written: bool,
    ) -> None:
        return None

    def stored(
        self,
        team: Team,
        call_ids: list[int],
        contents: Mapping[int, str],
        rows: Sequence[ToolCall],
        arguments: Sequence[BulkArgument],
    ) -> None:
        return None

    def verdict_counts(self, job: IngestJob) -> dict[str, int]:
        return {}


_default: FidelityStep = _NoFidelity()


def use(step: FidelityStep) -> None:
    """Name the step every way in uses when its caller passes none (``IngestConfig.ready``)."""
    global _default
    _default = step


def current(step: FidelityStep | None = None) -> FidelityStep:
    return step if step is not None else _default
