"""Claiming task rows: ``FOR UPDATE SKIP LOCKED``, then record started through the kernel.

A claimed row is validated against the run's state by the kernel; stale rows are
deleted and the next one is tried, so a row is a hint and never the truth.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from chronicle import clock
from chronicle.errors import ChronicleError
from history import kernel
from history.kernel import store
from history.kernel.locks import lock_run, lock_runs
from history.kernel.queries import query_task_token
from history.kernel.responses import build_workflow_task_response
from history.kernel.versioning import WorkerVersionStamp, dispatch_build_id
from history.models import QueryState, Task, TaskKind, WorkflowExecution, WorkflowQuery
from matching.models import Poller
from namespaces.models import Namespace, TaskQueueLimit
from namespaces.rate_limits import dispatch_bucket_key, take_token

MAX_STALE_PER_POLL = 50
_POLLER_SEEN_GRANULARITY = timedelta(seconds=5)
# A sticky queue whose poller has not been seen for this long counts as gone; a
# waiting poll refreshes its row every granularity period, so live ones stay inside.
STICKY_POLLER_LIVENESS = timedelta(seconds=10)
# Poller rows written recently, per process: (namespace, queue, kind, identity, build) -> monotonic time.
# Queue limits are cached per process; a changed limit takes effect within this time.
QUEUE_LIMIT_CACHE_SECONDS = 3.0
_queue_limit_cache: dict[tuple[object, str], tuple[float, float]] = {}
_recent_poller_writes: dict[tuple[object, str, str, str, str], float] = {}


_TASKS = Task._meta.db_table
_RUNS = WorkflowExecution._meta.db_table
_POLLERS = Poller._meta.db_table


class DispatchThrottled(Exception):
    def __init__(self, wait: float) -> None:
        self.wait = wait


def _take_next(namespace: Namespace, task_queue: str, kind: str, build_id: str, count: int = 1) -> list[Task]:
    """Claim and delete up to ``count`` of the oldest visible rows in one round trip
    (skipping locked ones), oldest first.

    Only rows of the poller's build (``''`` for unversioned pollers) are candidates;
    ``build_id`` is an equality column of the dispatch index, so the scan stays ordered.
    """
    with store.bound_cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [namespace.id, task_queue, kind, build_id, clock.now(), count])
        rows = cursor.fetchall()
    tasks = [store.load(Task, row)[0] for row in rows]
    return sorted(tasks, key=lambda task: (task.visible_at, task.id))


# One fixed statement, read back without the ORM: every poll runs it. The ids are picked
# once, as an array (an InitPlan): with ``id IN (SELECT ... LIMIT n SKIP LOCKED)`` the
# planner may run the subquery again per row, and each run skips what the last one locked,
# so the statement deleted more than ``n`` rows.
_CLAIM_SQL = f"""
    DELETE FROM {_TASKS} AS t WHERE id = ANY(ARRAY(
        SELECT id FROM {_TASKS}
        WHERE namespace_id = %s AND task_queue = %s AND kind = %s AND build_id = %s
          AND visible_at <= %s
        ORDER BY visible_at, id
        LIMIT %s
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING {store.select_list(Task, "t")}
"""


def _take(namespace: Namespace, task_queue: str, kind: str, build_id: str) -> tuple[Task | None, bool]:
    """The next row for this poller, and whether it came from a sticky queue with no live poller."""
    taken = _take_next(namespace, task_queue, kind, build_id)
    if taken or kind != TaskKind.WORKFLOW:
        return (taken[0] if taken else None), False
    task = _take_sticky_fallback(namespace, task_queue, build_id)
    return task, task is not None


def _take_sticky_fallback(namespace: Namespace, task_queue: str, build_id: str) -> Task | None:
    """Claim and delete a workflow task waiting on the sticky queue of a run of ``task_queue``
    whose sticky poller is gone (none seen for ``STICKY_POLLER_LIVENESS``).

    This is the fast fallback: a normal-queue poller takes it at once instead of the run
    waiting for the sticky schedule-to-start timeout. Every empty workflow poll asks, so
    it is one raw statement: the ORM spent five times longer compiling it than
    PostgreSQL spent running it.
    """
    now = timezone.now()
    taken = Task.objects.raw(
        f"""
        DELETE FROM {_TASKS} WHERE id = (
            SELECT t.id FROM {_TASKS} t JOIN {_RUNS} r ON r.run_id = t.run_id AND r.shard_id = t.shard_id
            WHERE t.namespace_id = %s AND t.kind = %s AND t.build_id = %s AND t.visible_at <= %s
              AND t.query_id IS NULL AND t.task_queue <> %s
              AND r.task_queue = %s AND t.task_queue = r.sticky_task_queue
              AND NOT EXISTS (
                  SELECT 1 FROM {_POLLERS} p
                  WHERE p.namespace_id = t.namespace_id AND p.task_queue = t.task_queue
                    AND p.kind = %s AND p.last_seen_at >= %s
              )
            ORDER BY t.visible_at, t.id
            LIMIT 1
            FOR UPDATE OF t SKIP LOCKED
        )
        RETURNING *
        """,
        [
            namespace.id,
            TaskKind.WORKFLOW,
            build_id,
            clock.now(),
            task_queue,
            task_queue,
            TaskKind.WORKFLOW,
            now - STICKY_POLLER_LIVENESS,
        ],
    )
    return next(iter(taken), None)


def sticky_poller_alive(execution: WorkflowExecution) -> bool:
    """Whether a worker polled the run's sticky queue within ``STICKY_POLLER_LIVENESS``
    (a waiting poll refreshes its row every few seconds)."""
    return Poller.objects.filter(
        namespace_id=execution.namespace_id,
        task_queue=execution.sticky_task_queue,
        kind=TaskKind.WORKFLOW,
        last_seen_at__gte=timezone.now() - STICKY_POLLER_LIVENESS,
    ).exists()


def _queue_dispatch_rps(namespace: Namespace, task_queue: str) -> float:
    """The queue's dispatch limit (0 = none), re-read at most every few seconds per process."""
    key = (namespace.id, task_queue)
    cached = _queue_limit_cache.get(key)
    now = time.monotonic()
    if cached is not None and cached[0] > now:
        return cached[1]
    limit = (
        TaskQueueLimit.objects.filter(namespace=namespace, task_queue=task_queue)
        .values_list("dispatch_rps", flat=True)
        .first()
    )
    rps = limit or 0.0
    _queue_limit_cache[key] = (now + QUEUE_LIMIT_CACHE_SECONDS, rps)
    return rps


def _check_dispatch_limits(namespace: Namespace, task_queue: str) -> None:
    if namespace.dispatch_rps > 0:
        wait = take_token(
            dispatch_bucket_key(namespace.id), rate=namespace.dispatch_rps, burst=namespace.dispatch_rps
        )
        if wait:
            raise DispatchThrottled(wait)
    queue_rps = _queue_dispatch_rps(namespace, task_queue)
    if queue_rps > 0:
        wait = take_token(dispatch_bucket_key(namespace.id, task_queue), rate=queue_rps, burst=queue_rps)
        if wait:
            raise DispatchThrottled(wait)


def record_poller(
    namespace: Namespace, task_queue: str, kind: str, identity: str, build_id: str = ""
) -> None:
    """Mark the poller (of ``build_id``) as seen; at most one write per granularity period per process."""
    key = (namespace.id, task_queue, kind, identity, build_id)
    last_write = _recent_poller_writes.get(key)
    if last_write is not None and time.monotonic() - last_write < _POLLER_SEEN_GRANULARITY.total_seconds():
        return
    now = timezone.now()
    updated = Poller.objects.filter(
        namespace=namespace,
        task_queue=task_queue,
        kind=kind,
        identity=identity,
        build_id=build_id,
        last_seen_at__gte=now - _POLLER_SEEN_GRANULARITY,
    ).exists()
    if not updated:
        Poller.objects.update_or_create(
            namespace=namespace,
            task_queue=task_queue,
            kind=kind,
            identity=identity,
            build_id=build_id,
            defaults={"last_seen_at": now},
        )
    _recent_poller_writes[key] = time.monotonic()


def poll_once(
    namespace: Namespace,
    task_queue: str,
    kind: str,
    identity: str,
    worker_version: WorkerVersionStamp | None = None,
) -> dict[str, Any] | None:
    """Try to hand out one task now; None when the queue has nothing visible for the poller's build.

    Each attempt also keeps the poller's registry row fresh, so a poll waiting a
    long time still counts as a live poller of its queue.
    """
    build_id = dispatch_build_id(worker_version)
    record_poller(namespace, task_queue, kind, identity, build_id)
    _check_dispatch_limits(namespace, task_queue)
    for _ in range(MAX_STALE_PER_POLL):
        with transaction.atomic(durable=True):
            task, from_sticky = _take(namespace, task_queue, kind, build_id)
            if task is None:
                return None
            response = _start(
                task, _lock(task), identity, sticky_fallback=from_sticky, worker_version=worker_version
            )
        if response is not None:
            return response
    return None


MAX_TASKS_PER_POLL = 32


def poll_batch(
    namespace: Namespace,
    task_queue: str,
    kind: str,
    identity: str,
    worker_version: WorkerVersionStamp | None = None,
    *,
    max_tasks: int = 1,
) -> list[dict[str, Any]]:
    """Hand out the tasks visible now, up to ``max_tasks``, so a worker with free slots takes
    a burst (a storm of timers firing, a fan-out's results) in one call.

    The burst is claimed in one transaction: one statement claims the rows, one locks
    their runs (in run-id order), then each task is started as one poll would start it;
    claiming them one transaction each cost three statements and a commit per task. Under a
    dispatch rate limit, which takes a token per task, tasks are claimed one at a time and
    the batch ends at the limit (after at least one task, so a throttled batch still
    answers with what it has).
    """
    if max_tasks == 1 or _has_dispatch_limits(namespace, task_queue):
        return _poll_one_by_one(namespace, task_queue, kind, identity, worker_version, max_tasks)
    build_id = dispatch_build_id(worker_version)
    record_poller(namespace, task_queue, kind, identity, build_id)
    started: list[dict[str, Any]] = []
    for _ in range(MAX_STALE_PER_POLL):
        wanted = max_tasks - len(started)
        with transaction.atomic(durable=True):
            claimed = _take_burst(namespace, task_queue, kind, build_id, wanted)
            runs = lock_runs([task.run_id for task, _ in claimed], [task.shard_id for task, _ in claimed])
            started += _start_burst(claimed, runs, identity, worker_version)
        if len(claimed) < wanted or len(started) >= max_tasks:
            break  # the queue is drained, or the worker is full
    return started


def _start_burst(
    claimed: list[tuple[Task, bool]],
    runs: dict[uuid.UUID, WorkflowExecution],
    identity: str,
    worker_version: WorkerVersionStamp | None,
) -> list[dict[str, Any]]:
    """Start a burst's claimed tasks on their locked runs, in the order claimed; stale rows
    give nothing. Its workflow tasks start together (one write, one history read for all);
    query and activity tasks one by one, as a poll of one starts them."""
    workflow_tasks = [
        (task, from_sticky)
        for task, from_sticky in claimed
        if task.kind == TaskKind.WORKFLOW and task.query_id is None and task.run_id in runs
    ]
    claims = [
        kernel.WorkflowTaskClaim(
            runs[task.run_id],
            task.scheduled_event_id,
            task.attempt,
            task.task_queue,
            str(uuid.uuid4()),
            from_sticky,
        )
        for task, from_sticky in workflow_tasks
    ]
    started = kernel.record_workflow_tasks_started_txn(
        claims, identity=identity, worker_version=worker_version
    )
    by_task = {task.pk: response for (task, _), response in zip(workflow_tasks, started, strict=True)}
    answers: list[dict[str, Any]] = []
    for task, from_sticky in claimed:
        if task.pk in by_task:
            response = by_task[task.pk]
            answer = response.as_dict() if response is not None else None
        else:
            answer = _start(
                task,
                runs.get(task.run_id),
                identity,
                sticky_fallback=from_sticky,
                worker_version=worker_version,
            )
        if answer is not None:
            answers.append(answer)
    return answers


def _take_burst(
    namespace: Namespace, task_queue: str, kind: str, build_id: str, count: int
) -> list[tuple[Task, bool]]:
    """Up to ``count`` rows for the poller, each with whether it came from a sticky queue
    with no live poller (those are asked for only when the queue's own rows run out)."""
    claimed = [(task, False) for task in _take_next(namespace, task_queue, kind, build_id, count)]
    while kind == TaskKind.WORKFLOW and len(claimed) < count:
        fallback = _take_sticky_fallback(namespace, task_queue, build_id)
        if fallback is None:
            break
        claimed.append((fallback, True))
    return claimed


def _poll_one_by_one(
    namespace: Namespace,
    task_queue: str,
    kind: str,
    identity: str,
    worker_version: WorkerVersionStamp | None,
    max_tasks: int,
) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = []
    while len(tasks) < max_tasks:
        try:
            task = poll_once(namespace, task_queue, kind, identity, worker_version)
        except DispatchThrottled:
            if not tasks:
                raise
            break
        if task is None:
            break
        tasks.append(task)
    return tasks


def _has_dispatch_limits(namespace: Namespace, task_queue: str) -> bool:
    return namespace.dispatch_rps > 0 or _queue_dispatch_rps(namespace, task_queue) > 0


def known_unlimited(namespace: Namespace, task_queue: str) -> bool:
    """Whether this process knows, without a read, that the queue's dispatch has no rate
    limit (a poll's claim has just looked)."""
    cached = _queue_limit_cache.get((namespace.id, task_queue))
    return namespace.dispatch_rps <= 0 and cached is not None and cached[1] <= 0


def _lock(task: Task) -> WorkflowExecution | None:
    try:
        return lock_run(task.run_id, task.shard_id)
    except ChronicleError:
        return None


def _start(
    task: Task,
    execution: WorkflowExecution | None,
    identity: str,
    *,
    sticky_fallback: bool = False,
    worker_version: WorkerVersionStamp | None = None,
) -> dict[str, Any] | None:
    """Start a claimed task on its locked run; None when the row was stale (the run gone,
    closed, or past the task)."""
    if execution is None:
        return None
    request_id = str(uuid.uuid4())
    if task.query_id is not None:
        query = WorkflowQuery.objects.filter(id=task.query_id, shard_id=task.shard_id).first()
        if query is None or query.state != QueryState.PENDING:
            return None
        response = build_workflow_task_response(execution, sticky=False)
        data = response.as_dict()
        data["task_token"] = query_task_token(query, execution.namespace_id)
        data["query"] = {
            "query_id": str(query.id),
            "query_type": query.query_type,
            "query_args": query.query_args,
        }
        return data
    if task.kind == TaskKind.WORKFLOW:
        started = kernel.record_workflow_task_started_txn(
            execution,
            scheduled_event_id=task.scheduled_event_id,
            attempt=task.attempt,
            task_queue=task.task_queue,
            identity=identity,
            request_id=request_id,
            sticky_fallback=sticky_fallback,
            worker_version=worker_version,
        )
        return started.as_dict() if started else None
    return kernel.record_activity_task_started_txn(
        execution,
        scheduled_event_id=task.scheduled_event_id,
        attempt=task.attempt,
        identity=identity,
        request_id=request_id,
    )


__all__ = ["DispatchThrottled", "poll_once", "record_poller"]
