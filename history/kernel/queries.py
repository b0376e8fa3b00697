"""Queries: buffered for the next workflow task or sent as a query task; never history.

As in Temporal, a query that arrives while the run has a workflow task scheduled or
running waits and rides on the next workflow task (its ``queries`` map); the worker
answers in that task's completion. An idle or closed run gets a query task at once.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from chronicle import clock
from chronicle.conf import engine_settings
from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.kernel import store, tokens
from history.kernel._mutation import ExecutionMutation
from history.kernel.locks import may_have_buffered_queries
from history.kernel.wakeups import HISTORY_CHANNEL, notify
from history.models import QueryState, Task, TaskKind, WorkflowExecution, WorkflowQuery

MAX_BUFFERED_QUERIES = 1
FAILING_TASK_ATTEMPT = 3


def query_task_token(query: WorkflowQuery, namespace_id: uuid.UUID) -> str:
    """The token a query task carries, issued in its run's namespace (with its shard)."""
    return tokens.encode("query", namespace_id, q=str(query.id), h=query.shard_id)


def _pending_buffered(ex: WorkflowExecution) -> QuerySet[WorkflowQuery]:
    """The run's queries waiting for its next workflow task."""
    return WorkflowQuery.objects.filter(run=ex, shard_id=ex.shard_id, buffered=True, state=QueryState.PENDING)


def _set_buffered(query: WorkflowQuery, buffered: bool) -> None:
    query.buffered = buffered
    WorkflowQuery.objects.filter(id=query.id, shard_id=query.shard_id).update(buffered=buffered)


def enqueue_query_txn(mutation: ExecutionMutation, query: WorkflowQuery) -> None:
    """Buffer the query behind a pending workflow task, or dispatch a query task now."""
    ex = mutation.execution
    _check_ready_for_queries(ex)
    # A start backoff (cron, retry, delayed start) ends in a workflow task: wait for it too.
    if ex.is_running and (ex.wft_scheduled_event_id or ex.wft_backoff_until):
        if _pending_buffered(ex).count() >= MAX_BUFFERED_QUERIES:
            raise ChronicleError(
                ErrorCode.BUSY_WORKFLOW,
                f"the run already has {MAX_BUFFERED_QUERIES} query waiting for its workflow task",
                retry_after=1,
            )
        _set_buffered(query, True)
        return
    _dispatch_query_task(mutation, query)


def _check_ready_for_queries(ex: WorkflowExecution) -> None:
    """Fail fast where no worker could answer soon (Temporal's WorkflowNotReady cases)."""
    if ex.is_running and ex.wft_attempt >= FAILING_TASK_ATTEMPT:
        raise ChronicleError(
            ErrorCode.BUSY_WORKFLOW,
            f"the workflow task keeps failing (attempt {ex.wft_attempt}); not ready for queries",
            retry_after=1,
        )
    if ex.is_running and ex.wft_backoff_until and ex.last_wft_completed_event_id == 0:
        deadline = clock.now() + timedelta(seconds=engine_settings().query_timeout_seconds)
        if ex.wft_backoff_until > deadline:
            raise ChronicleError(
                ErrorCode.CONFLICT,
                f"the run's first workflow task waits until {ex.wft_backoff_until.isoformat()} "
                "(cron, retry or delayed start); nothing to query yet",
            )
    if not ex.is_running and ex.last_wft_completed_event_id == 0:
        raise ChronicleError(
            ErrorCode.CONFLICT, "the run closed before any workflow task completed; nothing to query"
        )


def _dispatch_query_task(mutation: ExecutionMutation, query: WorkflowQuery) -> None:
    ex = mutation.execution
    if query.buffered:
        _set_buffered(query, False)
    queue = ex.sticky_task_queue or ex.task_queue
    mutation.add_task(TaskKind.WORKFLOW, queue, 0, 1, query_id=query.id)
    if ex.sticky_task_queue:
        mutation.add_task(TaskKind.WORKFLOW, ex.task_queue, 0, 1, query_id=query.id)


_BUFFERED = (
    f"SELECT id, query_type, query_args FROM {WorkflowQuery._meta.db_table} "
    "WHERE run_id = %s AND shard_id = %s AND buffered AND state = %s ORDER BY created_at"
)


def buffered_queries(ex: WorkflowExecution) -> dict[str, dict[str, Any]]:
    """The ``queries`` map a started workflow task carries to the worker.

    Every started workflow task asks, and almost always finds none: one fixed statement,
    since the ORM compiling the query cost more than running it. (``query_args`` comes
    as JSON text, as Django reads a ``jsonb`` column.)
    """
    if not may_have_buffered_queries(ex):
        return {}
    with store.bound_cursor() as cursor:
        cursor.execute(_BUFFERED, [ex.run_id, ex.shard_id, str(QueryState.PENDING)])
        rows = cursor.fetchall()
    return {str(qid): {"query_type": kind, "query_args": json.loads(args)} for qid, kind, args in rows}


def answer_buffered_queries_txn(ex: WorkflowExecution, results: dict[str, Any]) -> None:
    """Record answers a workflow-task completion carried, keyed by query id."""
    for query_id, result in results.items():
        if not isinstance(result, dict):
            raise invalid(f"query_results[{query_id!r}] must be an object")
        query = _pending_buffered(ex).select_for_update().filter(id=_parse_uuid(query_id)).first()
        if query is not None:
            _answer(query, result.get("answer"), str(result.get("error_message") or ""))


def release_buffered_queries_txn(mutation: ExecutionMutation) -> None:
    """With no workflow task to ride on any more, send the waiting queries as query tasks."""
    ex = mutation.execution
    if (ex.is_running and ex.wft_scheduled_event_id) or not may_have_buffered_queries(ex):
        return
    for query in _pending_buffered(ex):
        _dispatch_query_task(mutation, query)


def _parse_uuid(value: str) -> uuid.UUID:
    """A query id from the worker; one that is not a UUID matches no query (the nil UUID)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        return uuid.UUID(int=0)


def _answer(query: WorkflowQuery, answer: Any, error_message: str) -> None:
    query.state = QueryState.FAILED if error_message else QueryState.ANSWERED
    query.answer = answer
    query.error_message = error_message
    WorkflowQuery.objects.filter(id=query.id, shard_id=query.shard_id).update(
        state=query.state, answer=query.answer, error_message=error_message
    )
    notify(HISTORY_CHANNEL, f"query:{query.id}")


def forget_query(query: WorkflowQuery) -> None:
    """Delete a query its caller is done with, and any query task still queued for it, in
    one statement on its shard (``Model.delete`` would look for the tasks on every shard)."""
    write = store.Write()
    where = "AND shard_id = %s"
    write.add(f"DELETE FROM {Task._meta.db_table} WHERE query_id = %s {where}", [query.id, query.shard_id])
    write.add(f"DELETE FROM {WorkflowQuery._meta.db_table} WHERE id = %s {where}", [query.id, query.shard_id])
    store.send(write)


def respond_query_task_completed(
    *,
    scope: tokens.TaskScope,
    task_token: str,
    answer: Any = None,
    error_message: str = "",
) -> None:
    """Keep a query task's answer and wake its caller. A token of another namespace, or
    one answered under another queue than its run's, is refused as an unknown task."""
    token = tokens.decode(task_token, "query")
    tokens.check_issued_in(token, scope)
    queries = WorkflowQuery.objects.select_for_update(of=("self",)).select_related("run")
    shard = tokens.token_shard(token)
    if shard is not None:
        queries = queries.filter(shard_id=shard, run__shard_id=shard)
    with transaction.atomic(durable=True):
        query = queries.filter(id=token["q"]).first()
        if query is None:
            raise tokens.task_not_found()
        run = query.run
        tokens.check_scope(
            scope, namespace_id=run.namespace_id, queues=(run.task_queue, run.sticky_task_queue)
        )
        if query.state != QueryState.PENDING:
            raise ChronicleError(ErrorCode.STALE_TASK, "query not found or already answered")
        _answer(query, answer, error_message)
