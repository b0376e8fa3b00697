"""Replay recorded histories against current workflow code to catch nondeterministic changes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sdk._runtime.instance import WorkflowInstance
from sdk.common import RetryPolicy
from sdk.converter import DataConverter
from sdk.exceptions import NondeterminismError
from sdk.workflow import Info, ParentInfo
from sdk.workflow._definition import WorkflowDefinition


@dataclass
class WorkflowHistory:
    """A run's events as the server's history endpoint returns them."""

    workflow_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    run_id: str = ""

    @classmethod
    def from_json(cls, data: str | dict[str, Any], *, workflow_id: str = "") -> WorkflowHistory:
        value = json.loads(data) if isinstance(data, str) else data
        return cls(
            workflow_id=str(value.get("workflow_id") or workflow_id),
            events=list(value.get("events") or (value.get("history") or {}).get("events") or []),
            run_id=str(value.get("run_id") or ""),
        )

    def to_json(self) -> str:
        return json.dumps({"workflow_id": self.workflow_id, "run_id": self.run_id, "events": self.events})


@dataclass
class ReplayResult:
    history: WorkflowHistory
    replay_failure: Exception | None = None


def _seconds(value: Any) -> timedelta | None:
    return timedelta(seconds=float(value)) if value else None


def info_from_started_event(
    started: dict[str, Any], *, workflow_id: str, run_id: str, namespace: str = "default"
) -> Info:
    """The run's Info as its WorkflowExecutionStarted event describes it."""
    attrs = started.get("attributes") or {}
    return Info(
        workflow_id=workflow_id or str(attrs.get("workflow_id") or ""),
        run_id=run_id or str(attrs.get("original_execution_run_id") or ""),
        workflow_type=str((attrs.get("workflow_type") or {}).get("name") or ""),
        task_queue=str((attrs.get("task_queue") or {}).get("name") or ""),
        namespace=namespace,
        start_time=datetime.fromisoformat(started["event_time"]),
        attempt=int(attrs.get("attempt") or 1),
        run_timeout=_seconds(attrs.get("workflow_run_timeout")),
        execution_timeout=_seconds(attrs.get("workflow_execution_timeout")),
        task_timeout=_seconds(attrs.get("workflow_task_timeout")),
        continued_run_id=attrs.get("continued_execution_run_id"),
        first_execution_run_id=attrs.get("first_execution_run_id"),
        retry_policy=RetryPolicy.from_wire(attrs.get("retry_policy")),
        memo=dict(attrs.get("memo") or {}),
        search_attributes=dict(attrs.get("search_attributes") or {}),
        cron_schedule=str(attrs.get("cron_schedule") or ""),
        parent=_parent(attrs),
    )


def _parent(attrs: dict[str, Any]) -> ParentInfo | None:
    execution = attrs.get("parent_workflow_execution")
    if not isinstance(execution, dict):
        return None
    return ParentInfo(
        namespace=str(attrs.get("parent_workflow_namespace") or ""),
        run_id=str(execution.get("run_id") or ""),
        workflow_id=str(execution.get("workflow_id") or ""),
    )


class Replayer:
    """Replays whole histories; raises (or reports) nondeterminism and task failures."""

    def __init__(self, *, workflows: Sequence[type], data_converter: DataConverter | None = None) -> None:
        self.definitions = {d.name: d for d in (WorkflowDefinition.from_class(cls) for cls in workflows)}
        self.converter = data_converter or DataConverter()

    def replay_workflow(self, history: WorkflowHistory | dict[str, Any] | str) -> ReplayResult:
        """Replay one history; raises NondeterminismError or WorkflowTaskError on failure."""
        if not isinstance(history, WorkflowHistory):
            history = WorkflowHistory.from_json(history)
        events = history.events
        if not events or events[0]["event_type"] != "WorkflowExecutionStarted":
            raise ValueError("a history must begin with WorkflowExecutionStarted")
        info = info_from_started_event(events[0], workflow_id=history.workflow_id, run_id=history.run_id)
        definition = self.definitions.get(info.workflow_type)
        if definition is None:
            raise ValueError(f"no registered workflow named {info.workflow_type!r}")
        activation = WorkflowInstance(definition, info, self.converter).activate(events)
        if activation.commands and _last_task_completed(events):
            raise NondeterminismError(
                f"workflow code issued {activation.commands[0]['command_type']} after the "
                "recorded history ended"
            )
        return ReplayResult(history)

    def replay_workflows(
        self, histories: Iterable[WorkflowHistory | dict[str, Any] | str], *, raise_on_failure: bool = True
    ) -> list[ReplayResult]:
        results = []
        for history in histories:
            parsed = history if isinstance(history, WorkflowHistory) else WorkflowHistory.from_json(history)
            try:
                results.append(self.replay_workflow(parsed))
            except Exception as exc:
                if raise_on_failure:
                    raise
                results.append(ReplayResult(parsed, exc))
        return results


def _last_task_completed(events: list[dict[str, Any]]) -> bool:
    """True when the history's last workflow task recorded its completion (nothing is pending)."""
    for event in reversed(events):
        if event["event_type"] == "WorkflowTaskStarted":
            return False
        if event["event_type"] == "WorkflowTaskCompleted":
            return True
    return False
