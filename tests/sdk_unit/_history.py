"""Builds histories in the exact event shape the server writes, for replay tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sdk._runtime.instance import WorkflowInstance
from sdk.converter import DataConverter
from sdk.workflow import Info
from sdk.workflow._definition import WorkflowDefinition

START = datetime(2026, 1, 1, tzinfo=UTC)


def payload(value: Any) -> dict[str, Any]:
    return {"metadata": {"encoding": "json/plain"}, "data": value}


class HistoryBuilder:
    def __init__(self, workflow_type: str, *args: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.clock = START
        self.add(
            "WorkflowExecutionStarted",
            workflow_type={"name": workflow_type},
            task_queue={"name": "q"},
            input=[payload(a) for a in args],
            attempt=1,
            workflow_id="wf-1",
        )

    def add(self, event_type: str, **attributes: Any) -> int:
        event_id = len(self.events) + 1
        self.events.append(
            {
                "event_id": event_id,
                "event_type": event_type,
                "event_time": self.clock.isoformat(),
                "attributes": attributes,
            }
        )
        return event_id

    def task(self, *, advance: float = 0.0) -> int:
        """Schedule and start a workflow task; returns the started event id."""
        self.clock += timedelta(seconds=advance)
        scheduled = self.add("WorkflowTaskScheduled", task_queue={"name": "q"})
        return self.add("WorkflowTaskStarted", scheduled_event_id=scheduled, attempt=1)

    def completed(self) -> int:
        started = len(self.events)
        return self.add("WorkflowTaskCompleted", started_event_id=started)

    def activity_scheduled(self, name: str, activity_id: str, wtc: int) -> int:
        return self.add(
            "ActivityTaskScheduled",
            activity_id=activity_id,
            activity_type={"name": name},
            workflow_task_completed_event_id=wtc,
        )

    def activity_completed(self, scheduled: int, result: Any) -> int:
        started = self.add("ActivityTaskStarted", scheduled_event_id=scheduled, attempt=1)
        return self.add(
            "ActivityTaskCompleted",
            scheduled_event_id=scheduled,
            started_event_id=started,
            result=[payload(result)],
        )

    def timer(self, timer_id: str, seconds: float, wtc: int) -> int:
        return self.add(
            "TimerStarted",
            timer_id=timer_id,
            start_to_fire_timeout=seconds,
            workflow_task_completed_event_id=wtc,
        )


def new_instance(cls: type) -> WorkflowInstance:
    definition = WorkflowDefinition.from_class(cls)
    info = Info(
        workflow_id="wf-1",
        run_id="run-1",
        workflow_type=definition.name,
        task_queue="q",
        namespace="default",
        start_time=START,
    )
    return WorkflowInstance(definition, info, DataConverter())


def command_types(commands: list[dict[str, Any]]) -> list[str]:
    return [c["command_type"] for c in commands]
