"""The plan: what resetting a run to a point keeps, drops and re-applies, without writing.

:func:`plan_reset` folds the history up to the point and gathers the signals and updates
after it;
the plan's :meth:`ResetPlan.preview` is what the UI shows before a reset, including
the side effects already done after the point that the new run may do again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Count

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.kernel.locks import lock_execution, shard_for
from history.kernel.reset.fold import ReplayedState, replay_state
from history.kernel.reset.points import ResetPoint, resolve_reset_point
from history.models import (
    ExecutionStatus,
    HistoryEvent,
    PendingActivity,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)
from history.vocabulary import EventType
from namespaces.models import Namespace

# Temporal's WorkflowExecutionUpdateAdmitted: written only when a reset reapplies an update.
UPDATE_ADMITTED = "WorkflowExecutionUpdateAdmitted"
UPDATE_REQUEST_EVENTS = (UPDATE_ADMITTED, EventType.WORKFLOW_EXECUTION_UPDATE_ACCEPTED)

SIDE_EFFECT_EVENTS = {
    EventType.ACTIVITY_TASK_COMPLETED: "activities_completed_after_point",
    EventType.CHILD_WORKFLOW_EXECUTION_STARTED: "children_started_after_point",
    EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: "signals_sent_after_point",
}


@dataclass
class ResetPlan:
    """What resetting ``base`` to ``event_id`` keeps, drops and re-applies (no writes)."""

    base: WorkflowExecution
    current: WorkflowExecution
    event_id: int
    events_kept: int
    state: ReplayedState
    signals_after: list[tuple[uuid.UUID, dict[str, Any]]]  # (recorded on run, signal attributes)
    reapply_signals: bool = True
    # (recorded on run, update request {update_id, name, args, header, identity})
    updates_after: list[tuple[uuid.UUID, dict[str, Any]]] = field(default_factory=list)
    reapply_updates: bool = True

    @property
    def signals(self) -> list[tuple[uuid.UUID, dict[str, Any]]]:
        """The signals the new run gets again: all those after the point, or none."""
        return self.signals_after if self.reapply_signals else []

    @property
    def updates(self) -> list[tuple[uuid.UUID, dict[str, Any]]]:
        """The updates the new run is asked again: all those accepted after the point, or none."""
        return self.updates_after if self.reapply_updates else []

    def preview(self) -> dict[str, Any]:
        dropped = dict(
            HistoryEvent.objects.filter(
                run=self.base, shard_id=self.base.shard_id, event_id__gte=self.event_id
            )
            .values("event_type")
            .annotate(n=Count("event_id"))
            .order_by()
            .values_list("event_type", "n")
        )
        children = sorted(self.state.children.values(), key=lambda c: c.initiated_event_id)
        return {
            "base_run_id": str(self.base.run_id),
            "current_run_id": str(self.current.run_id),
            "terminates_current_run": self.current.is_running,
            "reset_event_id": self.event_id,
            "reapply_signals": self.reapply_signals,
            "events_kept": self.events_kept,
            "events_dropped": sum(dropped.values()),
            "events_dropped_by_type": dict(sorted(dropped.items())),
            "signals_to_reapply": [_signal_summary(run, attrs) for run, attrs in self.signals],
            "signals_not_reapplied": [
                _signal_summary(run, attrs) for run, attrs in self.signals_after if not self.reapply_signals
            ],
            "reapply_updates": self.reapply_updates,
            "updates_to_reapply": [_update_summary(run, request) for run, request in self.updates],
            "updates_not_reapplied": [
                _update_summary(run, request)
                for run, request in self.updates_after
                if not self.reapply_updates
            ],
            "activities_rescheduled": [
                _activity_summary(scheduled, attrs)
                for scheduled, attrs in sorted(self.state.activities.items())
            ],
            "timers_restored": [
                {"timer_id": t.timer_id, "fire_at": t.fire_at.isoformat()} for t in self.state.timers.values()
            ],
            "children_kept": [
                {
                    "initiated_event_id": c.initiated_event_id,
                    "workflow_id": c.request.get("workflow_id", ""),
                    "run_id": c.started_run_id,
                }
                for c in children
                if c.started_run_id
            ],
            "children_to_start": [
                {"initiated_event_id": c.initiated_event_id, "workflow_id": c.request.get("workflow_id", "")}
                for c in children
                if not c.started_run_id
            ],
            "external_requests_reissued": [
                {
                    "initiated_event_id": r.initiated_event_id,
                    "kind": r.kind,
                    "workflow_id": (r.attributes.get("workflow_execution") or {}).get("workflow_id", ""),
                }
                for r in sorted(self.state.external_requests.values(), key=lambda r: r.initiated_event_id)
            ],
            "pending_dropped": _pending_of(self.current),
            **self._side_effects_after_point(),
        }

    def _side_effects_after_point(self) -> dict[str, list[dict[str, Any]]]:
        """What already happened outside the run after the point: the new run may do it again.

        Activities completed, children started and signals sent to other workflows, in the
        base run after the point and in the runs that followed it up to the current one.
        """
        found: dict[str, list[dict[str, Any]]] = {key: [] for key in SIDE_EFFECT_EVENTS.values()}
        for run in _chain_from(self.base, self.current):
            after = self.event_id if run.run_id == self.base.run_id else 0
            for (
                event_id,
                kind,
                workflow_id,
                run_id,
                signal_name,
                scheduled_id,
                activity_id,
                activity_type,
            ) in _side_effect_rows(run, after):
                summary: dict[str, Any] = {"run_id": str(run.run_id), "event_id": event_id}
                if kind == EventType.ACTIVITY_TASK_COMPLETED:
                    summary |= {
                        "scheduled_event_id": scheduled_id or 0,
                        "activity_id": activity_id or "",
                        "activity_type": activity_type or "",
                    }
                elif kind == EventType.CHILD_WORKFLOW_EXECUTION_STARTED:
                    summary |= {"workflow_id": workflow_id or "", "run_id_started": run_id or ""}
                else:
                    summary |= {"workflow_id": workflow_id or "", "signal_name": signal_name or ""}
                found[SIDE_EFFECT_EVENTS[kind]].append(summary)
        return found


def _side_effect_rows(run: WorkflowExecution, after: int) -> list[tuple[Any, ...]]:
    """The side-effect events of ``run`` from event ``after`` on, with the scheduling event of
    each completed activity joined in: a few text columns per row, no payloads."""
    table = HistoryEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT e.event_id, e.event_type, e.attributes->'workflow_execution'->>'workflow_id', "
            "e.attributes->'workflow_execution'->>'run_id', e.attributes->>'signal_name', "
            "s.event_id, s.attributes->>'activity_id', s.attributes->'activity_type'->>'name' "
            f"FROM {table} e LEFT JOIN {table} s ON e.event_type = 'ActivityTaskCompleted' "
            "AND s.run_id = e.run_id AND s.shard_id = e.shard_id "
            "AND s.event_id = (e.attributes->>'scheduled_event_id')::bigint "
            "WHERE e.run_id = %s AND e.shard_id = %s AND e.event_id >= %s AND e.event_type = ANY(%s) "
            "ORDER BY e.event_id",
            [run.run_id, run.shard_id, after, list(SIDE_EFFECT_EVENTS)],
        )
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def _signal_summary(run: uuid.UUID, attrs: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": str(run), "signal_name": attrs.get("signal_name", "")}


def _update_summary(run: uuid.UUID, request: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": str(run), "update_id": request["update_id"], "name": request["name"]}


def _activity_summary(scheduled_event_id: int, attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        "scheduled_event_id": scheduled_event_id,
        "activity_id": attrs.get("activity_id", ""),
        "activity_type": (attrs.get("activity_type") or {}).get("name", ""),
    }


def _pending_of(run: WorkflowExecution) -> dict[str, Any]:
    if not run.is_running:
        return {"activities": [], "timers": []}
    activities = PendingActivity.objects.filter(run=run, shard_id=run.shard_id).order_by("scheduled_event_id")
    timers = TimerTask.objects.filter(run=run, shard_id=run.shard_id, kind=TimerKind.USER_TIMER).order_by(
        "fire_at"
    )
    return {
        "activities": [
            {
                "scheduled_event_id": a.scheduled_event_id,
                "activity_id": a.activity_id,
                "activity_type": a.activity_type,
                "attempt": a.attempt,
            }
            for a in activities
        ],
        "timers": [{"timer_id": t.timer_id, "fire_at": t.fire_at.isoformat()} for t in timers],
    }


def _chain_from(base: WorkflowExecution, current: WorkflowExecution) -> list[WorkflowExecution]:
    """The base run and its successors (continue-as-new, retries) up to the current run."""
    chain = [base]
    run = base
    while run.new_run_id and run.run_id != current.run_id and len(chain) < 1000:
        # A chain keeps its workflow id, so its shard.
        following = WorkflowExecution.objects.filter(run_id=run.new_run_id, shard_id=run.shard_id).first()
        if following is None:
            break
        chain.append(following)
        run = following
    return chain


def _signals_after(
    base: WorkflowExecution, current: WorkflowExecution, event_id: int
) -> list[tuple[uuid.UUID, dict[str, Any]]]:
    """Signals recorded after the point in the base run and its successors, in order."""
    signals: list[tuple[uuid.UUID, dict[str, Any]]] = []
    for run in _chain_from(base, current):
        after = event_id if run.run_id == base.run_id else 0
        recorded = HistoryEvent.objects.filter(
            run=run,
            shard_id=run.shard_id,
            event_type=EventType.WORKFLOW_EXECUTION_SIGNALED,
            event_id__gte=after,
        ).order_by("event_id")
        signals += [(run.run_id, e.attributes) for e in recorded]
        if run.is_running:
            # Signals still buffered behind an in-flight workflow task count too.
            signals += [
                (run.run_id, b["attributes"])
                for b in run.buffered_events
                if b["event_type"] == EventType.WORKFLOW_EXECUTION_SIGNALED
            ]
    return signals


def update_request(kind: str, attrs: dict[str, Any]) -> dict[str, Any] | None:
    """The request an ``Admitted`` or ``Accepted`` event records, or None if it records none
    (an ``Accepted`` event after an ``Admitted`` one may leave it out, as Temporal's does)."""
    recorded = attrs.get("request" if kind == UPDATE_ADMITTED else "accepted_request")
    if not isinstance(recorded, dict):
        return None
    meta, given = recorded.get("meta") or {}, recorded.get("input") or {}
    update_id = str(meta.get("update_id") or attrs.get("protocol_instance_id") or "")
    if not update_id:
        return None
    return {
        "update_id": update_id,
        "name": str(given.get("name") or ""),
        "args": given.get("args") or [],
        "header": given.get("header") or {},
        "identity": str(meta.get("identity") or ""),
    }


def _updates_after(
    base: WorkflowExecution, current: WorkflowExecution, event_id: int
) -> list[tuple[uuid.UUID, dict[str, Any]]]:
    """Updates accepted (or admitted by an earlier reset) after the point in the base run and its
    successors, in order, each update id once. Temporal reapplies these and no others: an update
    only admitted has no event, and its caller is told the run closed."""
    found: dict[str, tuple[uuid.UUID, dict[str, Any]]] = {}
    for run in _chain_from(base, current):
        after = event_id if run.run_id == base.run_id else 0
        recorded = HistoryEvent.objects.filter(
            run=run, shard_id=run.shard_id, event_type__in=UPDATE_REQUEST_EVENTS, event_id__gte=after
        ).order_by("event_id")
        for event in recorded:
            request = update_request(event.event_type, event.attributes)
            if request is not None:
                found.setdefault(request["update_id"], (run.run_id, request))
    return list(found.values())


def plan_reset(
    base: WorkflowExecution,
    current: WorkflowExecution,
    point: ResetPoint,
    *,
    reapply_signals: bool,
    reapply_updates: bool = True,
) -> ResetPlan:
    event_id = resolve_reset_point(base, point)
    state, events_kept = replay_state(base, event_id)
    if not state.wft_scheduled_event_id:
        raise invalid(f"no workflow task is pending just before event {event_id}", event_id=event_id)
    signals = _signals_after(base, current, event_id)
    updates = _updates_after(base, current, event_id)
    return ResetPlan(
        base, current, event_id, events_kept, state, signals, reapply_signals, updates, reapply_updates
    )


def base_and_current(
    namespace: Namespace, workflow_id: str, run_id: str | None, *, lock: bool
) -> tuple[WorkflowExecution, WorkflowExecution]:
    """The current run (running, else latest) and the base (the given run, else the current)."""
    if lock:
        current = lock_execution(namespace, workflow_id, None)
        if not run_id or str(run_id) == str(current.run_id):
            return current, current
        return lock_execution(namespace, workflow_id, run_id), current
    runs = WorkflowExecution.objects.filter(
        namespace=namespace, workflow_id=workflow_id, shard_id=shard_for(namespace.id, workflow_id)
    )
    current_or_none = (
        runs.filter(status=ExecutionStatus.RUNNING).first() or runs.order_by("-start_time").first()
    )
    if current_or_none is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"workflow execution {workflow_id!r} not found")
    if not run_id:
        return current_or_none, current_or_none
    try:
        given = runs.filter(run_id=uuid.UUID(str(run_id))).first()
    except ValueError:
        raise invalid("run_id must be a UUID") from None
    if given is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"run {run_id} of {workflow_id!r} not found")
    return given, current_or_none


def preview_reset(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    point: ResetPoint,
    reapply_signals: bool = True,
    reapply_updates: bool = True,
) -> dict[str, Any]:
    """What :func:`reset_workflow_execution` would do, without writing anything."""
    base, current = base_and_current(namespace, workflow_id, run_id, lock=False)
    plan = plan_reset(base, current, point, reapply_signals=reapply_signals, reapply_updates=reapply_updates)
    return plan.preview()
