"""Signals the ingest pipeline sends.

``calls_ingested(sender=IngestJob, team=Team, call_ids=list[int], job=IngestJob)`` is sent after
each committed batch of an ingest (outside its transaction), with the ids of the ToolCalls that
this job stored in that batch. The fidelity step connects to it to judge the bulk arguments of
those calls. A resumed job may send an id again (the kill can fall between the commit and the
signal), so receivers must be idempotent (e.g. judge only arguments whose verdict is empty, or
recompute). An exception in a receiver fails the ingest job (and is recorded on it), so receivers
should handle their own expected errors.
"""

from django.dispatch import Signal

calls_ingested = Signal()
