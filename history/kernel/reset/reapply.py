"""Reapply: what a reset asks of the new run again, and the update state it carries over.

Temporal's reset (temporal-semantics §11) reapplies the signals and the updates recorded
after the point; ``reset_reapply_type`` (deprecated there, still sent) and
``reset_reapply_exclude_types`` narrow that. :func:`reapply_choice` reads both, in Temporal's
enum names, into what the kernel needs: whether signals and whether updates go again.

An update goes again as Temporal sends it: a ``WorkflowExecutionUpdateAdmitted`` event with
origin ``REAPPLY`` and a new admitted request with the same update id, which the next workflow
task carries, so the worker validates and handles it again and a caller asking for that id
(without naming the old run) gets the new run's outcome. The new run also knows the updates
its copied history already holds (:func:`restore_updates_txn`), as Temporal's mutable state
rebuilt from that history does, so their ids stay deduplicated and their outcomes readable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chronicle.errors import invalid
from history.kernel._mutation import ExecutionMutation
from history.kernel.reset.plan import UPDATE_ADMITTED, ResetPlan, update_request
from history.models import HistoryEvent, UpdateState, WorkflowUpdate
from history.vocabulary import EventType

REAPPLY_TYPE_PREFIX = "RESET_REAPPLY_TYPE_"
EXCLUDE_TYPE_PREFIX = "RESET_REAPPLY_EXCLUDE_TYPE_"
# What each (deprecated) reapply type leaves out. Unspecified is Temporal's default: all eligible.
REAPPLY_TYPES: dict[str, frozenset[str]] = {
    "UNSPECIFIED": frozenset(),
    "ALL_ELIGIBLE": frozenset(),
    "SIGNAL": frozenset({"UPDATE"}),
    "NONE": frozenset({"SIGNAL", "UPDATE"}),
}
# Nexus and cancel requests are accepted for Temporal clients; Chronicle reapplies neither.
EXCLUDE_TYPES = ("SIGNAL", "UPDATE", "NEXUS", "CANCEL_REQUEST")
ORIGIN_REAPPLY = "UPDATE_ADMITTED_EVENT_ORIGIN_REAPPLY"


@dataclass(frozen=True)
class ReapplyChoice:
    signals: bool = True
    updates: bool = True


def _short(value: object, prefix: str, known: Iterable[str], field: str) -> str:
    """``RESET_REAPPLY_TYPE_SIGNAL`` or ``SIGNAL`` -> ``SIGNAL``; anything else is refused."""
    name = value.removeprefix(prefix) if isinstance(value, str) else ""
    if name not in known:
        choices = ", ".join(prefix + k for k in known)
        raise invalid(
            f"{field}: {value!r} is not one of {choices}", fields={field: [f"{value!r} is unknown"]}
        )
    return name


def reapply_choice(
    reapply_type: str = "", exclude_types: Iterable[str] = (), *, reapply_signals: bool = True
) -> ReapplyChoice:
    """What a reset reapplies, from Temporal's ``reset_reapply_type`` and
    ``reset_reapply_exclude_types`` (full enum names, or without their prefix) and Chronicle's
    older ``reapply_signals`` switch. Exclusions add up, as Temporal's server adds them up."""
    excluded = set(
        REAPPLY_TYPES[
            _short(reapply_type or "UNSPECIFIED", REAPPLY_TYPE_PREFIX, REAPPLY_TYPES, "reset_reapply_type")
        ]
    )
    if isinstance(exclude_types, str):
        raise invalid("reset_reapply_exclude_types must be a list")
    for value in exclude_types:
        excluded.add(_short(value, EXCLUDE_TYPE_PREFIX, EXCLUDE_TYPES, "reset_reapply_exclude_types"))
    return ReapplyChoice(
        signals=reapply_signals and "SIGNAL" not in excluded, updates="UPDATE" not in excluded
    )


def restore_updates_txn(m: ExecutionMutation, plan: ResetPlan) -> set[str]:
    """The updates the copied history records, as rows of the new run; return their ids.

    Accepted ones stay accepted (the worker replays the event and sends the response) and
    completed ones keep their outcome; one admitted by an earlier reset and not accepted by
    the point is asked again. Each counts toward the run's signal and update limits.
    """
    ex = m.execution
    events = HistoryEvent.objects.filter(
        run=plan.base,
        shard_id=plan.base.shard_id,
        event_id__lt=plan.event_id,
        event_type__in=(
            UPDATE_ADMITTED,
            EventType.WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
            EventType.WORKFLOW_EXECUTION_UPDATE_COMPLETED,
        ),
    ).order_by("event_id")
    rows: dict[str, WorkflowUpdate] = {}
    for event in events:
        attrs: dict[str, Any] = event.attributes
        if event.event_type == EventType.WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            done = rows.get(str((attrs.get("meta") or {}).get("update_id") or ""))
            if done is not None:
                done.state, done.outcome, done.completed_event_id = (
                    UpdateState.COMPLETED,
                    attrs.get("outcome"),
                    event.event_id,
                )
            continue
        request = update_request(event.event_type, attrs)
        update_id = (request or {}).get("update_id") or str(attrs.get("protocol_instance_id") or "")
        row = rows.get(update_id)
        if row is None and request is not None:
            row = rows[update_id] = _row(m, request)
        if row is not None and event.event_type == EventType.WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            row.state, row.accepted_event_id = UpdateState.ACCEPTED, event.event_id
    WorkflowUpdate.objects.bulk_create(rows.values())
    ex.signal_count += len(rows)
    ex.updates_in_flight += sum(1 for r in rows.values() if r.state != UpdateState.COMPLETED)
    return set(rows)


def reapply_updates_txn(m: ExecutionMutation, plan: ResetPlan, known: set[str]) -> None:
    """Each update accepted after the point, asked again: an ``Admitted`` event (origin
    ``REAPPLY``) and an admitted request the next workflow task carries. An id the new run
    already knows is not asked twice."""
    ex = m.execution
    for _, request in plan.updates:
        if request["update_id"] in known:
            continue
        known.add(request["update_id"])
        m.append(
            UPDATE_ADMITTED,
            {
                "request": {
                    "meta": {"update_id": request["update_id"], "identity": request["identity"]},
                    "input": {"name": request["name"], "args": request["args"], "header": request["header"]},
                },
                "origin": ORIGIN_REAPPLY,
            },
        )
        _row(m, request).save(force_insert=True)
        ex.signal_count += 1
        ex.updates_in_flight += 1


def _row(m: ExecutionMutation, request: dict[str, Any]) -> WorkflowUpdate:
    return WorkflowUpdate(
        run=m.execution,
        shard_id=m.execution.shard_id,
        update_id=request["update_id"],
        name=request["name"],
        args=request["args"],
        header=request["header"],
        identity=request["identity"],
    )
