"""The fidelity step of each ingest batch: the receivers of the capture pipeline's signals.

``on_calls_storing`` judges a batch's bulk arguments and adds its calls to the rollups inside the
batch's transaction, on the rows before they are written; ``on_calls_ingested``, after the
commit, does what is left (calls stored before a resumed run's kill), re-judges older arguments
the new contents explain, and evaluates the fidelity alerts. Connected in ``ingest/apps.py``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction

from dashboard.teams.models import Team
from ingest.capture.models import BulkArgument, ToolCall
from ingest.fidelity import alerts, rollups
from ingest.fidelity.verdicts import judge_arguments, judge_new_calls, rejudge_for_contents

logger = logging.getLogger(__name__)


def on_calls_storing(
    sender: Any,
    team: Team,
    calls: list[ToolCall],
    arguments: list[BulkArgument],
    contents: Mapping[int, str] | None = None,
    written: bool = False,
    **kwargs: Any,
) -> None:
    """``calls_storing`` receiver: judge the batch's arguments and add its calls to the rollups in
    the batch's own transaction, on the rows in memory (written as they are unless ``written``)."""
    judge_arguments(team, arguments, contents, save=written)
    rollups.add_batch(team, calls, arguments, written=written)


def on_calls_ingested(
    sender: Any,
    team: Team,
    call_ids: list[int],
    contents: Mapping[int, str] | None = None,
    rows: Sequence[ToolCall] = (),
    arguments: Sequence[BulkArgument] = (),
    **kwargs: Any,
) -> None:
    """``calls_ingested`` receiver: judge, roll up, re-judge what new content explains, alert.

    Idempotent: only unjudged arguments are judged and only calls not yet rolled up are added,
    so a batch signalled twice (a resumed job) changes nothing the second time. ``contents``
    (``{content id: text}``) and the ``rows`` and ``arguments`` as written (sent by the ingest)
    save reading back what was just stored: calls judged and rolled up in the batch's own
    transaction (``on_calls_storing``) are not looked at again.
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
