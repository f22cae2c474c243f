"""The fidelity step of each ingest batch (``STEP``), which the capture pipeline calls: judge,
roll up, re-judge, alert.

``storing`` judges a batch's bulk arguments and adds its calls to the rollups inside the batch's
transaction, on the rows before they are written; ``stored``, after the commit, does what is left
(calls stored before a resumed run's kill), re-judges older arguments the new contents explain,
and evaluates the fidelity alerts; ``verdict_counts`` counts a finished job's verdicts. The flow in
``ingest/tasks.py`` passes ``STEP`` to the pipeline; ``IngestConfig.ready`` names it for every
other way in.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence

from django.db import transaction

from dashboard.teams.models import Team
from ingest.capture.models import BulkArgument, IngestJob, ToolCall
from ingest.fidelity import alerts, rollups
from ingest.fidelity.models import verdict_counts
from ingest.fidelity.verdicts import judge_arguments, judge_new_calls, rejudge_for_contents

logger = logging.getLogger(__name__)


def judge_and_roll_up_storing(
    team: Team,
    calls: list[ToolCall],
    arguments: list[BulkArgument],
    contents: Mapping[int, str] | None = None,
    *,
    written: bool = False,
) -> None:
    """Judge the batch's arguments and add its calls to the rollups in the batch's own
    transaction, on the rows in memory (written as they are unless ``written``)."""
    judge_arguments(team, arguments, contents, save=written)
    rollups.add_batch(team, calls, arguments, written=written)


def judge_and_roll_up_stored(
    team: Team,
    call_ids: list[int],
    contents: Mapping[int, str] | None = None,
    rows: Sequence[ToolCall] = (),
    arguments: Sequence[BulkArgument] = (),
) -> None:
    """After the batch committed: judge, roll up, re-judge what new content explains, alert.

    Idempotent: only unjudged arguments are judged and only calls not yet rolled up are added,
    so a batch handed over twice (a resumed job) changes nothing the second time. ``contents``
    (``{content id: text}``) and the ``rows`` and ``arguments`` as written (sent by the ingest)
    save reading back what was just stored: calls judged and rolled up in the batch's own
    transaction (``judge_and_roll_up_storing``) are not looked at again.
    """
    by_call: dict[int, list[BulkArgument]] = defaultdict(list)
    for argument in arguments:
        by_call[argument.call_id].append(argument)
    settled = {
        row.pk
        for row in rows
        if (row.in_rollups or not row.counts_in_rollups) and all(a.verdict for a in by_call.get(row.pk, ()))
    }
    pending = [pk for pk in call_ids if pk not in settled]
    # And settled calls linked to an older call: that one is taken out of the rollups.
    to_roll_up = pending + [row.pk for row in rows if row.pk in settled and row.linked_call_id]
    with transaction.atomic():
        if pending:
            judge_new_calls(team, pending, contents)
        if to_roll_up:
            rollups.add_calls(team, to_roll_up)
    shas = {a.sha256 for a in arguments if a.content_id and a.call_id in settled}
    if pending:
        shas.update(
            BulkArgument.objects.filter(call_id__in=pending)
            .exclude(content=None)
            .values_list("sha256", flat=True)
        )
    rejudge_for_contents(team, shas, exclude_calls=call_ids)
    try:
        alerts.evaluate_after_ingest(team, call_ids)
    except Exception:
        # An alerting problem must not fail the ingest of good data; it is logged loudly.
        logger.exception("fidelity alerts for team %s failed", team.pk)


class _Step:
    """The pipeline's ``FidelityStep`` (ingest.capture.pipeline.fidelity_step)."""

    def storing(
        self,
        team: Team,
        calls: list[ToolCall],
        arguments: list[BulkArgument],
        contents: Mapping[int, str],
        *,
        written: bool,
    ) -> None:
        judge_and_roll_up_storing(team, calls, arguments, contents, written=written)

    def stored(
        self,
        team: Team,
        call_ids: list[int],
        contents: Mapping[int, str],
        rows: Sequence[ToolCall],
        arguments: Sequence[BulkArgument],
    ) -> None:
        judge_and_roll_up_stored(team, call_ids, contents, rows, arguments)

    def verdict_counts(self, job: IngestJob) -> dict[str, int]:
        return verdict_counts(job)


STEP = _Step()
