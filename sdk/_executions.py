"""What listing, counting and describing executions return (``sdk.client`` re-exports them)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sdk.common import WorkflowExecutionStatus


@dataclass(frozen=True)
class WorkflowExecutionDescription:
    """What ``describe()`` returns: the execution's status, identity, times and metadata."""

    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    status: WorkflowExecutionStatus
    start_time: datetime | None
    execution_time: datetime | None
    close_time: datetime | None
    history_length: int
    memo: dict[str, Any]
    search_attributes: dict[str, Any]
    raw: dict[str, Any]
    # The build the run is pinned to (worker versioning); None when unversioned.
    assigned_build_id: str | None = None
    parent_id: str | None = None
    parent_run_id: str | None = None

    @property
    def id(self) -> str:
        """The workflow id (Temporal's ``WorkflowExecution.id``)."""
        return self.workflow_id

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> WorkflowExecutionDescription:
        return cls(
            workflow_id=data["workflow_id"],
            run_id=data["run_id"],
            workflow_type=data["workflow_type"],
            task_queue=data.get("task_queue", ""),
            status=status_from_wire(data["status"]),
            start_time=_time(data.get("start_time")),
            execution_time=_time(data.get("execution_time")),
            close_time=_time(data.get("close_time")),
            history_length=int(data.get("history_length") or 0),
            memo=dict(data.get("memo") or {}),
            search_attributes=dict(data.get("search_attributes") or {}),
            raw=data,
            assigned_build_id=data.get("assigned_build_id"),
            parent_id=data.get("parent_workflow_id"),
            parent_run_id=data.get("parent_run_id"),
        )


def status_from_wire(value: str) -> WorkflowExecutionStatus:
    """The server spells statuses ``ContinuedAsNew``; the enum ``CONTINUED_AS_NEW``."""
    return WorkflowExecutionStatus(re.sub(r"(?<!^)(?=[A-Z])", "_", value).upper())


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class WorkflowExecutionCountAggregationGroup:
    count: int
    group_values: Sequence[Any]


@dataclass(frozen=True)
class WorkflowExecutionCount:
    count: int
    groups: Sequence[WorkflowExecutionCountAggregationGroup]
