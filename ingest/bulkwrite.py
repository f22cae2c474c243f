"""Writing a batch of rows in a few statements: ``COPY`` on PostgreSQL, ``bulk_create`` elsewhere.

On PostgreSQL the primary keys of new rows are taken from the table's sequence in one round trip
(:func:`reserve_ids`), so the rows can be streamed with ``COPY ... FROM STDIN`` and be referred to
at once by the rows that point at them, with no query per row and no read-back. A ``COPY`` runs
in a savepoint: when it breaks a unique constraint (a concurrent run inserted the same row since
it was looked up) it is rolled back and the caller falls back to ``bulk_create`` with
``ignore_conflicts``, which keeps what is already there. SQLite (the embedded run), any other
database and ``INGEST_USE_COPY=false`` take the ``bulk_create`` path, with the same rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Case, DateTimeField, F, Value, When
from django.db.models.functions import Coalesce, Greatest, Least


def copy_supported() -> bool:
    """Whether rows are streamed with ``COPY``: PostgreSQL (psycopg 3) unless INGEST_USE_COPY is off."""
    return connection.vendor == "postgresql" and settings.INGEST_USE_COPY


def reserve_ids(model: type[models.Model], count: int) -> list[int]:
    """``count`` new primary keys for ``model`` from its sequence, in one round trip (PostgreSQL)."""
    return reserve_many([(model, count)])[0]


def reserve_many(wanted: Sequence[tuple[type[models.Model], int]]) -> list[list[int]]:
    """New primary keys for several tables at once (``[(model, count), ...]``), one round trip."""
    ids: list[list[int]] = [[] for _ in wanted]
    parts: list[str] = []
    params: list[Any] = []
    for index, (model, count) in enumerate(wanted):
        if count > 0:
            parts.append(
                f"SELECT {index}, nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)"
            )
            params += [model._meta.db_table, str(field(model, "id").column), count]
    if parts:
        with connection.cursor() as cursor:
            cursor.execute(" UNION ALL ".join(parts), params)
            for index, pk in cursor.fetchall():
                ids[index].append(pk)
    return ids


def _columns(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return [f for f in model._meta.concrete_fields if not isinstance(f, models.GeneratedField)]


# Fields whose Python value is what the database gets (for the values the ingest puts in them):
# read straight off the object, without the ORM's per-value conversion.
_PLAIN = (
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.BooleanField,
    models.FloatField,
    models.ForeignKey,
)


def _converter(f: models.Field[Any, Any]) -> Callable[[models.Model], Any]:
    name = f.attname
    if isinstance(f, models.FloatField):  # the binary format takes a float, never an int
        return lambda obj: None if getattr(obj, name) is None else float(getattr(obj, name))
    if isinstance(f, _PLAIN) and not isinstance(f, models.BigAutoField | models.AutoField):
        return lambda obj: getattr(obj, name)
    return lambda obj: f.get_db_prep_save(f.pre_save(obj, True), connection)


# PostgreSQL column types and the names psycopg knows them by, for ``COPY`` in binary format
# (texts go as they are, with no escaping on either side; a column of any other type makes the
# table's COPY take the text format).
_BINARY_TYPES = {
    "bigint": "int8",
    "integer": "int4",
    "smallint": "int2",
    "boolean": "bool",
    "text": "text",
    "varchar": "varchar",
    "timestamp with time zone": "timestamptz",
    "double precision": "float8",
    "jsonb": "jsonb",
    "bytea": "bytea",
}


def _binary_types(fields: Sequence[models.Field[Any, Any]]) -> list[str] | None:
    """The psycopg type names of ``fields`` for a binary ``COPY``; None if one has no such name."""
    names: list[str] = []
    for f in fields:
        db_type = str(f.db_type(connection) or "").split("(", 1)[0].strip()
        name = _BINARY_TYPES.get(db_type)
        if name is None:
            return None
        names.append(name)
    return names


def field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    """The concrete field ``name`` of ``model`` (for raw SQL: its column, its database value)."""
    found = model._meta.get_field(name)
    assert isinstance(found, models.Field) and found.column, name
    return found


def column(model: type[models.Model], name: str) -> str:
    """The quoted column of field ``name`` of ``model``."""
    return connection.ops.quote_name(str(field(model, name).column))


def copy_rows(model: type[models.Model], objs: Sequence[models.Model], *, savepoint: bool = True) -> bool:
    """Stream ``objs`` (primary keys set) into ``model``'s table with one ``COPY``.

    Values go through each field's ``pre_save``/``get_db_prep_save``, as an ``INSERT`` by the ORM
    would. Returns False, with nothing written, when a unique constraint refused a row; without
    ``savepoint`` (the caller holds one) the IntegrityError is raised instead.
    """
    if not objs:
        return True
    fields = _columns(model)
    quote = connection.ops.quote_name
    types = _binary_types(fields) if settings.INGEST_COPY_BINARY else None
    sql = "COPY {} ({}) FROM STDIN{}".format(
        quote(model._meta.db_table),
        ", ".join(quote(str(f.column)) for f in fields),
        " (FORMAT BINARY)" if types else "",
    )
    try:
        # A savepoint, so a refused COPY leaves the batch's transaction usable; the psycopg
        # cursor under Django's wrapper does the COPY, its errors turned into Django's.
        with (
            transaction.atomic() if savepoint else nullcontext(),
            connection.cursor() as cursor,
            connection.wrap_database_errors,
            cursor.cursor.copy(sql) as copy,
        ):
            if types:
                copy.set_types(types)
            convert = [_converter(f) for f in fields]
            for obj in objs:
                copy.write_row([to_db(obj) for to_db in convert])
    except IntegrityError:
        if not savepoint:
            raise
        return False
    return True


def insert_rows(model: type[models.Model], objs: Sequence[models.Model], *, use_copy: bool = True) -> None:
    """Insert ``objs``, skipping any that a unique constraint refuses; their ids are not needed back.

    ``COPY`` (ids reserved first) where supported, unless ``use_copy`` is False; else, or when the
    ``COPY`` met a conflict, ``bulk_create(ignore_conflicts=True)``.
    """
    if not objs:
        return
    if use_copy and copy_supported():
        assigned = [obj for obj in objs if obj.pk is None]
        for obj, pk in zip(assigned, reserve_ids(model, len(assigned)), strict=True):
            obj.pk = pk
        if copy_rows(model, objs):
            return
        for obj in assigned:
            obj.pk = None
    model._default_manager.bulk_create(objs, ignore_conflicts=True, batch_size=500)


def widen_spans(
    model: type[models.Model], spans: Mapping[int, tuple[datetime, datetime]], first: str, last: str
) -> None:
    """Set ``first`` to the earlier and ``last`` to the later of the stored value (if any) and the
    span's, for every row in ``spans`` (``{pk: (first, last)}``), in one UPDATE."""
    if not spans:
        return
    # In key order, so two workers widening the same rows lock them in the same order (no deadlock).
    spans = dict(sorted(spans.items()))
    if connection.vendor == "postgresql":
        start, end, pk = column(model, first), column(model, last), column(model, "id")
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {connection.ops.quote_name(model._meta.db_table)} AS t "
                f"SET {start} = LEAST(COALESCE(t.{start}, v.first), v.first), "
                f"{end} = GREATEST(COALESCE(t.{end}, v.last), v.last) "
                "FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[]) AS v(id, first, last) "
                f"WHERE t.{pk} = v.id",
                [list(spans), [s[0] for s in spans.values()], [s[1] for s in spans.values()]],
            )
        return

    def per_row(index: int) -> Case:
        whens = [When(pk=pk, then=Value(span[index])) for pk, span in spans.items()]
        return Case(*whens, output_field=DateTimeField())

    starts, ends = per_row(0), per_row(1)
    model._default_manager.filter(pk__in=list(spans)).update(
        **{first: Least(Coalesce(F(first), starts), starts), last: Greatest(Coalesce(F(last), ends), ends)}
    )


# -- writes kept for the end of a batch's transaction ------------------------------------------------

_late = threading.local()


@contextmanager
def deferring() -> Iterator[list[Callable[[], None]]]:
    """While the block runs, ``later`` collects the writes into the list yielded; the caller runs
    them (last in its transaction: rows every run of a team writes, such as an agent's time span
    or a rollup, are then locked only until the commit, so two runs side by side wait on each
    other as little as possible)."""
    previous = getattr(_late, "queue", None)
    queue: list[Callable[[], None]] = []
    _late.queue = queue
    try:
        yield queue
    finally:
        _late.queue = previous


def later(write: Callable[[], None]) -> None:
    """Run ``write`` at the end of the enclosing ``deferring`` block's work, or now outside one."""
    queue = getattr(_late, "queue", None)
    if queue is None:
        write()
    else:
        queue.append(write)


def later_mark() -> int:
    """A point to drop the writes queued after (``later_drop``), when their savepoint rolls back."""
    queue = getattr(_late, "queue", None)
    return 0 if queue is None else len(queue)


def later_drop(mark: int) -> None:
    queue = getattr(_late, "queue", None)
    if queue is not None:
        del queue[mark:]
