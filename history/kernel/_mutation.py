"""The unit of work: the one place that touches history's tables (DESIGN §4 steps 1–4).

An :class:`ExecutionMutation` wraps a run locked ``FOR UPDATE`` (:mod:`history.kernel.locks`).
Operations call its methods to append events, buffer outside events while a workflow
task is in flight, schedule workflow tasks and add task and timer rows; :meth:`save`
writes it all as one statement (:mod:`history.kernel.store`) and queues the
``pg_notify`` calls (:mod:`history.kernel.wakeups`) that PostgreSQL delivers at commit.

Private to the kernel: code outside it calls the kernel's operations, never the unit of
work (an import-linter contract says so).
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from chronicle import clock
from history.kernel import closing, payloads, store
from history.kernel.growth import continue_as_new_suggestion, history_limit_reached
from history.kernel.locks import database_stamp, may_have_children
from history.kernel.payloads import payload_size
from history.kernel.retry import workflow_task_retry_delay
from history.kernel.versioning import WorkerVersionStamp, current_build_id
from history.kernel.wakeups import (
    HISTORY_CHANNEL,
    TASKS_CHANNEL,
    TIMERS_CHANNEL,
    close_wakeup_payload,
    task_wakeup_key,
    task_wakeup_payload,
)
from history.kernel.wire import event_dict
from history.models import (
    ExecutionStatus,
    HistoryEvent,
    PendingActivity,
    PendingChildExecution,
    Task,
    TaskKind,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)
from history.vocabulary import EventType
from namespaces.models import Namespace

# The search attribute naming the schedule that started a run (Temporal's TemporalScheduledById).
SCHEDULED_BY_ID = "ChronicleScheduledById"
PREVIOUS_EVENT = "$previous"  # placeholder for a back-reference resolved at flush


class ExecutionMutation:
    """Changes to one locked run, written together by :meth:`save`."""

    def __init__(
        self, execution: WorkflowExecution, namespace: Namespace, *, database_time: bool = False
    ) -> None:
        self.execution = execution
        self.namespace = namespace
        self.now = database_stamp(execution) if database_time else clock.now()
        self._events: list[HistoryEvent] = []
        self._tasks: list[Task] = []
        self._timers: list[TimerTask] = []
        # Pending-activity rows this change adds, and the ids of those it deletes.
        self._activities: list[PendingActivity] = []
        self._gone_activities: list[int] = []
        self._notifications: set[tuple[str, str]] = set()
        # Tasks added per wake-up key: sent as one counted notification per key (see save).
        self._task_wakeups: Counter[str] = Counter()
        self._offloaded = payloads.Offloaded()
        self.closed_now = False
        # The close event this change appended (the run's last), once it closes.
        self.close_event: HistoryEvent | None = None
        # Set when retention deleted the run: there is nothing left to save.
        self.deleted = False
        # Set when a command's effect needs the workflow to run again (e.g. an activity canceled at once).
        self.force_new_task = False
        # Runs this change creates (continue-as-new), saved after this one closes.
        self.followers: list[ExecutionMutation] = []

    # -- events -------------------------------------------------------------------
    def append(self, event_type: str, attributes: dict[str, Any]) -> int:
        """Append an event with the next id; return the id.

        Payloads past the namespace's inline limit move to the payload store here, the
        one place every event passes, and the history's size counts what stays inline.
        """
        ex = self.execution
        event_id = ex.next_event_id
        ex.next_event_id += 1
        attributes = payloads.offload(attributes, self.namespace.payload_inline_limit_bytes, self._offloaded)
        ex.history_size_bytes += payload_size(attributes) + len(event_type)
        self._events.append(
            HistoryEvent(
                run=ex,
                shard_id=ex.shard_id,
                event_id=event_id,
                event_type=event_type,
                event_time=self.now,
                attributes=attributes,
            )
        )
        self._notifications.add((HISTORY_CHANNEL, str(ex.run_id)))
        return event_id

    @property
    def appended_events(self) -> list[HistoryEvent]:
        """The events appended since the last save, in order (their ids are set)."""
        return list(self._events)

    @property
    def workflow_task_in_flight(self) -> bool:
        return self.execution.wft_started_event_id != 0

    def add_outside_event(
        self, event_type: str, attributes: dict[str, Any], *, schedule_task: bool = True
    ) -> int:
        """An event with an outside cause: buffered while a workflow task runs.

        Return its event id, or 0 when buffered (the id is given at the flush).
        """
        if self.workflow_task_in_flight:
            self.execution.buffered_events = [
                *self.execution.buffered_events,
                {"event_type": event_type, "attributes": attributes},
            ]
            return 0
        self._demote_transient_task()
        event_id = self.append(event_type, _resolve_previous(attributes, self.execution.next_event_id - 1))
        if schedule_task:
            self.schedule_workflow_task()
        return event_id

    def flush_buffer(self) -> bool:
        """Append the buffered events; return whether there were any."""
        buffered = self.execution.buffered_events
        if not buffered:
            return False
        self.execution.buffered_events = []
        for item in buffered:
            attrs = _resolve_previous(item["attributes"], self.execution.next_event_id - 1)
            event_id = self.append(item["event_type"], attrs)
            if item["event_type"] == EventType.CHILD_WORKFLOW_EXECUTION_STARTED:
                # The child's close event refers back to this id, known only now.
                PendingChildExecution.objects.filter(
                    run=self.execution,
                    shard_id=self.execution.shard_id,
                    initiated_event_id=attrs["initiated_event_id"],
                ).update(started_event_id=event_id)
        return True

    def drop_buffered(self, predicate: Any) -> bool:
        """Remove buffered events matching ``predicate``; return whether any matched."""
        kept = [e for e in self.execution.buffered_events if not predicate(e)]
        dropped = len(kept) != len(self.execution.buffered_events)
        self.execution.buffered_events = kept
        return dropped

    # -- workflow tasks -----------------------------------------------------------
    def schedule_workflow_task(self, *, attempt: int = 1) -> None:
        """Schedule a workflow task unless one is pending (or a start backoff runs)."""
        ex = self.execution
        if ex.has_pending_workflow_task or not ex.is_running:
            return
        ex.wft_attempt = attempt
        ex.wft_scheduled_time = self.now
        ex.wft_started_event_id = 0
        queue = ex.sticky_task_queue or ex.task_queue
        ex.wft_task_queue = queue
        if attempt == 1:
            ex.wft_scheduled_event_id = self.append(
                EventType.WORKFLOW_TASK_SCHEDULED,
                {
                    "task_queue": {
                        "name": queue,
                        "kind": "STICKY" if ex.sticky_task_queue else "NORMAL",
                    },
                    "start_to_close_timeout": ex.task_timeout,
                    "attempt": 1,
                },
            )
        else:
            # Transient: the Scheduled and Started events exist only in memory.
            ex.wft_scheduled_event_id = ex.next_event_id
        delay = workflow_task_retry_delay(attempt)
        self.add_task(
            TaskKind.WORKFLOW,
            queue,
            ex.wft_scheduled_event_id,
            attempt,
            visible_at=self.now + timedelta(seconds=delay) if delay else None,
        )
        if ex.sticky_task_queue:
            # No normal-queue poll is woken for a sticky task: one whose sticky poller is gone
            # is found by the normal queue's next poll or safety re-check (matching/dispatch).
            self.add_timer(
                TimerKind.STICKY_TIMEOUT,
                self.now + timedelta(seconds=ex.sticky_schedule_to_start_timeout),
                scheduled_event_id=ex.wft_scheduled_event_id,
                attempt=attempt,
            )

    def _demote_transient_task(self) -> None:
        """New events turn a scheduled transient task into a normal one (attempt 1)."""
        ex = self.execution
        if ex.wft_scheduled_event_id and not ex.wft_started_event_id and ex.wft_attempt > 1:
            self.clear_workflow_task()

    def clear_workflow_task(self) -> None:
        ex = self.execution
        ex.wft_scheduled_event_id = 0
        ex.wft_started_event_id = 0
        ex.wft_scheduled_time = None
        ex.wft_started_time = None
        ex.wft_identity = ""
        ex.wft_request_id = ""

    def start_workflow_task(
        self, *, identity: str, request_id: str, worker_version: WorkerVersionStamp | None = None
    ) -> None:
        """Record the pending workflow task as started by ``identity`` (of build ``worker_version``)."""
        ex = self.execution
        ex.wft_identity = identity
        ex.wft_request_id = request_id
        ex.wft_started_time = self.now
        if ex.wft_attempt == 1:
            attributes: dict[str, Any] = {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "identity": identity,
                "request_id": request_id,
                **continue_as_new_suggestion(ex, self.namespace),
            }
            if worker_version is not None:
                attributes["worker_version"] = worker_version.as_dict()
            ex.wft_started_event_id = self.append(EventType.WORKFLOW_TASK_STARTED, attributes)
        else:
            ex.wft_started_event_id = ex.wft_scheduled_event_id + 1
        self.add_timer(
            TimerKind.WORKFLOW_TASK_TIMEOUT,
            self.now + timedelta(seconds=ex.task_timeout),
            scheduled_event_id=ex.wft_scheduled_event_id,
            attempt=ex.wft_attempt,
        )

    def start_workflow_task_inline(
        self, *, identity: str, request_id: str, worker_version: WorkerVersionStamp | None = None
    ) -> None:
        """Start the task just scheduled in this mutation for the caller itself (an eager
        start, or a task handed back with an activity's result).

        Its task row, poller wake-up and sticky timeout are withdrawn: no poller wakes for
        a task it would only find already started.
        """
        ex = self.execution
        scheduled = ex.wft_scheduled_event_id
        self._tasks = [
            t for t in self._tasks if not (t.kind == TaskKind.WORKFLOW and t.scheduled_event_id == scheduled)
        ]
        self._timers = [
            t
            for t in self._timers
            if not (t.kind == TimerKind.STICKY_TIMEOUT and t.scheduled_event_id == scheduled)
        ]
        queue = ex.wft_task_queue
        key = task_wakeup_key(self.namespace.id, TaskKind.WORKFLOW, queue, self._build_for(queue))
        self._task_wakeups[key] -= 1
        self.start_workflow_task(identity=identity, request_id=request_id, worker_version=worker_version)

    @property
    def pending_tasks(self) -> list[Task]:
        return list(self._tasks)

    def add_task(
        self,
        kind: str,
        task_queue: str,
        scheduled_event_id: int,
        attempt: int,
        *,
        visible_at: datetime | None = None,
        query_id: uuid.UUID | None = None,
    ) -> None:
        build_id = self._build_for(task_queue)
        self._tasks.append(
            Task(
                namespace_id=self.namespace.id,
                task_queue=task_queue,
                kind=kind,
                build_id=build_id,
                run=self.execution,
                shard_id=self.execution.shard_id,
                scheduled_event_id=scheduled_event_id,
                attempt=attempt,
                query_id=query_id,
                visible_at=visible_at or self.now,
                created_at=self.now,
            )
        )
        self._task_wakeups[task_wakeup_key(self.namespace.id, kind, task_queue, build_id)] += 1

    def _build_for(self, task_queue: str) -> str:
        """The build whose pollers may take a task of this run on ``task_queue``.

        The run's own queues (normal and sticky) serve its pinned build; an activity sent
        to another queue goes to that queue's current build, as in Temporal.
        """
        ex = self.execution
        if task_queue in (ex.task_queue, ex.sticky_task_queue):
            return ex.assigned_build_id
        return current_build_id(self.namespace, task_queue)

    def add_timer(self, kind: str, fire_at: datetime, **fields: Any) -> None:
        self._timers.append(
            TimerTask(
                shard_id=self.execution.shard_id,
                fire_at=fire_at,
                kind=kind,
                run=self.execution,
                **fields,
            )
        )
        self._notifications.add((TIMERS_CHANNEL, f"{self.execution.shard_id}|{fire_at.timestamp()}"))

    def add_activity(self, activity: PendingActivity) -> None:
        """A new pending-activity row, inserted with the run's write."""
        self._activities.append(activity)

    def drop_activity(self, activity: PendingActivity) -> None:
        """Delete a pending-activity row with the run's write (one this change added is just
        not inserted)."""
        if any(activity is new for new in self._activities):
            self._activities = [new for new in self._activities if new is not activity]
        else:
            self._gone_activities.append(activity.pk)

    def new_activity(self, scheduled_event_id: int) -> PendingActivity | None:
        """The pending activity this change added for ``scheduled_event_id``, if any."""
        return next((a for a in self._activities if a.scheduled_event_id == scheduled_event_id), None)

    @property
    def new_activities(self) -> list[PendingActivity]:
        return list(self._activities)

    def notify_history(self) -> None:
        self._notifications.add((HISTORY_CHANNEL, str(self.execution.run_id)))

    # -- closing ------------------------------------------------------------------
    def close(self, status: str, event_type: str, attributes: dict[str, Any]) -> int:
        """Append the close event and drop the run's pending work."""
        ex = self.execution
        event_id = self.append(event_type, attributes)
        self.close_event = self._events[-1]
        ex.status = status
        ex.close_time = self.now
        ex.buffered_events = []
        self.clear_workflow_task()
        self.closed_now = True
        self._wake_schedule()
        return event_id

    def _wake_schedule(self) -> None:
        """A run a schedule started closed: fire the schedule now (see ``closing``)."""
        timer = closing.schedule_wakeup(self.execution, SCHEDULED_BY_ID, self.now)
        if timer is not None:
            self._timers.append(timer)
            self._notifications.add((TIMERS_CHANNEL, f"{timer.shard_id}|{self.now.timestamp()}"))

    def enforce_history_limits(self) -> None:
        """Past the namespace's history limits the run is terminated (Temporal's rule)."""
        reason = history_limit_reached(self.execution, self.namespace)
        if reason is not None:
            self.close(
                ExecutionStatus.TERMINATED,
                EventType.WORKFLOW_EXECUTION_TERMINATED,
                {"reason": reason, "identity": "history-service", "details": None},
            )

    def save(self) -> None:
        """Write events, state, rows and notifications inside the caller's transaction:
        one statement (see :mod:`history.kernel.store`)."""
        assert connection.in_atomic_block, "kernel writes need an open transaction"
        write = store.Write()
        if not self._prepare_save():
            return
        _drop_closed_runs_work(write, [self])
        if self.execution._state.adding:
            store.insert_rows(write, [self.execution])
        else:
            store.update_changed_columns(write, self.execution)
        store.remember_saved_columns(self.execution)
        _write_pending_rows([self], write)

    def _prepare_save(self) -> bool:
        """Apply the checks due before writing, and what a close implies (but the deletion
        of the closed run's pending work: :func:`_drop_closed_runs_work`); False when the
        run was deleted instead."""
        if self.deleted:
            return False
        self.enforce_history_limits()
        if self.closed_now:
            ex = self.execution
            self._notifications.add((HISTORY_CHANNEL, self._close_notification()))
            self._activities = []  # a closed run keeps no pending activity
            self.add_timer(TimerKind.RETENTION, self.now + timedelta(days=self.namespace.retention_days))
            for kind, scheduled_event_id in closing.child_duties(ex, has_children=may_have_children(ex)):
                self.add_timer(kind, self.now, scheduled_event_id=scheduled_event_id)
        return True

    def _close_notification(self) -> str:
        """The close's wake-up, carrying the close as a waiting ``result()`` answers it
        (built at save, once a continue-as-new has named the run after this one)."""
        ex, event = self.execution, self.close_event
        assert event is not None
        new_run_id = str(ex.new_run_id) if ex.new_run_id else None
        data = event_dict(event.event_id, event.event_type, event.event_time, event.attributes)
        return close_wakeup_payload(ex.run_id, {"status": ex.status, "new_run_id": new_run_id, "event": data})


def save_all(mutations: list[ExecutionMutation]) -> None:
    """Save many runs' mutations in one statement instead of several per run.

    The timer queue fires hundreds of runs in one transaction; per-run round trips
    made it slow. Same writes as :meth:`ExecutionMutation.save`.
    """
    assert connection.in_atomic_block, "kernel writes need an open transaction"
    write = store.Write()
    live = [m for m in mutations if m._prepare_save()]
    if not live:
        return
    _drop_closed_runs_work(write, live)
    store.update_whole_rows(write, [m.execution for m in live])
    for m in live:
        store.remember_saved_columns(m.execution)
    _write_pending_rows(live, write)


def _drop_closed_runs_work(write: store.Write, mutations: list[ExecutionMutation]) -> None:
    """Add the deletion of the pending work of the runs these mutations close, once for all
    of them: one set of statements, whatever their number, is one text to prepare."""
    closed = [m.execution for m in mutations if m.closed_now]
    if closed:
        closing.drop_pending_work(write, [ex.run_id for ex in closed], [ex.shard_id for ex in closed])


def _write_pending_rows(mutations: list[ExecutionMutation], write: store.Write) -> None:
    """Add the mutations' events, tasks, timers and notifications to ``write`` (which holds
    their runs' rows), send it, then save the followers."""
    offloaded = [(m.namespace, m.execution, m._offloaded) for m in mutations if m._offloaded.digests]
    if offloaded:
        payloads.store(offloaded, timezone.now())
    for rows in (
        [e for m in mutations for e in m._events],
        [t for m in mutations for t in m._tasks],
        [t for m in mutations for t in m._timers],
        [a for m in mutations for a in m._activities],
    ):
        store.insert_rows(write, rows)
    gone = [m for m in mutations if m._gone_activities]
    store.delete_rows(
        write,
        PendingActivity,
        [pk for m in gone for pk in m._gone_activities],
        [m.execution.shard_id for m in gone],
    )
    wakeups: Counter[str] = sum((m._task_wakeups for m in mutations), Counter())
    notifications = {n for m in mutations for n in m._notifications}
    notifications |= {(TASKS_CHANNEL, task_wakeup_payload(key, n)) for key, n in wakeups.items() if n > 0}
    store.notify(write, sorted(notifications))
    store.send(write)
    followers = [f for m in mutations for f in m.followers]
    for m in mutations:
        m._events, m._tasks, m._timers, m.followers = [], [], [], []
        m._activities, m._gone_activities = [], []
        m._offloaded = payloads.Offloaded()
        m._notifications.clear()
        m._task_wakeups.clear()
    for follower in followers:
        follower.save()


def _resolve_previous(attributes: dict[str, Any], previous_event_id: int) -> dict[str, Any]:
    """Replace the ``$previous`` placeholder with the id of the event just before."""
    if PREVIOUS_EVENT not in attributes.values():
        return attributes
    return {k: (previous_event_id if v == PREVIOUS_EVENT else v) for k, v in attributes.items()}
