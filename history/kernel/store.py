"""The kernel's store: the SQL a kernel write sends, built from the models' metadata.

A kernel write (``ExecutionMutation.save``, ``save_all``) is **one statement**: the run
row's ``INSERT`` or ``UPDATE``, the new history events, task rows and timer rows, and the
notifications, each a data-modifying part of one ``WITH`` query. PostgreSQL runs every
part whether or not the final ``SELECT`` reads it, within the caller's transaction, so
the write is as atomic as the separate statements were, in one round trip and one parse
instead of four or five. Foreign keys are deferred (Django creates them so), so a new
run and its first events may go in together. Notifications are queued by ``pg_notify``
and delivered at commit, as before.

Table and column names come from ``Model._meta``; the statement's shape depends only on
which parts a write has and, up to a few rows, how many rows each holds (more go as
arrays: :func:`rows_query`). Values are sent as parameters bound apart from the statement
(see :func:`bound_cursor`), never spliced into the text, and the few shapes are prepared:
parsed and planned once per connection.

Every ``UPDATE`` and ``DELETE`` names the rows' shard (``shard_id``) besides their keys, so
on a distributed PostgreSQL each goes to the node that holds the run (docs/scale-out.md).
"""

from __future__ import annotations

import copy
import functools
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
from django.db import DEFAULT_DB_ALIAS, connection, connections, models

from history.kernel.cursors import bound_cursor as bound_cursor  # the kernel calls it as store.bound_cursor
from history.models import WorkflowExecution

EXECUTION_FIELDS = [f for f in WorkflowExecution._meta.concrete_fields if not f.primary_key]
_JSON_COLUMNS = frozenset(f.attname for f in EXECUTION_FIELDS if isinstance(f, models.JSONField))
_SAVED_COLUMNS = "_chronicle_saved_columns"
# Up to this many rows, a part sends a VALUES list; more, a JSON array of rows (rows_query).
FEW_ROWS = 4
_NOTIFY = "SELECT pg_notify(c, p) FROM unnest(%s::text[], %s::text[]) AS n(c, p)"


def array_literal(values: Iterable[Any]) -> str:
    """``values`` as PostgreSQL's text form of an array, for a parameter cast to its array
    type (``%s::int[]``).

    psycopg dumps a list parameter in Python, looking at each element to choose the
    array's type before dumping it: in a run's close, which names its run and shard in
    four deletions and its notifications in two more lists, that was a fifth of the
    write's CPU. Text (a notification's payload) is quoted with its ``\\`` and ``"`` escaped.
    """
    return "{" + ",".join(map(_array_element, values)) + "}"


def _array_element(value: Any) -> str:
    if isinstance(value, int | uuid.UUID) and not isinstance(value, bool):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Write:
    """The parts of one kernel write, sent as one statement by :func:`send`."""

    parts: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    # Per inserted batch whose ids come back: its part's index and the rows to give them to.
    returning: list[tuple[int, Sequence[models.Model]]] = field(default_factory=list)
    notify_part: int | None = None

    def add(self, sql: str, params: list[Any]) -> int:
        """Add a part; return its index."""
        self.parts.append(sql)
        self.params.extend(params)
        return len(self.parts) - 1


@functools.cache
def typed_param(field: models.Field[Any, Any]) -> str:
    """A statement parameter for ``field``, typed so a multi-row ``VALUES`` list resolves
    (cached: every kernel write asks, and the one database's types do not change).

    Text goes as ``text``, not as the column's ``varchar(n)``: an explicit cast to
    ``varchar(n)`` would cut an over-long value silently, where storing ``text`` into the
    column refuses it, as the ORM's writes do.
    """
    if isinstance(field, models.CharField | models.TextField):
        return "%s::text"
    return f"%s::{field.db_type(connection)}"


def rows_query(fields: list[Any], objects: Sequence[Any]) -> tuple[str, list[Any]]:
    """A query yielding ``fields`` of ``objects`` as rows, in their order, and its parameters.

    A few rows (a hot call's write) go as a ``VALUES`` list, a typed parameter per value:
    cheapest to send. More (a batch of timers, a fan-out, a batch of claimed tasks) go as
    one JSON array of rows (:func:`_json_rows`), whose text no longer depends on the number
    of rows, so it is parsed and planned once.
    """
    if len(objects) <= FEW_ROWS:
        key = tuple(fields)
        row_sql, prepared = _values_row(key), _prepared_positions(key)
        params = [value for obj in objects for value in _param_values(obj, fields, prepared)]
        return "VALUES " + ", ".join([row_sql] * len(objects)), params
    return _json_rows_sql(tuple(fields)), [_json_rows(fields, objects)]


def param_values(row: models.Model, fields: Sequence[models.Field[Any, Any]]) -> list[Any]:
    """``row``'s values of ``fields`` as statement parameters.

    Each parameter is cast to its column's type in the statement (:func:`typed_param`), so
    a plain column's value goes as the model holds it, as the batches' JSON rows send it; a
    JSON column goes through its field (psycopg's ``Jsonb`` with the field's encoder) and a
    boolean as ``bool`` (PostgreSQL casts no ``bigint`` to ``boolean``). The ORM's generic
    preparation of every value (``get_db_prep_save``, a few calls deep for each) took 15 µs
    for three events' rows and 8 µs for a timer's, against 9 and 3 µs this way.
    """
    return _param_values(row, fields, _prepared_positions(tuple(fields)))


def _param_values(
    row: models.Model,
    fields: Sequence[models.Field[Any, Any]],
    prepared_positions: tuple[tuple[int, models.Field[Any, Any]], ...],
) -> list[Any]:
    """:func:`param_values` with the positions to prepare looked up once per batch of rows
    (the lookup hashes every field, each hash a call of Django's ``Field.__hash__``)."""
    values = [getattr(row, f.attname) for f in fields]
    for i, prepared in prepared_positions:
        value = values[i]
        if isinstance(prepared, models.JSONField):
            values[i] = prepared.get_db_prep_save(value, _db())
        elif value is not None:
            values[i] = bool(value)
    return values


@functools.lru_cache(maxsize=256)
def _prepared_positions(
    fields: tuple[models.Field[Any, Any], ...],
) -> tuple[tuple[int, models.Field[Any, Any]], ...]:
    """The positions of ``fields`` whose values :func:`param_values` prepares: JSON and boolean."""
    return tuple(
        (i, f) for i, f in enumerate(fields) if isinstance(f, models.JSONField | models.BooleanField)
    )


def _json_rows(fields: list[Any], objects: Sequence[Any]) -> str:
    """The rows as one JSON array of arrays, a value per field, serialised in C.

    psycopg dumps an array parameter element by element in Python: for a batch of 200 runs
    (fifty columns each, ten thousand values) that was most of the shard owner's CPU for the
    batch. The model's own values go as JSON (times as RFC 3339 text, ids and decimals as
    their text, JSON columns nested as they are), and :func:`_json_rows_sql` casts each back
    to its column's type. msgspec writes times and ids itself, where the standard library
    called back into Python for each: eighteen times faster on a batch of eight runs. (It
    writes a NaN as ``null``, where the standard library refused it; no input reaches a
    row with one, as the API refuses non-finite numbers at the door.)
    """
    attnames = [f.attname for f in fields]
    rows = [[getattr(obj, name) for name in attnames] for obj in objects]
    return _ROWS_ENCODER.encode(rows).decode()


_ROWS_ENCODER = msgspec.json.Encoder()


@functools.lru_cache(maxsize=64)
def _json_rows_sql(fields: tuple[Any, ...]) -> str:
    """Rows of ``fields`` from a JSON array of arrays (``jsonb``: each row parsed once, each
    value read by its index), each value cast to its column's type, in the array's order.

    A JSON column takes its value as it is; a JSON ``null`` there is SQL ``NULL``, as Django
    stores ``None``. Text goes as ``text`` (see :func:`typed_param`).
    """
    values = []
    for i, f in enumerate(fields):
        if isinstance(f, models.JSONField):
            values.append(f"NULLIF(r->{i}, 'null'::jsonb)")
        else:
            values.append(f"(r->>{i}){typed_param(f).removeprefix('%s')}")
    return (
        f"SELECT {', '.join(values)} FROM jsonb_array_elements(%s::jsonb) "
        "WITH ORDINALITY AS u(r, row_number) ORDER BY row_number"
    )


@functools.cache
def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _db() -> Any:
    """This thread's connection itself, looked up once per write: each attribute read
    through Django's ``connection`` proxy looks it up again, and preparing a write's values
    passes it to every field of every row."""
    return connections[DEFAULT_DB_ALIAS]


@functools.cache
def _values_row(fields: tuple[models.Field[Any, Any], ...]) -> str:
    """One typed ``VALUES`` row for ``fields``."""
    return "(" + ", ".join(typed_param(f) for f in fields) + ")"


def insert_rows(write: Write, rows: Sequence[models.Model]) -> None:
    """Add an ``INSERT`` of ``rows`` (one model) to ``write``; a serial id comes back to each.

    Django's ``bulk_create`` spent more Python on preparing a write's few rows than
    PostgreSQL spent storing them; this is the statement it sends, a row of typed values
    each, without the generic machinery (these models compute no field on save).
    """
    if not rows:
        return
    meta = rows[0]._meta
    serial = meta.auto_field
    fields = [f for f in meta.concrete_fields if f is not serial]
    rows_sql, params = rows_query(fields, rows)
    columns = ", ".join(_quote(f.column) for f in fields)
    sql = f"INSERT INTO {_quote(meta.db_table)} ({columns}) {rows_sql}"
    if serial is None:
        write.add(sql, params)
        _mark_saved(rows)
    else:
        part = write.add(f"{sql} RETURNING {_quote(serial.column)} AS id", params)
        write.returning.append((part, rows))


def delete_rows(
    write: Write, model: type[models.Model], ids: Sequence[Any], shard_ids: Sequence[int]
) -> None:
    """Add the deletion of ``model``'s rows with these primary keys, on these shards, to ``write``."""
    if ids:
        meta = model._meta
        assert meta.pk is not None
        table, pk = _quote(meta.db_table), _quote(meta.pk.column)
        write.add(
            f"DELETE FROM {table} WHERE {pk} = ANY(%s::{meta.pk.db_type(connection)}[]) "
            "AND shard_id = ANY(%s::int[])",
            [array_literal(ids), array_literal(sorted(set(shard_ids)))],
        )


def update_changed_columns(write: Write, ex: WorkflowExecution) -> None:
    """Add an ``UPDATE`` of only the run's columns that changed since it was locked (or
    last written); nothing if none did, and the whole row for a run loaded another way.

    Starting an activity changes no column of its run, and starting a workflow task a
    handful: writing all 50 (serialising the JSON ones) was most of the cost of the hot
    path's one statement. The row stays locked ``FOR UPDATE`` either way.
    """
    saved = getattr(ex, _SAVED_COLUMNS, None)
    if saved is None:
        update_whole_rows(write, [ex])
        return
    changed = [f for f in EXECUTION_FIELDS if getattr(ex, f.attname) != saved[f.attname]]
    if changed:
        update_fields(write, ex, changed)


def update_fields(write: Write, row: models.Model, fields: Sequence[models.Field[Any, Any]]) -> None:
    """Add an ``UPDATE`` of these fields of a stored row, on its shard (fixed text per
    model and fields, so the statement is prepared once: the ORM compiled it per call)."""
    params = param_values(row, fields)
    write.add(_update_sql(type(row), tuple(fields)), [*params, row.pk, row.shard_id])  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=256)
def _update_sql(model: type[models.Model], fields: tuple[models.Field[Any, Any], ...]) -> str:
    pk = model._meta.pk
    assert pk is not None
    assignments = ", ".join(f"{_quote(f.column)} = {typed_param(f)}" for f in fields)
    table = _quote(model._meta.db_table)
    return f"UPDATE {table} SET {assignments} WHERE {_quote(pk.column)} = %s AND shard_id = %s"


def update_whole_rows(write: Write, executions: Sequence[WorkflowExecution]) -> None:
    """Add an ``UPDATE ... FROM (VALUES ...)`` writing every column of these runs.

    Django's ``bulk_update`` builds a ``CASE WHEN`` per column per row, which cost most
    of a timer-firing batch's time in Python; a VALUES list typed by cast is the same
    write for a fraction of that.
    """
    pk = WorkflowExecution._meta.pk
    assert pk is not None
    fields = [pk, *EXECUTION_FIELDS]
    rows_sql, params = rows_query(fields, executions)
    columns = ", ".join(_quote(f.column) for f in fields)
    assignments = ", ".join(f"{_quote(f.column)} = v.{_quote(f.column)}" for f in EXECUTION_FIELDS)
    table = _quote(WorkflowExecution._meta.db_table)
    write.add(
        f"UPDATE {table} AS t SET {assignments} FROM ({rows_sql}) AS v({columns}) "
        f"WHERE t.{_quote(pk.column)} = v.{_quote(pk.column)} AND t.shard_id = v.shard_id",
        params,
    )


def notify(write: Write, notifications: Sequence[tuple[str, str]]) -> None:
    """Add the (channel, payload) notifications, sent at commit."""
    if notifications:
        channels, payloads = [c for c, _ in notifications], [p for _, p in notifications]
        write.notify_part = write.add(_NOTIFY, [array_literal(channels), array_literal(payloads)])


def send(write: Write) -> None:
    """Send the write's parts as one statement and give the inserted rows their ids.

    Each part is a ``WITH`` member; the final ``SELECT`` reads the ids the inserts return
    (tagged by batch, and in order: a statement's serial ids rise with its ``VALUES``
    rows) and counts the notifications, whose plain ``SELECT`` would not run unread.
    """
    if not write.parts:
        return
    if len(write.parts) == 1 and not write.returning:
        sql = write.parts[0]
    else:
        names = [f"w{i}" for i in range(len(write.parts))]
        members = ", ".join(f"{name} AS ({part})" for name, part in zip(names, write.parts, strict=True))
        reads = _final_reads(write, names)
        sql = f"WITH {members} {reads}"
    with bound_cursor() as cursor:
        cursor.execute(sql, write.params)
        if write.returning:
            _assign_ids([rows for _, rows in write.returning], cursor.fetchall())


def _final_reads(write: Write, names: list[str]) -> str:
    reads = [f"SELECT {n}::int, id FROM {names[part]}" for n, (part, _) in enumerate(write.returning)]
    if write.notify_part is not None:
        reads.append(f"SELECT -1, count(*) FROM {names[write.notify_part]}")
    if not reads:
        return "SELECT 1"
    return " UNION ALL ".join(reads) + " ORDER BY 1, 2"


def _assign_ids(batches: list[Sequence[models.Model]], rows: list[tuple[int, int]]) -> None:
    ids: list[list[int]] = [[] for _ in batches]
    for batch, row_id in rows:
        if batch >= 0:
            ids[batch].append(row_id)
    for objects, batch_ids in zip(batches, ids, strict=True):
        for obj, row_id in zip(objects, batch_ids, strict=True):
            obj.pk = row_id
        _mark_saved(objects)


def _mark_saved(objects: Sequence[models.Model]) -> None:
    for obj in objects:
        obj._state.adding = False
        obj._state.db = DEFAULT_DB_ALIAS


def remember_saved_columns(ex: WorkflowExecution) -> None:
    """Keep the run's column values as the database holds them (just locked, or just
    written), so :func:`update_changed_columns` writes only the columns that changed.

    JSON values are copied, so a change made in place is seen too; they are small (a
    payload past the namespace's inline limit is stored apart and only referenced here).
    A run loaded any other way has none and is written whole.
    """
    columns = dict(ex.__dict__)  # a copy in C: the columns are attributes of the instance
    if not columns.keys() >= _EXECUTION_ATTNAMES:  # a deferred column: read it the slow way
        columns = {name: getattr(ex, name) for name in _EXECUTION_ATTNAMES}
    columns.pop(_SAVED_COLUMNS, None)
    for name in _JSON_COLUMNS:
        columns[name] = _copy_json(columns[name])
    setattr(ex, _SAVED_COLUMNS, columns)


_EXECUTION_ATTNAMES = frozenset(f.attname for f in EXECUTION_FIELDS)


_IMMUTABLE_JSON = (str, int, float, bool, type(None))


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value: its dicts and lists rebuilt, its scalars shared.

    Every locked run's JSON columns are copied, and ``copy.deepcopy`` (a memo, a dispatch
    per value) took three times as long; anything that is not JSON still goes to it."""
    kind = type(value)
    if kind is dict:
        return {key: _copy_json(item) for key, item in value.items()}
    if kind is list:
        return [_copy_json(item) for item in value]
    if kind in _IMMUTABLE_JSON:
        return value
    return copy.deepcopy(value)


@functools.cache
def select_list(model: type[models.Model], alias: str) -> str:
    """The model's columns, in its fields' order, for a fixed statement's ``SELECT`` (or
    ``RETURNING``) that :func:`load` reads back."""
    return ", ".join(f"{alias}.{_quote(f.column)}" for f in model._meta.concrete_fields)


@functools.cache
def _loading(model: type[models.Model]) -> tuple[tuple[str, ...], tuple[tuple[int, Any, bool], ...]]:
    """The attribute names a row of ``model`` fills, in order, and the fields whose stored
    value needs converting on the way in (JSON columns come as text), each with whether
    :func:`read_json` converts it."""
    fields = model._meta.concrete_fields
    converters = tuple((i, f, _plain_json(f)) for i, f in enumerate(fields) if hasattr(f, "from_db_value"))
    return tuple(f.attname for f in fields), converters


def read_json(text: str | bytes) -> Any:
    """A ``jsonb`` value read as text (as Django reads one), decoded by msgspec: two to three
    times faster than the standard library, and a run, its namespace and its events hold a
    dozen such values. ``jsonb`` holds no NaN and no repeated key, where the two could
    differ."""
    return _JSON_DECODER.decode(text)


_JSON_DECODER = msgspec.json.Decoder()


def _plain_json(field: models.Field[Any, Any]) -> bool:
    """Whether ``field`` is a JSON column read with no decoder of its own."""
    return isinstance(field, models.JSONField) and field.decoder is None


M = TypeVar("M", bound=models.Model)


def load(model: type[M], row: Sequence[Any]) -> tuple[M, Sequence[Any]]:
    """A model instance from the first columns of ``row`` (read with :func:`select_list`),
    and the columns after them. What ``Model.objects.raw`` does per row, without working
    out the statement's column order each time: the hot path reads a run and a task row
    on every call."""
    names, converters = _loading(model)
    values = list(row[: len(names)])
    if converters:
        db = _db()
        for i, converted, plain_json in converters:
            value = values[i]
            if plain_json and value is not None:
                values[i] = read_json(value)
            else:
                values[i] = converted.from_db_value(value, None, db)
    return model.from_db(DEFAULT_DB_ALIAS, names, values), row[len(names) :]
