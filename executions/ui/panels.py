"""The execution page's panels: pending timers, the children tree, reset lineage and payloads.

Each panel is a small read over the run's own rows or its events (the DAG is the log:
children are found from their ``ChildWorkflowExecutionStarted`` events), so the page
costs a handful of indexed queries however long the history is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chronicle.api import loads as strict_json
from chronicle.errors import ChronicleError, ErrorCode
from executions.models import AuditAction, AuditEntry
from history.kernel.payloads import PAYLOAD_REF, is_payload, is_payload_ref
from history.models import HistoryEvent, Payload, TimerKind, TimerTask, WorkflowExecution
from namespaces.models import Namespace

CHILD_TREE_DEPTH = 3
CHILDREN_PER_LEVEL = 200
JSON_ENCODING = "json/plain"
EVENTS_PAGE_SIZE = 50


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def as_payloads(values: list[Any]) -> list[Any]:
    """JSON values typed into a form, as the ``json/plain`` payloads workers decode.

    A value that already is a payload (``{"metadata": ..., "data": ...}``) is kept as it is.
    """
    return [v if is_payload(v) else {"metadata": {"encoding": JSON_ENCODING}, "data": v} for v in values]


def form_arguments(raw: str, what: str) -> list[Any]:
    """Arguments typed into a form as JSON (a list is the arguments, anything else one
    argument), as the payloads workers decode; ``what`` names the field in the error."""
    if not raw.strip():
        return []
    try:
        value = strict_json(raw)  # NaN and Infinity are not JSON: PostgreSQL would refuse them
    except ValueError as error:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, f"{what} is not JSON: {error}") from None
    return as_payloads(value if isinstance(value, list) else [value])


def readable(value: Any) -> Any:
    """``value`` with every ``json/plain`` payload replaced by the data it carries."""
    if is_payload(value) and value["metadata"].get("encoding") == JSON_ENCODING:
        return readable(value["data"])
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    return value


def with_stored_payloads(namespace: Namespace, value: Any) -> Any:
    """``value`` with each payload reference replaced by the stored payload it names."""
    digests: set[str] = set()
    _collect_refs(value, digests)
    if not digests:
        return value
    stored = dict(
        Payload.objects.filter(namespace=namespace, digest__in=digests).values_list("digest", "data")
    )
    return _replace_refs(value, stored)


def _collect_refs(value: Any, digests: set[str]) -> None:
    if is_payload_ref(value):
        digests.add(str(value[PAYLOAD_REF].get("sha256", "")))
    elif isinstance(value, dict):
        for v in value.values():
            _collect_refs(v, digests)
    elif isinstance(value, list):
        for v in value:
            _collect_refs(v, digests)


def _replace_refs(value: Any, stored: dict[str, Any]) -> Any:
    if is_payload_ref(value):
        return stored.get(str(value[PAYLOAD_REF].get("sha256", "")), value)
    if isinstance(value, dict):
        return {k: _replace_refs(v, stored) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_refs(v, stored) for v in value]
    return value


@dataclass
class PendingTimer:
    timer_id: str
    started_event_id: int
    fire_at: datetime


def pending_timers(ex: WorkflowExecution) -> list[PendingTimer]:
    """The run's user timers still to fire, soonest first (a pending timer *is* its row)."""
    if not ex.is_running:
        return []
    rows = TimerTask.objects.filter(run=ex, kind=TimerKind.USER_TIMER).order_by("fire_at")
    return [PendingTimer(t.timer_id, t.scheduled_event_id, t.fire_at) for t in rows]


@dataclass
class ChildNode:
    """One child run in the tree, with its own children below it."""

    workflow_id: str
    run_id: str
    workflow_type: str
    status: str
    children: list[ChildNode] = field(default_factory=list)


def children_tree(ex: WorkflowExecution, depth: int = CHILD_TREE_DEPTH) -> list[ChildNode]:
    """The children this run started, and theirs, ``depth`` levels down; one query pair per level.

    Children live in their parent's namespace, and only runs of that namespace are read
    or descended into, whatever run ids an event names.
    """
    roots: list[ChildNode] = []
    level: dict[str, list[ChildNode]] = {str(ex.run_id): roots}
    for _ in range(depth):
        started = _children_started_by(list(level))
        if not started:
            break
        runs = {
            str(r.run_id): r
            for r in WorkflowExecution.objects.filter(
                namespace_id=ex.namespace_id, run_id__in=[run_id for _, run_id, _ in started]
            )
        }
        next_level: dict[str, list[ChildNode]] = {}
        for parent_run_id, run_id, workflow_id in started:
            run = runs.get(run_id)
            node = ChildNode(
                workflow_id, run_id, run.workflow_type if run else "", run.status if run else "unknown"
            )
            level[parent_run_id].append(node)
            if run is not None:
                next_level[run_id] = node.children
        level = next_level
    return roots


def _children_started_by(parent_run_ids: list[str]) -> list[tuple[str, str, str]]:
    """(parent run id, child run id, child workflow id) from the parents' Started events."""
    rows = (
        HistoryEvent.objects.filter(run_id__in=parent_run_ids, event_type="ChildWorkflowExecutionStarted")
        .order_by("run_id", "event_id")
        .values_list(
            "run_id", "attributes__workflow_execution__run_id", "attributes__workflow_execution__workflow_id"
        )[:CHILDREN_PER_LEVEL]
    )
    return [(str(parent), str(run_id), str(workflow_id)) for parent, run_id, workflow_id in rows if run_id]


@dataclass
class ResetLineage:
    """How this run came out of a reset: base run, point, reason and who asked for it."""

    base_run_id: str
    event_id: int
    reason: str
    actor: str


def reset_lineage(ex: WorkflowExecution) -> ResetLineage | None:
    """The reset that created ``ex``, read from its own history and the audit log."""
    if not ex.reset_base_run_id:
        return None
    failed = (
        HistoryEvent.objects.filter(run=ex, event_type="WorkflowTaskFailed", event_id__gte=ex.reset_event_id)
        .order_by("event_id")
        .first()
    )
    reason = str(((failed.attributes.get("failure") or {}).get("message", "")) if failed else "")
    entry = (
        AuditEntry.objects.filter(
            namespace_id=ex.namespace_id, action=AuditAction.RESET, result=str(ex.run_id)
        )
        .order_by("created_at")
        .first()
    )
    return ResetLineage(str(ex.reset_base_run_id), ex.reset_event_id, reason, entry.actor if entry else "")
