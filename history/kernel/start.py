"""Starting a run: start, signal-with-start and eager start (temporal-semantics §9).

``request_id`` dedup comes first, then the conflict policy (a run is open) and the reuse
policy (the last run closed). :func:`create_run` builds a new run and its first events;
the close of a run uses it too, for the chain's next run (:mod:`history.kernel.close`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction

from chronicle import clock
from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.cron import CronError, cron_backoff_seconds, validate_cron
from history.faults import crash_point
from history.kernel import store
from history.kernel._mutation import ExecutionMutation
from history.kernel.client_operations import apply_signal, terminate_txn
from history.kernel.locks import shard_for
from history.kernel.payloads import check_payload
from history.kernel.responses import build_workflow_task_response
from history.kernel.retry import effective_run_timeout, normalize_retry_policy
from history.kernel.versioning import CURRENT_BUILD_SQL, UNVERSIONED, current_build_id
from history.models import (
    ExecutionStatus,
    PendingChildExecution,
    TimerKind,
    WorkflowExecution,
)
from history.vocabulary import EventType
from namespaces.models import Namespace
from namespaces.search_attributes import (
    BadSearchAttributes,
    merge_search_attributes,
    normalize_search_attributes,
)

REUSE_POLICIES = {
    "ALLOW_DUPLICATE",
    "ALLOW_DUPLICATE_FAILED_ONLY",
    "REJECT_DUPLICATE",
    "TERMINATE_IF_RUNNING",
}
CONFLICT_POLICIES = {"FAIL", "USE_EXISTING", "TERMINATE_EXISTING"}
_FAILED_STATES = {
    ExecutionStatus.FAILED,
    ExecutionStatus.CANCELED,
    ExecutionStatus.TERMINATED,
    ExecutionStatus.TIMED_OUT,
}
MAX_WORKFLOW_TASK_TIMEOUT = 120.0


@dataclass(frozen=True)
class ParentLink:
    """The parent of a child run: where its close is reported (the parent's Initiated event)."""

    namespace: str
    workflow_id: str
    run_id: str
    initiated_event_id: int


@dataclass(frozen=True)
class StartRequest:
    workflow_id: str
    workflow_type: str
    task_queue: str
    input: list[Any] = field(default_factory=list)
    request_id: str = ""
    id_reuse_policy: str = "ALLOW_DUPLICATE"
    id_conflict_policy: str = ""
    execution_timeout: float = 0.0
    run_timeout: float = 0.0
    task_timeout: float = 10.0
    memo: dict[str, Any] = field(default_factory=dict)
    search_attributes: dict[str, Any] = field(default_factory=dict)
    retry_policy: dict[str, Any] | None = None
    start_delay: float = 0.0
    cron_schedule: str = ""
    identity: str = ""
    # Eager start: hand the first workflow task to the caller (a worker) in the reply.
    request_eager_execution: bool = False
    # Or start it for this poller, waiting in the caller's process (matching's sync match).
    first_task_to: str = ""
    parent: ParentLink | None = None


@dataclass(frozen=True)
class StartResult:
    """``started``: the run was started by this request (now or, retried with its request id,
    earlier); ``created``: by this very call, so it is running and nobody has seen it yet."""

    run_id: str
    started: bool
    eager_workflow_task: dict[str, Any] | None = None
    created: bool = True


def _already_started(current: WorkflowExecution) -> ChronicleError:
    return ChronicleError(
        ErrorCode.WORKFLOW_ALREADY_STARTED,
        f"workflow {current.workflow_id!r} is already running",
        details={"run_id": str(current.run_id), "start_request_id": current.create_request_id},
    )


def create_run(
    namespace: Namespace,
    req: StartRequest,
    *,
    signal: tuple[str, list[Any], str] | None,
    previous: WorkflowExecution | None = None,
    first_run_id: uuid.UUID | None = None,
    attempt: int = 1,
    extra_start_attrs: dict[str, Any] | None = None,
    inherited_expiration: datetime | None = None,
    inherited_build_id: str | None = None,
    now: datetime | None = None,
) -> ExecutionMutation:
    """Build the new run and its first events (not saved).

    The run is pinned to ``inherited_build_id`` when given (a retry or continue-as-new
    on the same queue stays on its build; a start passes the queue's current build, read
    with its lock), otherwise to the queue's current build. It
    starts at ``now`` when given (the shard owner's database time), else by this process's clock.
    """
    now = now or clock.now()
    run_id = uuid.uuid4()
    run_timeout = effective_run_timeout(req.execution_timeout, req.run_timeout)
    expiration = inherited_expiration or (
        now + timedelta(seconds=req.execution_timeout) if req.execution_timeout else None
    )
    if inherited_expiration is not None:
        # A later run of the chain gets only what is left of the execution timeout.
        remaining = max((inherited_expiration - now).total_seconds() - req.start_delay, 0.001)
        run_timeout = min(run_timeout, remaining) if run_timeout else remaining
    execution = WorkflowExecution(
        run_id=run_id,
        namespace=namespace,
        workflow_id=req.workflow_id,
        workflow_type=req.workflow_type,
        task_queue=req.task_queue,
        shard_id=shard_for(namespace.id, req.workflow_id),
        status=ExecutionStatus.RUNNING,
        start_time=now,
        execution_time=now + timedelta(seconds=req.start_delay),
        execution_timeout=req.execution_timeout,
        run_timeout=run_timeout,
        task_timeout=min(
            req.task_timeout or 10.0,
            MAX_WORKFLOW_TASK_TIMEOUT,
            run_timeout or MAX_WORKFLOW_TASK_TIMEOUT,
        ),
        execution_expiration_time=expiration,
        retry_policy=req.retry_policy,
        cron_schedule=req.cron_schedule,
        attempt=attempt,
        memo=req.memo,
        search_attributes=req.search_attributes,
        input=req.input,
        create_request_id=req.request_id or str(uuid.uuid4()),
        first_run_id=first_run_id or run_id,
        previous_run_id=previous.run_id if previous else None,
        assigned_build_id=(
            inherited_build_id
            if inherited_build_id is not None
            else current_build_id(namespace, req.task_queue)
        ),
    )
    parent = req.parent or _inherited_parent(previous)
    if parent is not None:
        execution.parent_workflow_id = parent.workflow_id
        execution.parent_run_id = uuid.UUID(parent.run_id)
    mutation = ExecutionMutation(execution, namespace)
    mutation.now = now
    mutation.append(
        EventType.WORKFLOW_EXECUTION_STARTED,
        {
            "workflow_type": {"name": req.workflow_type},
            "task_queue": {"name": req.task_queue},
            "input": req.input,
            "workflow_execution_timeout": req.execution_timeout,
            "workflow_run_timeout": run_timeout,
            "workflow_task_timeout": execution.task_timeout,
            "identity": req.identity,
            "attempt": attempt,
            "retry_policy": req.retry_policy,
            "cron_schedule": req.cron_schedule,
            "memo": req.memo,
            "search_attributes": req.search_attributes,
            "first_workflow_task_backoff": req.start_delay,
            "workflow_id": req.workflow_id,
            "first_execution_run_id": str(execution.first_run_id),
            "original_execution_run_id": str(run_id),
            "continued_execution_run_id": str(previous.run_id) if previous else None,
            "request_id": execution.create_request_id,
            **({"assigned_build_id": execution.assigned_build_id} if execution.assigned_build_id else {}),
            **_parent_attributes(parent),
            **(extra_start_attrs or {}),
        },
    )
    if signal is not None:
        name, signal_input, signal_request = signal
        mutation.append(
            EventType.WORKFLOW_EXECUTION_SIGNALED,
            {
                "signal_name": name,
                "input": signal_input,
                "identity": req.identity,
                "request_id": signal_request,
            },
        )
        execution.signal_count = 1
    if req.start_delay > 0:
        execution.wft_backoff_until = execution.execution_time
        mutation.add_timer(TimerKind.WORKFLOW_BACKOFF, execution.execution_time)
    else:
        mutation.schedule_workflow_task()
    arm_workflow_timeouts(mutation)
    return mutation


def arm_workflow_timeouts(mutation: ExecutionMutation) -> None:
    """The run-timeout and execution-timeout timers of a new run (or a reset one)."""
    ex = mutation.execution
    run_deadline = ex.execution_time + timedelta(seconds=ex.run_timeout) if ex.run_timeout else None
    if run_deadline is not None:
        # The run's clock starts when its first workflow task may be scheduled.
        mutation.add_timer(TimerKind.WORKFLOW_RUN_TIMEOUT, run_deadline)
    expiration = ex.execution_expiration_time
    if expiration and (run_deadline is None or expiration > run_deadline):
        mutation.add_timer(TimerKind.WORKFLOW_EXECUTION_TIMEOUT, expiration)


def _inherited_parent(previous: WorkflowExecution | None) -> ParentLink | None:
    """Later runs of a child's chain (retry, continue-as-new) keep its parent link."""
    if previous is None or previous.parent_run_id is None:
        return None
    initiated = (
        PendingChildExecution.objects.filter(
            run_id=previous.parent_run_id,
            shard_id=shard_for(previous.namespace_id, previous.parent_workflow_id or ""),
            started_run_id=previous.first_run_id,
        )
        .values_list("initiated_event_id", flat=True)
        .first()
    )
    return ParentLink(
        namespace=previous.namespace.name,
        workflow_id=previous.parent_workflow_id or "",
        run_id=str(previous.parent_run_id),
        initiated_event_id=initiated or 0,
    )


def _parent_attributes(parent: ParentLink | None) -> dict[str, Any]:
    if parent is None:
        return {}
    return {
        "parent_workflow_namespace": parent.namespace,
        "parent_workflow_execution": {"workflow_id": parent.workflow_id, "run_id": parent.run_id},
        "parent_initiated_event_id": parent.initiated_event_id,
    }


def validate_start(namespace: Namespace, req: StartRequest) -> None:
    for name in ("workflow_id", "workflow_type", "task_queue"):
        value = getattr(req, name)
        if not value or len(value) > 1000:
            raise invalid(f"{name} must be 1 to 1000 characters")
    if req.id_reuse_policy not in REUSE_POLICIES:
        raise invalid(f"unknown id_reuse_policy {req.id_reuse_policy!r}")
    if req.id_conflict_policy and req.id_conflict_policy not in CONFLICT_POLICIES:
        raise invalid(f"unknown id_conflict_policy {req.id_conflict_policy!r}")
    if req.id_reuse_policy == "TERMINATE_IF_RUNNING" and req.id_conflict_policy:
        raise invalid("TERMINATE_IF_RUNNING cannot be combined with a conflict policy")
    for name in ("execution_timeout", "run_timeout", "task_timeout", "start_delay"):
        if getattr(req, name) < 0:
            raise invalid(f"{name} must not be negative")
    if req.retry_policy is not None:
        try:
            normalize_retry_policy(req.retry_policy)
        except ValueError as exc:
            raise invalid(f"retry_policy: {exc}") from None
    if req.cron_schedule:
        if req.start_delay:
            raise invalid("start_delay cannot be combined with cron_schedule")
        try:
            validate_cron(req.cron_schedule)
        except CronError as exc:
            raise invalid(f"cron_schedule: {exc}") from None
    check_payload(namespace, req.input, "input")
    check_payload(namespace, req.memo, "memo")
    check_payload(namespace, req.search_attributes, "search_attributes")


def typed_start_search_attributes(namespace: Namespace, attributes: dict[str, Any]) -> dict[str, Any]:
    """A start's search attributes checked against the namespace's types, in stored form."""
    try:
        return merge_search_attributes({}, normalize_search_attributes(namespace, attributes))
    except BadSearchAttributes as exc:
        raise invalid(str(exc), cause="BadSearchAttributes") from None


def start_workflow_execution(
    namespace: Namespace,
    req: StartRequest,
    *,
    signal: tuple[str, list[Any], str] | None = None,
    database_time: bool = False,
) -> StartResult:
    """Start a run, honouring request-id dedup first, then the conflict and reuse policies.

    ``database_time`` (the shard owner starting a child) stamps the run by the database's
    clock, read in the start's transaction once the id's latest run is locked.
    """
    validate_start(namespace, req)
    if req.cron_schedule:
        # The first run starts now; its first workflow task waits for the next cron time.
        now = clock.now()
        req = replace(req, start_delay=cron_backoff_seconds(req.cron_schedule, now, now))
    req = replace(req, search_attributes=typed_start_search_attributes(namespace, req.search_attributes))
    conflict = req.id_conflict_policy or ("USE_EXISTING" if signal else "FAIL")
    if signal and conflict == "FAIL":
        raise invalid("id_conflict_policy FAIL is not valid for signal-with-start")
    reuse = req.id_reuse_policy
    if reuse == "TERMINATE_IF_RUNNING":
        reuse, conflict = "ALLOW_DUPLICATE", "TERMINATE_EXISTING"
    for _ in range(3):
        try:
            with transaction.atomic(durable=True):
                at = _database_now if database_time else None
                result = _start_txn(namespace, req, reuse, conflict, signal, at=at)
                crash_point("before_commit")
            crash_point("after_commit_before_reply")
            return result
        except IntegrityError:
            continue  # a concurrent start won the partial unique index; decide again
    raise ChronicleError(ErrorCode.CONFLICT, "concurrent starts of this workflow id; retry")


def start_workflow_execution_txn(
    namespace: Namespace, req: StartRequest, *, now: datetime | None = None
) -> StartResult:
    """Start a run inside the caller's transaction (a schedule's firing holds its own).

    A savepoint keeps a refused start (the id is running, the reuse policy says no)
    from spoiling the caller's other writes. ``now``: the time the run starts at (the
    shard owner's firing passes the database time it read), else this process's clock.
    """
    validate_start(namespace, req)
    with transaction.atomic():
        reuse, conflict = req.id_reuse_policy, req.id_conflict_policy or "FAIL"
        return _start_txn(namespace, req, reuse, conflict, None, at=now)


def _lock_latest_run(
    namespace: Namespace, workflow_id: str, task_queue: str
) -> tuple[WorkflowExecution | None, str]:
    """The id's latest run, locked ``FOR UPDATE``, and the build a new run on ``task_queue``
    is pinned to (``versioning.current_build_id``): one fixed statement, as every start
    asks both (they were two statements and two round trips)."""
    params = [namespace.pk, task_queue, namespace.pk, workflow_id, shard_for(namespace.pk, workflow_id)]
    with store.bound_cursor() as cursor:
        cursor.execute(_LATEST_RUN_SQL, params)
        row = cursor.fetchone()
    assert row is not None  # the statement always answers one row
    build_id = row[-1] if row[-1] is not None else UNVERSIONED
    if row[0] is None:  # no run of this id: the run's columns are NULL
        return None, build_id
    run, _ = store.load(WorkflowExecution, row)
    run.namespace = namespace
    store.remember_saved_columns(run)
    return run, build_id


_LATEST_RUN_SQL = (
    f"SELECT {store.select_list(WorkflowExecution, 'e')}, b.build_id "
    f"FROM (SELECT ({CURRENT_BUILD_SQL}) AS build_id) b LEFT JOIN LATERAL ("
    f"SELECT * FROM {WorkflowExecution._meta.db_table} r "
    "WHERE r.namespace_id = %s AND r.workflow_id = %s AND r.shard_id = %s "
    "ORDER BY r.start_time DESC LIMIT 1 FOR UPDATE) e ON true"
)


def _start_txn(
    namespace: Namespace,
    req: StartRequest,
    reuse: str,
    conflict: str,
    signal: tuple[str, list[Any], str] | None,
    *,
    at: datetime | Callable[[], datetime] | None = None,
) -> StartResult:
    """``at``: the time the start stamps (None: this process's clock), or how to read it once
    the id's latest run is locked (:func:`_database_now`: after any event of that run)."""
    current, queue_build_id = _lock_latest_run(namespace, req.workflow_id, req.task_queue)
    if current is not None and req.request_id and current.create_request_id == req.request_id:
        return StartResult(str(current.run_id), started=True, created=False)
    now = at() if callable(at) else at
    if current is not None and current.is_running:
        if conflict == "USE_EXISTING":
            if signal:
                mutation = ExecutionMutation(current, namespace)
                mutation.now = now or mutation.now
                apply_signal(mutation, *signal, identity=req.identity)
                mutation.save()
            return StartResult(str(current.run_id), started=False, created=False)
        if conflict == "FAIL":
            raise _already_started(current)
        min_interval = namespace.workflow_id_reuse_minimal_interval
        if (now or clock.now()) - current.start_time < timedelta(seconds=min_interval):
            raise ChronicleError(
                ErrorCode.BUSY_WORKFLOW,
                f"the running run started less than {min_interval:g} s ago",
                retry_after=max(1, int(min_interval)),
            )
        new = create_run(namespace, req, signal=signal, now=now, inherited_build_id=queue_build_id)
        old = ExecutionMutation(current, namespace)
        old.now = now or old.now
        terminate_txn(
            old,
            "TerminateIfRunning WorkflowIdReusePolicy",
            f"terminated by new runID: {new.execution.run_id}",
            "history-service",
        )
        old.save()
        new.save()
        return StartResult(str(new.execution.run_id), started=True)
    if current is not None and _reuse_refuses(reuse, current):
        raise ChronicleError(
            ErrorCode.WORKFLOW_ALREADY_STARTED,
            f"workflow id {req.workflow_id!r} was used before and the reuse policy {reuse} refuses it",
            details={"run_id": str(current.run_id), "start_request_id": current.create_request_id},
        )
    mutation = create_run(namespace, req, signal=signal, now=now, inherited_build_id=queue_build_id)
    eager = None
    # A pinned run's first task belongs to its build's pollers; the caller's build is unknown.
    inline = req.request_eager_execution or bool(req.first_task_to)
    if inline and mutation.execution.wft_scheduled_event_id and not mutation.execution.assigned_build_id:
        # Recorded exactly as a poll would, without dispatching the task through matching.
        if req.request_eager_execution:
            mutation.start_workflow_task_inline(identity=req.identity, request_id="eager")
        else:
            mutation.start_workflow_task_inline(identity=req.first_task_to, request_id="matched")
    mutation.save()
    if inline and mutation.execution.wft_started_event_id:
        eager = build_workflow_task_response(mutation.execution, sticky=False).as_dict()
    return StartResult(str(mutation.execution.run_id), started=True, eager_workflow_task=eager)


def _database_now() -> datetime:
    """The workflow time by the database's clock, read now (one statement)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        row = cursor.fetchone()
    at: datetime = row[0]
    return clock.from_database(at)


def _reuse_refuses(reuse: str, closed: WorkflowExecution) -> bool:
    """The reuse policy decides about a *closed* current run (temporal-semantics §9)."""
    if reuse == "REJECT_DUPLICATE":
        return True
    return reuse == "ALLOW_DUPLICATE_FAILED_ONLY" and closed.status not in _FAILED_STATES
