"""Schedules: start workflows on a spec, through the kernel's start path.

A schedule is a row (``history.models.Schedule``) and its next firing is one
``TimerTask`` of kind SCHEDULE on the schedule's shard. Every change runs in one
transaction that locks the schedule row first (then any run it touches, the same order
everywhere), advances the schedule, and replaces its timer row:

* the shard owner fires the timer: every nominal time between the cursor and now is
  taken (or counted as missed when older than the catch-up window), each through the
  overlap policy, and the cursor moves on;
* create, update, pause, unpause, trigger, backfill and delete come from the REST API.

Overlap decisions need to know whether the runs a schedule started are still running.
The firing transaction reads their status from ``WorkflowExecution`` (the truth), and
the kernel wakes the schedule when one of its runs closes (``ExecutionMutation.close``
adds a SCHEDULE timer due now), so buffered starts follow the close promptly.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import DateTimeField
from django.db.models.expressions import RawSQL

from chronicle import clock
from chronicle.errors import ChronicleError, ErrorCode, invalid, not_found
from history.kernel._mutation import SCHEDULED_BY_ID, ExecutionMutation
from history.kernel.client_operations import request_cancel_txn, terminate_txn
from history.kernel.locks import lock_run, shard_for
from history.kernel.start import StartRequest, start_workflow_execution_txn, validate_start
from history.kernel.wakeups import TIMERS_CHANNEL, notify
from history.models import ExecutionStatus, Schedule, TimerKind, TimerTask, WorkflowExecution
from history.schedule_spec import CompiledSpec, compile_spec
from namespaces.models import Namespace

log = logging.getLogger("chronicle.schedules")

OVERLAP_POLICIES = ("SKIP", "BUFFER_ONE", "BUFFER_ALL", "CANCEL_OTHER", "TERMINATE_OTHER", "ALLOW_ALL")
DEFAULT_CATCHUP_WINDOW = timedelta(days=365)
MIN_CATCHUP_WINDOW = timedelta(seconds=10)  # Temporal's floor
SCHEDULED_START_TIME = "ChronicleScheduledStartTime"
RECENT_ACTIONS_KEPT = 10
MAX_BUFFERED = 1000
MAX_BACKFILL_TIMES = 1000
# One firing transaction deals with at most this many nominal times; the rest follow at once.
MAX_TIMES_PER_FIRING = 1000
MAX_STARTS_PER_FIRING = 100
_FAILED = {ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT}


@dataclass(frozen=True)
class ScheduleDefinition:
    """What a client sends: the wire shapes of spec, action and policy, and the state."""

    spec: dict[str, Any]
    action: dict[str, Any]
    policy: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    note: str = ""
    limited_actions: bool = False
    remaining_actions: int = 0
    memo: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Backfill:
    start_at: datetime
    end_at: datetime
    overlap: str = ""


# -- validation ---------------------------------------------------------------------


def _compiled(spec: dict[str, Any]) -> CompiledSpec:
    try:
        return compile_spec(spec)
    except ValueError as exc:
        raise invalid(f"spec: {exc}") from None


def _check_overlap(overlap: str) -> str:
    if overlap and overlap not in OVERLAP_POLICIES:
        raise invalid(f"unknown overlap policy {overlap!r}; one of {', '.join(OVERLAP_POLICIES)}")
    return overlap


def _validate(namespace: Namespace, definition: ScheduleDefinition) -> None:
    _compiled(definition.spec)
    _check_overlap(str(definition.policy.get("overlap") or ""))
    window = definition.policy.get("catchup_window")
    if window is not None and (not isinstance(window, int | float) or window < 0):
        raise invalid("policy.catchup_window must be a non-negative number of seconds")
    if definition.limited_actions and definition.remaining_actions < 0:
        raise invalid("remaining_actions must not be negative")
    validate_start(namespace, _start_request(definition.action, "validate", datetime.now(UTC), ""))


def _start_request(
    action: dict[str, Any], workflow_id: str, actual: datetime, schedule_id: str
) -> StartRequest:
    search_attributes = dict(action.get("search_attributes") or {})
    if schedule_id:
        search_attributes[SCHEDULED_BY_ID] = schedule_id
        search_attributes[SCHEDULED_START_TIME] = actual.isoformat()
    return StartRequest(
        workflow_id=workflow_id,
        workflow_type=str(action.get("workflow_type") or ""),
        task_queue=str(action.get("task_queue") or ""),
        input=list(action.get("input") or []),
        execution_timeout=float(action.get("execution_timeout") or 0),
        run_timeout=float(action.get("run_timeout") or 0),
        task_timeout=float(action.get("task_timeout") or 10),
        memo=dict(action.get("memo") or {}),
        search_attributes=search_attributes,
        retry_policy=action.get("retry_policy"),
        identity="chronicle-scheduler",
    )


# -- the REST-facing operations -----------------------------------------------------


def create_schedule(namespace: Namespace, schedule_id: str, definition: ScheduleDefinition) -> Schedule:
    if not schedule_id or len(schedule_id) > 1000:
        raise invalid("schedule_id must be 1 to 1000 characters")
    _validate(namespace, definition)
    now = clock.now()
    with transaction.atomic(durable=True):
        if Schedule.objects.filter(namespace=namespace, schedule_id=schedule_id).exists():
            raise ChronicleError(
                ErrorCode.WORKFLOW_ALREADY_STARTED, f"schedule {schedule_id!r} already exists"
            )
        schedule = Schedule(
            namespace=namespace,
            schedule_id=schedule_id,
            shard_id=shard_for(namespace.id, schedule_id),
            cursor_time=now,
            created_at=now,
        )
        _apply_definition(schedule, definition)
        schedule.save()
        _reschedule(schedule, now)
    return schedule


def _apply_definition(schedule: Schedule, definition: ScheduleDefinition) -> None:
    schedule.spec = definition.spec
    schedule.action = definition.action
    schedule.policy = definition.policy
    schedule.paused = definition.paused
    schedule.note = definition.note
    schedule.limited_actions = definition.limited_actions
    schedule.remaining_actions = definition.remaining_actions
    schedule.memo = definition.memo


def _lock(namespace: Namespace, schedule_id: str) -> Schedule:
    schedule = (
        Schedule.objects.select_for_update(of=("self",))
        .select_related("namespace")
        .filter(namespace=namespace, schedule_id=schedule_id)
        .first()
    )
    if schedule is None:
        raise not_found(f"schedule {schedule_id!r} not found")
    return schedule


def update_schedule(
    namespace: Namespace,
    schedule_id: str,
    definition: ScheduleDefinition,
    *,
    conflict_token: int | None = None,
) -> Schedule:
    """Replace the definition; the spec applies from now on (no catch-up of the old one)."""
    _validate(namespace, definition)
    with transaction.atomic(durable=True):
        schedule = _lock(namespace, schedule_id)
        if conflict_token is not None and conflict_token != schedule.conflict_token:
            raise ChronicleError(ErrorCode.CONFLICT, "the schedule changed since it was described; retry")
        now = clock.now()
        _apply_definition(schedule, definition)
        schedule.cursor_time = max(schedule.cursor_time, now)
        _touch(schedule, now)
        _reschedule(schedule, now)
    return schedule


def delete_schedule(namespace: Namespace, schedule_id: str) -> None:
    """Delete the schedule and its timer; runs it started keep running. (Its timer rows go
    by shard, then the row itself: ``Model.delete`` would look for them on every shard.)"""
    with transaction.atomic(durable=True):
        schedule = _lock(namespace, schedule_id)
        _replace_timers([schedule], [])
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {Schedule._meta.db_table} WHERE id = %s", [schedule.pk])


def pause_schedule(namespace: Namespace, schedule_id: str, *, paused: bool, note: str) -> Schedule:
    """Pause stops firing; unpause resumes from now, without catching up the paused time."""
    with transaction.atomic(durable=True):
        schedule = _lock(namespace, schedule_id)
        now = clock.now()
        if schedule.paused and not paused:
            schedule.cursor_time = max(schedule.cursor_time, now)
        schedule.paused = paused
        schedule.note = note or ("Paused via API" if paused else "Unpaused via API")
        _touch(schedule, now)
        _reschedule(schedule, now)
    return schedule


def trigger_schedule(namespace: Namespace, schedule_id: str, *, overlap: str = "") -> Schedule:
    """Take the action now, paused or not, under ``overlap`` (default: the schedule's policy)."""
    _check_overlap(overlap)
    with transaction.atomic(durable=True):
        schedule = _lock(namespace, schedule_id)
        now = clock.now()
        run = _Firing(schedule, now)
        run.refresh_running()
        run.drain_buffer()
        run.take(now, now, overlap or run.overlap)
        run.drain_buffer()
        _touch(schedule, now)
        _reschedule(schedule, now)
    return schedule


def backfill_schedule(namespace: Namespace, schedule_id: str, backfills: list[Backfill]) -> Schedule:
    """Take the action for each spec time in [start_at, end_at), ignoring the catch-up window."""
    for backfill in backfills:
        _check_overlap(backfill.overlap)
        if backfill.end_at < backfill.start_at:
            raise invalid("backfill end_at is before start_at")
    with transaction.atomic(durable=True):
        schedule = _lock(namespace, schedule_id)
        now = clock.now()
        run = _Firing(schedule, now)
        run.refresh_running()
        run.drain_buffer()
        for backfill in backfills:
            times = _times_between(run.spec, backfill.start_at, backfill.end_at)
            if len(times) > MAX_BACKFILL_TIMES:
                raise invalid(f"a backfill may cover at most {MAX_BACKFILL_TIMES} times; split the range")
            for nominal in times:
                run.take(nominal, run.spec.actual_time(nominal, run.seed), backfill.overlap or run.overlap)
        run.drain_buffer()
        _touch(schedule, now)
        _reschedule(schedule, now)
    return schedule


def _times_between(spec: CompiledSpec, start: datetime, end: datetime) -> list[datetime]:
    times: list[datetime] = []
    cursor = start - timedelta(microseconds=1)
    while len(times) <= MAX_BACKFILL_TIMES:
        nominal = spec.next_nominal(cursor)
        if nominal is None or nominal >= end:
            break
        times.append(nominal)
        cursor = nominal
    return times


def _touch(schedule: Schedule, now: datetime) -> None:
    schedule.last_updated_at = now
    schedule.conflict_token += 1
    schedule.save()


# -- firing -------------------------------------------------------------------------


def fire_schedule_timers_txn(timer_ids: list[int], shard_ids: list[int]) -> int:
    """Fire due SCHEDULE timer rows (of these shards) inside the caller's (fenced)
    transaction; return fired count.

    Schedules are locked before their timer rows, the order every schedule operation
    uses; a row another transaction holds is left for the next pass. The shard owner fires
    by the database's clock: the time the schedules' lock read decides what is due and
    starts the runs it starts; a run it closes stamps the time its own lock read.
    """
    rows = TimerTask.objects.filter(shard_id__in=shard_ids, id__in=timer_ids)
    schedule_ids = sorted({sid for sid in rows.values_list("schedule_id", flat=True) if sid})
    schedules = list(
        Schedule.objects.select_for_update(of=("self",))
        .select_related("namespace")
        .filter(id__in=schedule_ids)
        .annotate(locked_at=RawSQL("clock_timestamp()", [], output_field=DateTimeField()))
        .order_by("id")
    )
    locked = set(rows.select_for_update(skip_locked=True).values_list("schedule_id", flat=True))
    fired: list[Schedule] = [s for s in schedules if s.id in locked]
    if not fired:
        return 0
    now = clock.from_database(max(s.locked_at for s in schedules))  # once all are locked
    _replace_timers(fired, [_fire(schedule, now) for schedule in fired])
    return len(fired)


def _fire(schedule: Schedule, now: datetime) -> TimerTask | None:
    """Advance one schedule to now (the database's); return its next timer row (not yet written)."""
    run = _Firing(schedule, now, database_time=True)
    run.refresh_running()
    run.drain_buffer()  # older times first: what waited for a run that closed goes before new ones
    more = run.take_due_times()
    run.drain_buffer()
    schedule.save()
    return _next_timer(schedule, now, again_now=more)


class _Firing:
    """One transaction's work on one locked schedule. ``database_time``: the shard owner's
    firing, whose ``now`` is the database's (API calls keep this process's clock)."""

    def __init__(self, schedule: Schedule, now: datetime, *, database_time: bool = False) -> None:
        self.schedule = schedule
        self.now = now
        self.database_time = database_time
        self.spec = compile_spec(schedule.spec)
        self.seed = f"{schedule.namespace_id}/{schedule.schedule_id}"
        self.overlap = str(schedule.policy.get("overlap") or "SKIP")
        window = schedule.policy.get("catchup_window")
        self.catchup = DEFAULT_CATCHUP_WINDOW if window is None else timedelta(seconds=float(window))
        self.catchup = max(self.catchup, MIN_CATCHUP_WINDOW)
        self.starts = 0

    def refresh_running(self) -> None:
        """Drop runs that closed; pause on a failed one when the policy says so."""
        s = self.schedule
        if not s.running_actions:
            return
        ids = [a["run_id"] for a in s.running_actions]
        shards = {shard_for(s.namespace_id, a["workflow_id"]) for a in s.running_actions}
        runs = WorkflowExecution.objects.filter(shard_id__in=shards, run_id__in=ids)
        statuses = dict(runs.values_list("run_id", "status"))
        still: list[dict[str, str]] = []
        for action in s.running_actions:
            status = statuses.get(uuid.UUID(action["run_id"]))
            if status == ExecutionStatus.RUNNING:
                still.append(action)
            elif status in _FAILED and s.policy.get("pause_on_failure"):
                s.paused = True
                s.note = f"paused: workflow {action['workflow_id']} {status}"
        s.running_actions = still

    def take_due_times(self) -> bool:
        """Deal with every nominal time due by now; True if the budget ran out first."""
        s = self.schedule
        for _ in range(MAX_TIMES_PER_FIRING):
            nominal = self.spec.next_nominal(s.cursor_time)
            if nominal is None:
                return False
            actual = self.spec.actual_time(nominal, self.seed)
            if actual > self.now:
                return False
            s.cursor_time = nominal
            if s.paused:
                continue
            if self.now - actual > self.catchup:
                s.num_actions_missed_catchup_window += 1
                continue
            self.take(nominal, actual, self.overlap)
            if self.starts >= MAX_STARTS_PER_FIRING:
                return True
        return True

    def take(self, nominal: datetime, actual: datetime, overlap: str) -> None:
        """One action time through the overlap policy."""
        s = self.schedule
        if s.limited_actions and s.remaining_actions <= 0:
            return
        if not s.running_actions or overlap == "ALLOW_ALL":
            self.start(nominal, actual)
        elif overlap == "TERMINATE_OTHER":
            self.close_running(terminate=True)
            self.start(nominal, actual)
        elif overlap == "CANCEL_OTHER":
            self.close_running(terminate=False)
            s.buffered_starts = [_buffered(nominal, actual)]
        elif overlap == "BUFFER_ALL" and len(s.buffered_starts) < MAX_BUFFERED:
            s.buffered_starts = [*s.buffered_starts, _buffered(nominal, actual)]
        elif overlap == "BUFFER_ONE" and not s.buffered_starts:
            s.buffered_starts = [_buffered(nominal, actual)]
        else:
            s.num_actions_skipped_overlap += 1

    def drain_buffer(self) -> None:
        """Start buffered times while nothing runs; a paused schedule keeps its buffer."""
        s = self.schedule
        while s.buffered_starts and not s.running_actions and not s.paused:
            head, *rest = s.buffered_starts
            s.buffered_starts = rest
            if s.limited_actions and s.remaining_actions <= 0:
                continue
            self.start(datetime.fromisoformat(head["nominal"]), datetime.fromisoformat(head["actual"]))

    def close_running(self, *, terminate: bool) -> None:
        s = self.schedule
        for action in s.running_actions:
            execution = lock_run(action["run_id"], shard_for(s.namespace_id, action["workflow_id"]))
            if not execution.is_running:
                continue
            mutation = ExecutionMutation(execution, execution.namespace, database_time=self.database_time)
            if terminate:
                terminate_txn(
                    mutation, f"terminated by schedule {s.schedule_id} (overlap TERMINATE_OTHER)", None, ""
                )
            else:
                request_cancel_txn(
                    mutation, reason=f"schedule {s.schedule_id} (overlap CANCEL_OTHER)", identity=""
                )
            mutation.save()
        if terminate:
            s.running_actions = []

    def start(self, nominal: datetime, actual: datetime) -> None:
        s = self.schedule
        workflow_id = f"{s.action.get('workflow_id')}-{_id_time(nominal)}"
        try:
            result = start_workflow_execution_txn(
                s.namespace,
                _start_request(s.action, workflow_id, actual, s.schedule_id),
                now=self.now if self.database_time else None,
            )
        except ChronicleError as exc:
            log.info("schedule %s could not start %s: %s", s.schedule_id, workflow_id, exc)
            s.num_actions_skipped_overlap += 1
            return
        self.starts += 1
        s.num_actions += 1
        if s.limited_actions:
            s.remaining_actions -= 1
        started = {"workflow_id": workflow_id, "run_id": result.run_id}
        s.running_actions = [*s.running_actions, started]
        recent = {"schedule_time": nominal.isoformat(), "actual_time": self.now.isoformat(), **started}
        s.recent_actions = [*s.recent_actions, recent][-RECENT_ACTIONS_KEPT:]


def _buffered(nominal: datetime, actual: datetime) -> dict[str, str]:
    return {"nominal": nominal.isoformat(), "actual": actual.isoformat()}


def _id_time(nominal: datetime) -> str:
    """Temporal's suffix: the nominal time in UTC, RFC 3339 to the second."""
    return nominal.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_fire_time(schedule: Schedule, now: datetime) -> datetime | None:
    """When the schedule's timer should fire next, or None if it has nothing to do."""
    if schedule.buffered_starts and not schedule.running_actions and not schedule.paused:
        return now
    if schedule.paused or (schedule.limited_actions and schedule.remaining_actions <= 0):
        return None
    spec = compile_spec(schedule.spec)
    nominal = spec.next_nominal(schedule.cursor_time)
    if nominal is None:
        return None
    return spec.actual_time(nominal, f"{schedule.namespace_id}/{schedule.schedule_id}")


def _reschedule(schedule: Schedule, now: datetime) -> None:
    """Replace the schedule's timer rows with one at its next firing (none if idle)."""
    _replace_timers([schedule], [_next_timer(schedule, now, again_now=False)])


def _next_timer(schedule: Schedule, now: datetime, *, again_now: bool) -> TimerTask | None:
    fire_at = now if again_now else next_fire_time(schedule, now)
    if fire_at is None:
        return None
    return TimerTask(shard_id=schedule.shard_id, fire_at=fire_at, kind=TimerKind.SCHEDULE, schedule=schedule)


def _replace_timers(schedules: list[Schedule], timers: list[TimerTask | None]) -> None:
    """One DELETE, one INSERT and one NOTIFY for a whole firing batch of schedules."""
    TimerTask.objects.filter(shard_id__in={s.shard_id for s in schedules}, schedule__in=schedules).delete()
    rows = [t for t in timers if t is not None]
    if not rows:
        return
    TimerTask.objects.bulk_create(rows)
    earliest = min(rows, key=lambda t: t.fire_at)
    notify(TIMERS_CHANNEL, f"{earliest.shard_id}|{earliest.fire_at.timestamp()}")


def upcoming_action_times(schedule: Schedule, count: int = 10) -> list[datetime]:
    """The next actual times the spec gives after the cursor (what describe shows)."""
    if schedule.limited_actions and schedule.remaining_actions <= 0:
        return []
    spec = compile_spec(schedule.spec)
    return spec.upcoming(schedule.cursor_time, count, f"{schedule.namespace_id}/{schedule.schedule_id}")
