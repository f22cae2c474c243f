"""Fidelity verdicts for stored bulk arguments (docs/definitions.md), with their evidence.

The pure comparison lives in ``mcptax.verdict_rules.judge_copy``; this module finds what to compare with:

- **Expected hash**, first that applies: the caller's ``expected_sha256``/``sha256`` in the
  arguments (``expected_source="caller"``) or in ``_meta`` (``"meta"``), captured at ingest by
  :func:`caller_expectations`; else a registered reference document the paste matches by exact
  sha256 or by head/tail fingerprints (``"reference_document"``), looked up with indexed
  equalities on ``ReferenceFingerprint(team, kind, value)``; else none (``unverifiable``).
- **Expected content**: the reference document with that sha256, else any captured bulk value
  with it (``BulkContent`` is content-addressed per team).
- **Arrived content**: the argument's own stored copy, or for a hash-only (redacted) capture any
  captured value with the same sha256.

Beside the verdict the evidence keeps the server's own ``isError`` answer and whether the sha256
the server reported in its result agrees with what the capture saw.

Verdicts are recomputed (and the rollups corrected) when expected content becomes known later: a
reference document is registered (:func:`rejudge_for_document`) or a copy with the expected hash
arrives (:func:`rejudge_for_contents`, run after every ingest batch).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.system.broker import Enqueue
from dashboard.teams.models import Team
from ingest import bulkwrite
from ingest.capture.expectations import CALLER, META
from ingest.capture.expectations import caller_expectations as caller_expectations
from ingest.capture.models import BulkArgument, BulkContent, IngestJob, ToolCall
from ingest.fidelity import rollups
from ingest.fidelity.models import ReferenceDocument, ReferenceFingerprint, refresh_verdict_counts
from ingest.fidelity.rollups import Change
from mcptax import verdict_rules
from mcptax.fingerprints import candidate_keys, fingerprints, rank_candidates
from mcptax.tokens import canonical

logger = logging.getLogger(__name__)

REFERENCE_DOCUMENT = "reference_document"
CALLER_SOURCES = (CALLER, META)
# Verdicts that say nothing about the agent; left out of exact-match rates.
UNJUDGED = (verdict_rules.UNVERIFIABLE, verdict_rules.CAPTURE_TRUNCATED)
# How many rows to load at once when re-judging after a registration.
CHUNK = 500


# -- lookups ------------------------------------------------------------------------------------------


@dataclass
class _Match:
    document: ReferenceDocument
    kinds: list[str]


def find_documents(team: Team, texts: dict[int, str], shas: dict[int, str]) -> dict[int, _Match]:
    """The best reference document per key (an argument id), by exact sha256 or fingerprints.

    ``texts`` holds the arrived text where known (its fingerprints are looked up); ``shas`` the
    arrived sha256 of every argument (for hash-only captures, the exact match is all there is).
    Two indexed queries whatever the number of arguments; one when the team has no document.
    """
    if not (shas or texts) or not ReferenceFingerprint.objects.filter(team=team).exists():
        return {}  # nothing to match: not worth fingerprinting the texts
    wanted: dict[tuple[str, str], list[int]] = defaultdict(list)
    for key, sha in shas.items():
        if sha:
            wanted[("sha256", sha)].append(key)
    for key, text in texts.items():
        # The arrived text is stored under its sha256: no need to hash it again.
        for pair in candidate_keys(text, shas.get(key) or None):
            wanted[pair].append(key)
    if not wanted:
        return {}
    by_kind: dict[str, set[str]] = defaultdict(set)
    for kind, value in wanted:
        by_kind[kind].add(value)
    condition = reduce(or_, (Q(kind=kind, value__in=sorted(values)) for kind, values in by_kind.items()))
    hits: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    doc_ids: set[int] = set()
    # Newest document first, so rank_candidates breaks ties in favour of the latest registration.
    for doc_id, kind, value in (
        ReferenceFingerprint.objects.filter(condition, team=team)
        .order_by("-document_id")
        .values_list("document_id", "kind", "value")
    ):
        for key in wanted.get((kind, value), ()):
            hits[key][doc_id].append(kind)
            doc_ids.add(doc_id)
    if not doc_ids:
        return {}
    documents = ReferenceDocument.objects.defer("text").in_bulk(doc_ids)
    found = {}
    for key, candidates in hits.items():
        best = rank_candidates(candidates)[0]
        found[key] = _Match(documents[best], sorted(set(candidates[best])))
    return found


def _load_contents(team: Team, shas: Iterable[str]) -> dict[str, tuple[str, bool, ReferenceDocument | None]]:
    """``{sha256: (text, is_array, document)}`` for every sha256 under which content is known."""
    shas = {s for s in shas if s}
    known: dict[str, tuple[str, bool, ReferenceDocument | None]] = {}
    if not shas:
        return known
    for doc in ReferenceDocument.objects.filter(team=team, sha256__in=shas):
        known[doc.sha256] = (doc.text, False, doc)
    rest = shas - set(known)
    if rest:
        for sha, text, is_array in BulkContent.objects.filter(team=team, sha256__in=rest).values_list(
            "sha256", "text", "is_array"
        ):
            known[sha] = (text, is_array, None)
    return known


def _as_value(text: str, is_array: bool, want_array: bool) -> str | list[Any]:
    """The value to compare: a list when an array is being compared and the text is its canonical JSON."""
    if not (is_array or want_array):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, list) and canonical(value) == text:
        return value
    return text


# -- judging ------------------------------------------------------------------------------------------


def _server_side(argument: BulkArgument, call: ToolCall) -> dict[str, Any]:
    reported = call.server_reported_sha256 or None
    return {
        "server_is_error": call.is_error,
        "server_sha256": reported,
        "server_sha256_agrees": (reported == argument.sha256) if reported and argument.sha256 else None,
    }


def _arrived_texts(
    team: Team, arguments: Sequence[BulkArgument], texts: Mapping[int, str]
) -> Callable[[BulkArgument], str | None]:
    """The arrived text of each argument: its own content (from ``texts``, else read), or for a
    hash-only capture another capture's of the same bytes. Two queries at most."""
    own_texts = {
        a.content_id: texts[a.content_id] for a in arguments if a.content_id and a.content_id in texts
    }
    unread = {a.content_id for a in arguments if a.content_id and a.content_id not in own_texts}
    if unread:
        own_texts.update(BulkContent.objects.filter(pk__in=unread).values_list("pk", "text"))
    # A hash-only capture's content may be known from another capture of the same bytes.
    missing = {a.sha256 for a in arguments if not a.content_id and a.sha256}
    borrowed = dict(
        BulkContent.objects.filter(team=team, sha256__in=missing).values_list("sha256", "text")
        if missing
        else []
    )

    def arrived_text(arg: BulkArgument) -> str | None:
        if arg.content_id:
            return own_texts.get(arg.content_id)
        return borrowed.get(arg.sha256)

    return arrived_text


def _evidence(
    arg: BulkArgument,
    evidence: dict[str, Any],
    expected_sha: str | None,
    match: Any,
    known: Any,
    text: str | None,
) -> dict[str, Any]:
    """The verdict's evidence completed with where the expected and arrived contents came from."""
    evidence["expected_source"] = arg.expected_source or None
    evidence["expected_sha256"] = expected_sha or None
    document = match.document if match else (known[2] if known else None)
    if known:
        evidence["expected_content"] = "reference_document" if known[2] else "captured_copy"
    else:
        evidence["expected_content"] = None
    evidence["document"] = (
        {"id": document.pk, "code": str(document.code), "name": document.name, "url": document.url}
        if document
        else None
    )
    evidence["matched_by"] = match.kinds if match else None
    evidence["arrived_content"] = (
        None if text is None else ("captured" if arg.content_id else "captured_elsewhere")
    )
    evidence.update(_server_side(arg, arg.call))
    return evidence


def judge_arguments(
    team: Team,
    arguments: Sequence[BulkArgument],
    texts: Mapping[int, str] | None = None,
    *,
    save: bool = True,
) -> list[Change]:
    """(Re)compute the verdict of each argument and save it; returns those that changed.

    Arguments need ``call`` loaded (``select_related("call")``); ``texts`` may hold the text of
    contents by id (the ingest passes what it has just stored), the others are read. A constant
    number of queries per call of this function (lookups are batched), plus one update (none
    without ``save``: arguments about to be inserted as they are).
    """
    if not arguments:
        return []
    arrived_text = _arrived_texts(team, arguments, texts or {})
    need_document = [
        a for a in arguments if a.expected_source not in CALLER_SOURCES and not a.capture_truncated
    ]
    matches = find_documents(
        team,
        {a.pk: t for a in need_document if (t := arrived_text(a)) is not None},
        {a.pk: a.sha256 for a in need_document},
    )
    expected_shas: dict[int, str] = {}
    for arg in arguments:
        if arg.expected_source in CALLER_SOURCES:
            expected_shas[arg.pk] = arg.expected_sha256
        elif arg.pk in matches:
            expected_shas[arg.pk] = matches[arg.pk].document.sha256
    contents = _load_contents(team, expected_shas.values())

    now = timezone.now()
    changes: list[Change] = []
    for arg in arguments:
        old = arg.verdict
        old_evidence = arg.evidence
        expected_sha = expected_shas.get(arg.pk)
        match = matches.get(arg.pk)
        if arg.expected_source not in CALLER_SOURCES:
            arg.expected_source = REFERENCE_DOCUMENT if match else ""
            arg.expected_sha256 = expected_sha or ""
        text = arrived_text(arg)
        arrived = _as_value(text, False, arg.kind == "array") if text is not None else None
        known = contents.get(expected_sha or "")
        expected = _as_value(known[0], known[1], isinstance(arrived, list)) if known else None
        verdict = _judge(arg, arrived, expected, expected_sha)
        evidence = _evidence(arg, verdict.to_dict(), expected_sha, match, known, text)
        arg.verdict = verdict.verdict
        arg.evidence = evidence
        arg.verdict_at = now
        if old != arg.verdict or old_evidence != evidence:
            changes.append(Change(arg, old))
    if save:
        save_verdicts([c.argument for c in changes])
    return changes


VERDICT_FIELDS = ("verdict", "expected_sha256", "expected_source", "evidence", "verdict_at")


def save_verdicts(arguments: Sequence[BulkArgument]) -> None:
    """Write the verdict fields of these arguments: on PostgreSQL one ``UPDATE ... FROM unnest``
    of arrays however many there are, elsewhere ``bulk_update``."""
    if not arguments:
        return
    if connection.vendor != "postgresql":
        BulkArgument.objects.bulk_update(arguments, VERDICT_FIELDS, batch_size=500)
        return
    column = {name: bulkwrite.column(BulkArgument, name) for name in (*VERDICT_FIELDS, "id")}
    sql = (
        f"UPDATE {connection.ops.quote_name(BulkArgument._meta.db_table)} AS a SET {column['verdict']} = v.verdict, "
        f"{column['expected_sha256']} = v.expected_sha256, {column['expected_source']} = v.expected_source, "
        f"{column['evidence']} = v.evidence::jsonb, {column['verdict_at']} = v.verdict_at "
        "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[]) "
        "AS v(id, verdict, expected_sha256, expected_source, evidence, verdict_at) "
        f"WHERE a.{column['id']} = v.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                [a.pk for a in arguments],
                [a.verdict for a in arguments],
                [a.expected_sha256 for a in arguments],
                [a.expected_source for a in arguments],
                [json.dumps(a.evidence) for a in arguments],
                [a.verdict_at for a in arguments],
            ],
        )


def _text_of(value: str | list[Any] | None) -> str | None:
    return value if value is None or isinstance(value, str) else canonical(value)


def _judge(
    arg: BulkArgument,
    arrived: str | list[Any] | None,
    expected: str | list[Any] | None,
    expected_sha: str | None,
) -> verdict_rules.CopyVerdict:
    if arg.capture_truncated:
        return verdict_rules.CopyVerdict(verdict_rules.CAPTURE_TRUNCATED, arrived_bytes=arg.bytes)
    if not arg.sha256:
        # A digest without a usable hash: nothing can be compared.
        return verdict_rules.CopyVerdict(verdict_rules.UNVERIFIABLE, arrived_bytes=arg.bytes)

    def compare(
        arrived: str | list[Any] | None, expected: str | list[Any] | None
    ) -> verdict_rules.CopyVerdict:
        return verdict_rules.judge_copy(
            arrived,
            expected=expected,
            arrived_sha256=arg.sha256,
            arrived_bytes=arg.bytes,
            expected_sha256=expected_sha or None,
        )

    try:
        return compare(arrived, expected)
    except ValueError:
        pass
    # A stored copy that does not hash as recorded (should not happen): compare texts, and if
    # even that fails fall back to the hashes alone rather than give a verdict on wrong bytes.
    try:
        return compare(_text_of(arrived), _text_of(expected))
    except ValueError:
        logger.warning("bulk argument %s: stored content does not match its hash", arg.pk)
        return compare(None, None)


# -- the ingest hook ----------------------------------------------------------------------------------


def judge_new_calls(
    team: Team, call_ids: Sequence[int], texts: Mapping[int, str] | None = None
) -> list[Change]:
    """Judge the not-yet-judged bulk arguments of these calls (idempotent); ``texts`` as for
    :func:`judge_arguments`."""
    arguments = list(
        BulkArgument.objects.filter(call_id__in=list(call_ids), verdict="")
        .select_related("call")
        .order_by("pk")
    )
    return judge_arguments(team, arguments, texts)


def rejudge(team: Team, arguments: Sequence[BulkArgument]) -> list[Change]:
    """Judge already-judged arguments again and move their rollup counts to the new verdicts."""
    with transaction.atomic():
        changes = judge_arguments(team, arguments)
        moved = [c for c in changes if c.old and c.old != c.argument.verdict]
        rollups.apply_verdict_changes(team, moved)
    # Finished jobs show verdict counts; keep those of the jobs whose calls changed true.
    job_ids = {c.argument.call.job_id for c in moved if c.argument.call.job_id}
    for job in IngestJob.objects.filter(pk__in=job_ids, status=IngestJob.Status.DONE):
        refresh_verdict_counts(job)
    return changes


def rejudge_for_contents(team: Team, shas: Iterable[str], exclude_calls: Sequence[int] = ()) -> list[Change]:
    """Content for these sha256 values is now known: re-judge the ``mismatch`` verdicts it can explain.

    ``mismatch`` means an expected hash whose content was unknown (or a hash-only arrival); both
    lookups are indexed (``expected_sha256``, ``sha256``).
    """
    shas = sorted({s for s in shas if s})
    if not shas:
        return []
    arguments = list(
        BulkArgument.objects.filter(Q(expected_sha256__in=shas) | Q(sha256__in=shas), team=team)
        .filter(verdict=verdict_rules.MISMATCH)
        .exclude(call_id__in=list(exclude_calls))
        .select_related("call")
        .order_by("pk")
    )
    return rejudge(team, arguments)


def rejudge_for_document(document: ReferenceDocument) -> int:
    """A document was registered: re-judge what it can now explain; returns how many changed.

    Candidates: arguments expecting its hash (a ``mismatch`` can now be compared), and arguments with
    no caller expectation (``unverifiable``, or matched to another document) whose content shares
    a fingerprint with it. Fingerprints of captured values are not stored, so the second part
    reads the team's distinct captured values once (content-addressed, so each value once however
    often it was pasted) — a one-off cost per registration, run on the worker.
    """
    team = document.team
    keys = fingerprints(document.text)
    changes: list[Change] = []
    # Expecting its hash: a mismatch becomes a comparison, and the evidence names the document.
    by_hash = list(
        BulkArgument.objects.filter(team=team, expected_sha256=document.sha256)
        .exclude(verdict="")
        .select_related("call")
        .order_by("pk")
    )
    changes += rejudge(team, by_hash)
    no_expectation = (
        BulkArgument.objects.filter(team=team, capture_truncated=False)
        .exclude(expected_source__in=CALLER_SOURCES)
        .exclude(verdict="")
    )
    # Hash-only arrivals (no content) can only match exactly.
    exact = list(no_expectation.filter(sha256=document.sha256).select_related("call").order_by("pk"))
    changes += rejudge(team, exact)
    content_ids = (
        no_expectation.exclude(content=None)
        .exclude(sha256=document.sha256)
        .values_list("content_id", flat=True)
    )
    candidate_content: list[int] = []
    seen: set[int] = set()
    for content_id in content_ids.iterator(chunk_size=5000):
        if content_id not in seen:
            seen.add(content_id)
    ids = sorted(seen)
    for start in range(0, len(ids), CHUNK):
        for pk, text in BulkContent.objects.filter(pk__in=ids[start : start + CHUNK]).values_list(
            "pk", "text"
        ):
            mine = fingerprints(text)
            if any(mine[kind] == value for kind, value in keys.items() if kind != "sha256"):
                candidate_content.append(pk)
    for start in range(0, len(candidate_content), CHUNK):
        batch = list(
            no_expectation.filter(content_id__in=candidate_content[start : start + CHUNK])
            .select_related("call")
            .order_by("pk")
        )
        changes += rejudge(team, batch)
    changed = len(changes)
    ReferenceDocument.objects.filter(pk=document.pk).update(rejudged=changed)
    document.rejudged = changed
    evaluate_alerts(team, changes)
    return changed


def rejudge_without_document(team: Team, sha256: str) -> int:
    """A document was removed: arguments that relied on it are judged again (usually unverifiable)."""
    arguments = list(
        BulkArgument.objects.filter(Q(expected_sha256=sha256), team=team)
        .exclude(verdict="")
        .select_related("call")
        .order_by("pk")
    )
    changes = rejudge(team, arguments)
    evaluate_alerts(team, changes)
    return len(changes)


def evaluate_alerts(team: Team, changes: Sequence[Change]) -> None:
    """Run the fidelity alert rules an ingest runs, over the calls whose verdicts moved: a document
    registered (or removed) changes exact rates and damaged arrivals as much as a new batch does."""
    call_ids = sorted({c.argument.call_id for c in changes if c.old != c.argument.verdict})
    if not call_ids:
        return
    # Imported here: the alerts module reads the rollups this module writes.
    from ingest.fidelity import alerts

    try:
        alerts.evaluate_after_ingest(team, call_ids)
    except Exception:
        # As after an ingest: an alerting problem must not undo the new verdicts; it is logged loudly.
        logger.exception("fidelity alerts for team %s after a re-judgement failed", team.pk)


# The Celery task that re-judges for a new document (ingest.tasks), sent by name.
REJUDGE_TASK = "ingest.tasks.rejudge_document"


def rejudge_document(document_id: int) -> int:
    """Re-judge what a newly registered document explains (a removed document: nothing to do)."""
    document = ReferenceDocument.objects.filter(pk=document_id).select_related("team").first()
    return rejudge_for_document(document) if document is not None else 0


def queue_rejudge(document: ReferenceDocument, enqueue: Enqueue) -> None:
    """Have a worker re-judge for a new document once the registration commits: ``enqueue`` gets
    the document's id."""
    transaction.on_commit(lambda: enqueue(document.pk))
