"""Signals the ingest pipeline sends.

``calls_storing(sender=IngestJob, team=Team, calls=list[ToolCall], arguments=list[BulkArgument],
contents=dict[int, str], written=bool)`` is sent inside a batch's transaction with the rows of the
calls this job is storing in it (ids set, ``arguments[i].call`` loaded) and ``{content id: text}``
of their stored contents. ``written=False``: the rows are not in their tables yet and will be
written as they are when the receivers return, so a receiver sets fields on them (the fidelity
step: verdicts, ``in_rollups``) instead of updating rows; ``written=True``: they are in the tables
already (the INSERT path) and a receiver updates them. Work it does in the database (rollups)
commits or rolls back with the batch. An exception in a receiver rolls the batch back and fails
the job (a resumed run stores the batch again).

``calls_ingested(sender=IngestJob, team=Team, call_ids=list[int], job=IngestJob,
contents=dict[int, str], rows=list[ToolCall], arguments=list[BulkArgument])`` is sent after each
committed batch (outside its transaction), with the ids of the ToolCalls that this job stored in
that batch, and the rows of those new in it as written (a resumed batch's calls stored before the
kill are in ``call_ids`` only). The fidelity step connects to it to
judge what ``calls_storing`` did not (and to re-judge older arguments the new contents explain,
and alert). A resumed job may send an id again (the kill can fall between the commit and the
signal), so receivers must be idempotent (e.g. judge only arguments whose verdict is empty, or
recompute). An exception in a receiver fails the ingest job (and is recorded on it), so receivers
should handle their own expected errors.
"""

from django.dispatch import Signal

calls_storing = Signal()
calls_ingested = Signal()
