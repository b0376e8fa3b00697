"""Workflow Update: admitted by a client, validated and run by the worker, recorded as events.

Temporal's protocol (temporal-semantics §6, "Update"): an update request is admitted
(a ``WorkflowUpdate`` row, no event) and rides to the worker on the run's next workflow
task, as buffered queries do (the task's ``messages``). The worker runs the validator
before anything is written and answers in the task's completion with a message per
update: a ``Rejection`` writes no event, an ``Acceptance`` writes
``WorkflowExecutionUpdateAccepted`` and a ``Response`` writes
``WorkflowExecutionUpdateCompleted``, both right after ``WorkflowTaskCompleted`` and before
the commands' events (so neither follows the run's close);
accepted and completed may come in one completion or in different ones. An update id is
applied once per run: a repeat gets the first update's stage and outcome. An accepted
update outlives its worker: the next worker replays the accepted event, re-runs the
handler and sends the response.

A run with no workflow task in flight gets one for the update. A rejected update writes no
event of its own, but the workflow task that carried it stays in the history (Scheduled,
Started, Completed): history is append-only, and a reader following it by event id (a
history long-poll, the UI's live mode, a sticky worker's cache) must never see an id come
back with another event. Temporal's speculative task leaves no trace; this departure is
written down in docs/updates.md.

Updates count toward the run's signal limit (``max_signals_per_execution``) and at most
:data:`MAX_IN_FLIGHT_UPDATES` may be admitted or accepted at once (Temporal's default).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.kernel import store
from history.kernel._mutation import ExecutionMutation
from history.kernel.command_checks import CommandRejected
from history.kernel.locks import lock_execution, shard_for
from history.kernel.payloads import check_payload
from history.kernel.wakeups import HISTORY_CHANNEL, notify
from history.models import (
    HistoryEvent,
    UpdateState,
    WorkflowExecution,
    WorkflowUpdate,
)
from history.vocabulary import EventType
from namespaces.models import Namespace

MAX_IN_FLIGHT_UPDATES = 10  # Temporal's history.maxInFlightUpdates
STAGES = ("ADMITTED", "ACCEPTED", "COMPLETED")
ACCEPTANCE, REJECTION, RESPONSE = "Acceptance", "Rejection", "Response"
_BAD_MESSAGE = "BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE"
CLOSED_FIRST = "Workflow Update failed because the Workflow completed before the Update completed."


@dataclass(frozen=True)
class UpdateRequest:
    """What a caller sends: Temporal's ``request{meta{update_id, identity}, input{header, name, args}}``."""

    update_id: str
    name: str
    args: list[Any] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    identity: str = ""

    def check(self, namespace: Namespace) -> None:
        if not self.name or len(self.name) > 1000:
            raise invalid(
                "name must be 1 to 1000 characters", fields={"name": ["Ensure this field is valid."]}
            )
        if len(self.update_id) > 1000:
            raise invalid("update_id must be at most 1000 characters")
        check_payload(namespace, self.args, "update args")


@dataclass(frozen=True)
class UpdateStatus:
    """Where an update stands, as a caller's wait and poll answer it."""

    update_id: str
    workflow_id: str
    run_id: str
    stage: str
    outcome: dict[str, Any] | None
    row_id: uuid.UUID

    def as_dict(self) -> dict[str, Any]:
        return {
            "update_id": self.update_id,
            "workflow_id": self.workflow_id,
            "run_id": self.run_id,
            "stage": self.stage,
            "outcome": self.outcome,
        }

    def reached(self, stage: str) -> bool:
        return STAGES.index(self.stage) >= STAGES.index(stage)


def wakeup_key(row_id: uuid.UUID) -> str:
    """The notification a waiting caller listens for: its update moved on."""
    return f"update:{row_id}"


def status_of(update: WorkflowUpdate, ex: WorkflowExecution) -> UpdateStatus:
    """The update's stage; a rejected one is completed with its failure, and one the run
    closed before completing is completed with Temporal's failure for it."""
    state, outcome = update.state, update.outcome
    if state == UpdateState.REJECTED:
        state = UpdateState.COMPLETED
    elif state != UpdateState.COMPLETED and not ex.is_running:
        state, outcome = UpdateState.COMPLETED, {"failure": {"message": CLOSED_FIRST, "source": "Server"}}
    return UpdateStatus(update.update_id, ex.workflow_id, str(ex.run_id), str(state), outcome, update.id)


# -- admission ------------------------------------------------------------------------------------


def update_workflow_execution(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    request: UpdateRequest,
    first_execution_run_id: str = "",
) -> UpdateStatus:
    """Admit an update (or find the one with its id) and see that a workflow task carries it."""
    request.check(namespace)
    with transaction.atomic(durable=True):
        ex = lock_execution(namespace, workflow_id, run_id)
        if first_execution_run_id and str(ex.first_run_id) != first_execution_run_id:
            raise ChronicleError(ErrorCode.NOT_FOUND, "no run of that chain: first_execution_run_id differs")
        mutation = ExecutionMutation(ex, namespace)
        update = admit_update_txn(mutation, request)
        mutation.save()
    return status_of(update, ex)


def admit_update_txn(mutation: ExecutionMutation, request: UpdateRequest) -> WorkflowUpdate:
    """On a locked run: the update with this id, else a new admitted one (limits checked)."""
    ex = mutation.execution
    update_id = request.update_id or str(uuid.uuid4())
    existing = _updates(ex).filter(update_id=update_id).first()
    if existing is not None:
        return existing
    if not ex.is_running:
        raise ChronicleError(ErrorCode.WORKFLOW_NOT_RUNNING, "workflow execution already completed")
    limit = mutation.namespace.max_signals_per_execution
    if ex.signal_count >= limit:
        raise ChronicleError(ErrorCode.LIMIT_EXCEEDED, f"run has reached {limit} signals and updates")
    if ex.updates_in_flight >= MAX_IN_FLIGHT_UPDATES:
        raise ChronicleError(
            ErrorCode.RATE_LIMITED,
            f"the run already has {MAX_IN_FLIGHT_UPDATES} updates in flight",
            retry_after=1,
        )
    ex.signal_count += 1
    ex.updates_in_flight += 1
    scheduled = 0
    if not ex.has_pending_workflow_task:
        mutation.schedule_workflow_task()
        scheduled = ex.wft_scheduled_event_id
    return WorkflowUpdate.objects.create(
        run=ex,
        shard_id=ex.shard_id,
        update_id=update_id,
        name=request.name,
        args=request.args,
        header=request.header,
        identity=request.identity,
        scheduled_task_event_id=scheduled,
    )


# -- reads ----------------------------------------------------------------------------------------

_REQUESTS = (
    f"SELECT update_id, name, args, header, identity FROM {WorkflowUpdate._meta.db_table} "
    "WHERE run_id = %s AND shard_id = %s AND state = %s ORDER BY created_at"
)


def update_requests(ex: WorkflowExecution) -> list[dict[str, Any]]:
    """The ``messages`` a started workflow task carries: each admitted update's request.

    A run with none in flight (almost every task) asks nothing: ``updates_in_flight`` is on
    the locked row. (``args`` and ``header`` come as JSON text, as Django reads ``jsonb``.)
    """
    if not ex.updates_in_flight:
        return []
    with store.bound_cursor() as cursor:
        cursor.execute(_REQUESTS, [ex.run_id, ex.shard_id, str(UpdateState.ADMITTED)])
        rows = cursor.fetchall()
    return [
        {
            "type": "Request",
            "update_id": update_id,
            "name": name,
            "args": json.loads(args),
            "header": json.loads(header),
            "identity": identity,
        }
        for update_id, name, args, header, identity in rows
    ]


def find_update(
    namespace: Namespace, workflow_id: str, run_id: str | None, update_id: str
) -> tuple[WorkflowUpdate, WorkflowExecution]:
    """The update with ``update_id`` on the given run, else on the workflow's newest run that has it."""
    shard = shard_for(namespace.id, workflow_id)  # every run of the workflow id is on it
    updates = WorkflowUpdate.objects.select_related("run").filter(
        shard_id=shard,
        run__shard_id=shard,
        run__namespace=namespace,
        run__workflow_id=workflow_id,
        update_id=update_id,
    )
    if run_id:
        try:
            updates = updates.filter(run_id=uuid.UUID(run_id))
        except ValueError:
            raise invalid("run_id must be a UUID") from None
    update = updates.order_by("-run__start_time").first()
    if update is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"update {update_id!r} not found")
    return update, update.run


# -- the worker's messages --------------------------------------------------------------------------


def check_messages(messages: Any) -> None:
    """Refuse a malformed message list before anything is written."""
    if not isinstance(messages, list):
        raise invalid("messages must be a list")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("type") not in (ACCEPTANCE, REJECTION, RESPONSE):
            raise invalid(f"messages[{index}]: type must be Acceptance, Rejection or Response")
        if not isinstance(message.get("update_id"), str) or not message["update_id"]:
            raise invalid(f"messages[{index}]: update_id is required")


def _updates(ex: WorkflowExecution) -> QuerySet[WorkflowUpdate]:
    """The run's update rows (on its shard)."""
    return WorkflowUpdate.objects.filter(run=ex, shard_id=ex.shard_id)


def _save(update: WorkflowUpdate, *fields: str) -> None:
    WorkflowUpdate.objects.filter(id=update.id, shard_id=update.shard_id).update(
        **{name: getattr(update, name) for name in fields}
    )


def _locked_updates(ex: WorkflowExecution, ids: set[str]) -> dict[str, WorkflowUpdate]:
    rows = _updates(ex).select_for_update().filter(update_id__in=ids)
    return {row.update_id: row for row in rows}


def accept_updates_txn(
    mutation: ExecutionMutation, messages: list[dict[str, Any]], completed_event_id: int
) -> None:
    """Rejections (no event) and Acceptances (``WorkflowExecutionUpdateAccepted``), written right
    after ``WorkflowTaskCompleted``; a message for an update already past that step is ignored."""
    ex = mutation.execution
    wanted = [m for m in messages if m["type"] in (ACCEPTANCE, REJECTION)]
    if not wanted:
        return
    rows = _locked_updates(ex, {m["update_id"] for m in wanted})
    for message in wanted:
        update = rows.get(message["update_id"])
        if update is None or update.state != UpdateState.ADMITTED:
            continue
        if message["type"] == REJECTION:
            failure = message.get("failure")
            update.state = UpdateState.REJECTED
            update.outcome = {"failure": failure if isinstance(failure, dict) else {"message": "rejected"}}
            ex.updates_in_flight -= 1
        else:
            update.state = UpdateState.ACCEPTED
            update.accepted_event_id = mutation.append(
                EventType.WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
                {
                    "protocol_instance_id": update.update_id,
                    "accepted_request_message_id": f"{update.update_id}/request",
                    "accepted_request_sequencing_event_id": completed_event_id,
                    "accepted_request": {
                        "meta": {"update_id": update.update_id, "identity": update.identity},
                        "input": {"name": update.name, "args": update.args, "header": update.header},
                    },
                },
            )
        _save(update, "state", "outcome", "accepted_event_id")
        notify(HISTORY_CHANNEL, wakeup_key(update.id))


def apply_messages_txn(
    mutation: ExecutionMutation, messages: list[dict[str, Any]], completed_event_id: int, identity: str
) -> None:
    """A completion's update messages, written right after ``WorkflowTaskCompleted`` and before
    the commands' events (so a response is never written after the run's close)."""
    accept_updates_txn(mutation, messages, completed_event_id)
    complete_updates_txn(mutation, messages, identity)


def complete_updates_txn(mutation: ExecutionMutation, messages: list[dict[str, Any]], identity: str) -> None:
    """Responses: ``WorkflowExecutionUpdateCompleted``, after the acceptances. A response
    for an update never accepted fails the task (the caller rolls back); a repeat is ignored."""
    ex = mutation.execution
    wanted = [m for m in messages if m["type"] == RESPONSE]
    if not wanted:
        return
    rows = _locked_updates(ex, {m["update_id"] for m in wanted})
    for message in wanted:
        update = rows.get(message["update_id"]) or _adopt_accepted(mutation, message["update_id"])
        if update is None or update.state in (UpdateState.ADMITTED, UpdateState.REJECTED):
            raise CommandRejected(_BAD_MESSAGE, f"update {message['update_id']!r} was not accepted")
        if update.state == UpdateState.COMPLETED:
            continue
        failure = message.get("failure")
        outcome: dict[str, Any] = (
            {"failure": failure} if isinstance(failure, dict) else {"success": message.get("success")}
        )
        update.state = UpdateState.COMPLETED
        update.outcome = outcome
        update.completed_event_id = mutation.append(
            EventType.WORKFLOW_EXECUTION_UPDATE_COMPLETED,
            {
                "meta": {"update_id": update.update_id, "identity": identity},
                "outcome": outcome,
                "accepted_event_id": update.accepted_event_id,
            },
        )
        _save(update, "state", "outcome", "completed_event_id")
        ex.updates_in_flight -= 1
        notify(HISTORY_CHANNEL, wakeup_key(update.id))


def _adopt_accepted(mutation: ExecutionMutation, update_id: str) -> WorkflowUpdate | None:
    """An update this run's history accepted but that has no row here: a run reset before
    resets carried update rows over (``reset.reapply``) holds the copied accepted event alone.
    Its row is made from the event, so its response completes it."""
    ex = mutation.execution
    event = HistoryEvent.objects.filter(
        run=ex,
        shard_id=ex.shard_id,
        event_type=EventType.WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
        attributes__protocol_instance_id=update_id,
    ).first()
    if event is None:
        return None
    request = event.attributes.get("accepted_request") or {}
    given, meta = request.get("input") or {}, request.get("meta") or {}
    ex.updates_in_flight += 1
    return WorkflowUpdate.objects.create(
        run=ex,
        shard_id=ex.shard_id,
        update_id=update_id,
        name=str(given.get("name") or ""),
        args=given.get("args") or [],
        header=given.get("header") or {},
        identity=str(meta.get("identity") or ""),
        state=UpdateState.ACCEPTED,
        accepted_event_id=event.event_id,
    )


def has_undelivered(ex: WorkflowExecution, started_time: datetime | None) -> bool:
    """Whether an update was admitted after the in-flight task started (so it did not carry it):
    a completion that closes the run then fails, as with new events, and the next task carries it."""
    if not ex.updates_in_flight or started_time is None:
        return False
    return _updates(ex).filter(state=UpdateState.ADMITTED, created_at__gt=started_time).exists()


def after_completion_txn(mutation: ExecutionMutation, started_time: datetime | None) -> None:
    """Once a completion's events are in: admitted updates that arrived while the task ran get a
    task of their own, and if the run closed, callers still waiting are woken to hear so."""
    ex = mutation.execution
    if not ex.updates_in_flight:
        return
    if not ex.is_running:
        open_updates = _updates(ex).filter(state__in=(UpdateState.ADMITTED, UpdateState.ACCEPTED))
        for row_id in open_updates.values_list("id", flat=True):
            notify(HISTORY_CHANNEL, wakeup_key(row_id))
    elif has_undelivered(ex, started_time):
        mutation.force_new_task = True
