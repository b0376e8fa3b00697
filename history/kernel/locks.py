"""Run locks: every kernel write starts by locking its run ``FOR UPDATE`` (DESIGN §4 step 1).

Two ways in: :func:`lock_execution` by the execution's identity (namespace, workflow id,
optional run id), as client operations name a run, and :func:`lock_run` by run id, as
task tokens, transfers and timers do. Each is one raw statement: compiling the ORM
queryset cost more CPU than running it. The lock order is always the run first, then
its task or timer rows, never the namespace row.

Every lock names the run's shard (``shard_id``, the column a distributed PostgreSQL
distributes the run tables by: docs/scale-out.md), so the statement goes to the one node
that holds the run. An identity gives the shard (:func:`shard_for`); a run id alone does
not, so the callers that lock by run id pass the shard they know (the task or timer row's,
the token's). ``shard_id=None`` is for a run id from an older token that did not carry it.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db import models

from chronicle import clock
from chronicle.conf import engine_settings
from chronicle.errors import ChronicleError, ErrorCode
from history.kernel import store
from history.models import (
    ExecutionStatus,
    PendingChildExecution,
    QueryState,
    WorkflowExecution,
    WorkflowQuery,
)
from namespaces.models import Namespace

M = TypeVar("M", bound=models.Model)


def shard_for(namespace_id: uuid.UUID, workflow_id: str) -> int:
    """A stable hash (never Python's salted ``hash()``) of the execution's identity.

    ``CHRONICLE_SHARDS`` never changes after the first start, so this is the shard of
    every run of the identity, past and future: a lock or a look-up by identity names it.
    """
    digest = hashlib.blake2b(f"{namespace_id}/{workflow_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % engine_settings().shards


def lock_execution(
    namespace: Namespace, workflow_id: str, run_id: str | uuid.UUID | None = None
) -> WorkflowExecution:
    """Lock a run ``FOR UPDATE``: the given run, else the current one (running, else latest).

    One raw statement, not an ORM query: compiling the queryset was a fifth of a
    signal's CPU, and "running, else the latest" took two round trips when none ran.
    """
    last: object
    if run_id:
        try:
            run_uuid = uuid.UUID(str(run_id))
        except ValueError:
            raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "run_id must be a UUID") from None
        sql, last = _LOCK_GIVEN_RUN_SQL, run_uuid
    else:
        sql, last = _LOCK_CURRENT_RUN_SQL, ExecutionStatus.RUNNING.value
    with store.bound_cursor() as cursor:
        cursor.execute(sql, [namespace.pk, workflow_id, shard_for(namespace.pk, workflow_id), last])
        row = cursor.fetchone()
    if row is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"workflow execution {workflow_id!r} not found")
    execution = store.load(WorkflowExecution, row)[0]
    store.remember_saved_columns(execution)
    return execution


_LOCK_EXECUTION_SQL = (
    f"SELECT {store.select_list(WorkflowExecution, 'e')} FROM {WorkflowExecution._meta.db_table} e "
    "WHERE namespace_id = %s AND workflow_id = %s AND shard_id = %s "
    "{where} {order} LIMIT 1 FOR UPDATE"
)
# Its two statements, written out once: the given run, or the current one (running, else latest).
_LOCK_GIVEN_RUN_SQL = _LOCK_EXECUTION_SQL.format(where="AND run_id = %s", order="")
_LOCK_CURRENT_RUN_SQL = _LOCK_EXECUTION_SQL.format(
    where="", order="ORDER BY status = %s DESC, start_time DESC"
)


def lock_run(run_id: uuid.UUID | str, shard_id: int | None = None) -> WorkflowExecution:
    """Lock a run ``FOR UPDATE`` and load its namespace without locking the namespace.

    ``FOR UPDATE OF e`` matters: a plain ``FOR UPDATE`` with the join would lock the
    namespace row too, serializing every run of a namespace and deadlocking with the
    timer queue, which locks many runs of one namespace in one transaction. One raw
    statement: compiling the ``select_related`` queryset cost more CPU than running it.
    """
    try:
        run_uuid = uuid.UUID(str(run_id))
    except ValueError:
        raise ChronicleError(ErrorCode.STALE_TASK, "workflow execution not found") from None
    with store.bound_cursor() as cursor:
        if shard_id is None:
            cursor.execute(_LOCK_RUN_ANY_SHARD_SQL, [run_uuid])
        else:
            cursor.execute(_LOCK_RUN_SQL, [run_uuid, shard_id])
        row = cursor.fetchone()
    if row is None:
        raise ChronicleError(ErrorCode.STALE_TASK, "workflow execution not found")
    return _locked(row)


def lock_run_and_row(
    run_id: uuid.UUID | str, model: type[M], column: str, value: object, shard_id: int | None = None
) -> tuple[WorkflowExecution, M] | None:
    """Lock a run as :func:`lock_run` does and, in the same statement, its row of ``model``
    whose ``column`` is ``value`` (run first, then the row: every writer's order); None
    when either is missing, for the caller to find out which the slow way.

    An activity's report locked its run, then its pending activity: two statements where
    one does."""
    try:
        run_uuid = uuid.UUID(str(run_id))
    except ValueError:
        return None
    with store.bound_cursor() as cursor:
        if shard_id is None:
            cursor.execute(_lock_run_and_row_sql(model, column, sharded=False), [value, run_uuid])
        else:
            cursor.execute(_lock_run_and_row_sql(model, column, sharded=True), [value, run_uuid, shard_id])
        row = cursor.fetchone()
    if row is None:
        return None
    execution, rest = store.load(WorkflowExecution, row)
    execution.namespace, rest = store.load(Namespace, rest)
    facts, rest = rest[: len(_LOCK_FACT_NAMES)], rest[len(_LOCK_FACT_NAMES) :]
    setattr(execution, _LOCK_FACTS, dict(zip(_LOCK_FACT_NAMES, facts, strict=True)))
    store.remember_saved_columns(execution)
    return execution, store.load(model, rest)[0]


@functools.cache
def _lock_run_and_row_sql(model: type[models.Model], column: str, *, sharded: bool) -> str:
    return _lock_sql(
        "e.run_id = %s AND e.shard_id = %s" if sharded else "e.run_id = %s", also=model, column=column
    )


def lock_runs(
    run_ids: Collection[uuid.UUID], shard_ids: Collection[int]
) -> dict[uuid.UUID, WorkflowExecution]:
    """Lock several runs as :func:`lock_run` locks one, in one statement; the runs that
    exist, by id. ``shard_ids`` holds the shards the runs are on (one each, or more).

    The locks are taken in run-id order, as every statement that locks several runs takes
    them (the timer queue's batches, a poll's batch of tasks), so two never wait for each
    other in a circle.
    """
    if not run_ids:
        return {}
    with store.bound_cursor() as cursor:
        cursor.execute(
            _LOCK_RUNS_SQL,
            [store.array_literal(sorted(set(run_ids))), store.array_literal(sorted(set(shard_ids)))],
        )
        rows = cursor.fetchall()
    namespaces: dict[Any, Namespace] = {}
    return {run.run_id: run for run in (_locked(row, namespaces) for row in rows)}


_NAMESPACE_COLUMNS = len(Namespace._meta.concrete_fields)
_NAMESPACE_KEY = [f.attname for f in Namespace._meta.concrete_fields].index(Namespace._meta.pk.attname)


def _locked(row: Sequence[Any], namespaces: dict[Any, Namespace] | None = None) -> WorkflowExecution:
    """The locked run from its row; with ``namespaces``, the runs of one namespace share one
    instance of it (read by the same statement, so the same values): a batch of 200 runs
    built 200 copies of one namespace."""
    execution, rest = store.load(WorkflowExecution, row)
    # The namespace's columns and the lock's facts come after the run's.
    key = rest[_NAMESPACE_KEY]
    known = {} if namespaces is None else namespaces
    if key not in known:
        known[key] = store.load(Namespace, rest)[0]
    execution.namespace = known[key]
    facts = rest[_NAMESPACE_COLUMNS:]
    setattr(execution, _LOCK_FACTS, dict(zip(_LOCK_FACT_NAMES, facts, strict=True)))
    store.remember_saved_columns(execution)
    return execution


_LOCK_FACTS = "_chronicle_lock_facts"
_LOCK_FACT_NAMES = ("has_buffered_queries", "has_children", "locked_at")
# What the lock reads besides the run and its namespace: whether its rare rows exist, and
# the database's time once the run is locked (see ``locked_at``).
_LOCK_FACTS_SELECT = (
    f", EXISTS (SELECT 1 FROM {WorkflowQuery._meta.db_table} q WHERE q.run_id = e.run_id"
    f" AND q.shard_id = e.shard_id AND q.buffered AND q.state = '{QueryState.PENDING.value}')"
    " AS has_buffered_queries"
    f", EXISTS (SELECT 1 FROM {PendingChildExecution._meta.db_table} c"
    " WHERE c.run_id = e.run_id AND c.shard_id = e.shard_id) AS has_children"
    ", clock_timestamp() AS locked_at"
)


def _lock_sql(which: str, *, also: type[models.Model] | None = None, column: str = "") -> str:
    """The run lock's statement for the runs ``which`` selects; with ``also``, the run's row
    of that model whose ``column`` equals the statement's first parameter, locked too."""
    select = f"SELECT {store.select_list(WorkflowExecution, 'e')}, {store.select_list(Namespace, 'n')}"
    select += _LOCK_FACTS_SELECT
    runs, namespaces = WorkflowExecution._meta.db_table, Namespace._meta.db_table
    source = f" FROM {runs} e JOIN {namespaces} n ON n.id = e.namespace_id"
    locked = " FOR UPDATE OF e"
    if also is not None:
        select += f", {store.select_list(also, 'r')}"
        source += f" JOIN {also._meta.db_table} r ON r.run_id = e.run_id AND r.shard_id = e.shard_id"
        source += f" AND r.{column} = %s"
        locked += ", r"
    return f"{select}{source} WHERE {which}{locked}"


_LOCK_RUN_SQL = _lock_sql("e.run_id = %s AND e.shard_id = %s")
_LOCK_RUN_ANY_SHARD_SQL = _lock_sql("e.run_id = %s")
_LOCK_RUNS_SQL = _lock_sql("e.run_id = ANY(%s::uuid[]) AND e.shard_id = ANY(%s::int[]) ORDER BY e.run_id")


def may_have_buffered_queries(execution: WorkflowExecution) -> bool:
    """Whether queries may wait for the run's next workflow task (Temporal's buffered
    queries). Almost every run has none, and each workflow-task start and completion
    would otherwise ask with a statement of its own."""
    return _lock_fact(execution, "has_buffered_queries")


def may_have_children(execution: WorkflowExecution) -> bool:
    """Whether the run may have pending children, whose parent-close duties a close
    arms; read with the lock, so a close without children asks nothing more."""
    return _lock_fact(execution, "has_children")


def locked_at(execution: WorkflowExecution) -> datetime | None:
    """The database's (real) time read by the statement that locked the run; None for a
    run locked another way.

    ``clock_timestamp()``, not the statement's start: a lock that waited for a writer of the
    run reads the run again once that writer commits (PostgreSQL re-evaluates the row, the
    time with it), so the time is later than any event that writer stamped by the same
    clock (a writer that appended events updated the run row). The shard owner stamps its
    firings with it (:func:`database_stamp`): the one clock every process shares.
    """
    facts: dict[str, object] = getattr(execution, _LOCK_FACTS, {})
    at = facts.get("locked_at")
    return at if isinstance(at, datetime) else None


def database_stamp(execution: WorkflowExecution) -> datetime:
    """The time a change to the locked run stamps when the database's clock decides (the
    shard owner's firings: ``ExecutionMutation(..., database_time=True)``): the workflow
    time of :func:`locked_at`, else this process's clock for a run locked another way."""
    at = locked_at(execution)
    return clock.now() if at is None else clock.from_database(at)


def _lock_fact(execution: WorkflowExecution, name: str) -> bool:
    """What :func:`lock_run` read with the lock about the run's rare rows (buffered queries,
    children); True ("may have") for a run locked another way. Such rows are added only
    under the run's lock, so a False holds for the whole transaction."""
    facts: dict[str, bool] = getattr(execution, _LOCK_FACTS, {})
    return facts.get(name, True)
