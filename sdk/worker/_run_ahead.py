"""Running a workflow's next task ahead, on an activity result this worker is about to report.

A step of a workflow is two calls in Temporal's protocol: the activity's result, then the
completion of the workflow task the result schedules. When the activity ran here and the
workflow is cached here (sticky), this worker already knows every event the server will
write for the result: the events its last completion recorded (the server sends them back
when asked, ``return_recorded_events``), then ``ActivityTaskStarted``,
``ActivityTaskCompleted``, ``WorkflowTaskScheduled`` and ``WorkflowTaskStarted``. So it
runs the task on those events at once and sends the commands with the result
(``workflow_task_ahead``): one call per step instead of two.

The server records both only if nothing else reached the run meanwhile; the start time and
history size the code saw go into the history, so a replay sees the same. When it refuses
(a signal arrived, a timer fired, the clock is off), the instance ran on events that will
not be written: it is dropped from the cache, and the task the server hands back instead is
replayed from the full history. No workflow code runs twice for one task in any other way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sdk._runtime.instance import Activation, WorkflowInstance

if TYPE_CHECKING:
    from sdk.worker._workflows import WorkflowRunner

log = logging.getLogger("sdk.worker.workflow")


@dataclass
class TaskRunAhead:
    """A task run ahead and sent with an activity's result, awaiting the server's word."""

    run_id: str
    instance: WorkflowInstance
    activation: Activation
    reserved: int  # activity slots held for the eager activities its commands ask for


class RunAhead:
    """The events each cached run's last completion recorded, and the runs with a task in hand."""

    def __init__(self, runner: WorkflowRunner) -> None:
        self.runner = runner
        self._recorded: dict[str, tuple[WorkflowInstance, list[dict[str, Any]]]] = {}
        self._busy: set[str] = set()

    @contextmanager
    def busy(self, run_id: str) -> Iterator[None]:
        """While a task of ``run_id`` runs here, no task of it is run ahead."""
        self._busy.add(run_id)
        try:
            yield
        finally:
            self._busy.discard(run_id)

    def note_recorded(self, run_id: str, instance: WorkflowInstance, events: Any) -> None:
        """Keep a completion's recorded events, unless they already hold the next task."""
        if not isinstance(events, list) or not events or _schedules_task(events):
            self._recorded.pop(run_id, None)
            return
        self._recorded[run_id] = (instance, events)

    async def run(self, activity_task: dict[str, Any], body: dict[str, Any]) -> TaskRunAhead | None:
        """Run the task ``body``'s result schedules and add it to ``body``, if this worker
        knows the run's state exactly; None (and ``body`` as it was) otherwise."""
        run_id = str((activity_task.get("workflow_execution") or {}).get("run_id"))
        recorded = self._recorded.pop(run_id, None)
        instance = self.runner.cache.get(run_id)
        if recorded is None or instance is None or recorded[0] is not instance or run_id in self._busy:
            return None
        with self.busy(run_id):
            return await self._run(run_id, instance, recorded[1], activity_task, body)

    async def _run(
        self,
        run_id: str,
        instance: WorkflowInstance,
        recorded: list[dict[str, Any]],
        activity_task: dict[str, Any],
        body: dict[str, Any],
    ) -> TaskRunAhead | None:
        started = max(datetime.now(UTC), instance.current_time)
        expected = int(recorded[-1]["event_id"]) + 1
        events = recorded + self._result_events(expected, started, activity_task, body)
        size = instance.info.history_size + sum(_size(e) for e in events)
        events[-1]["attributes"]["history_size_bytes"] = size
        try:
            instance.receive_update_requests([])
            activation = instance.activate(await self.runner.resolved(events))
            activation = await self.runner.settle_local_activities(instance, activation)
        except Exception:  # the real task will meet it too, replayed from the history
            log.debug("running the next task of %s ahead failed; it is left to the server", run_id)
            self.drop(run_id, instance)
            return None
        reserved = await self.runner.reserve_eager_slots(activation.commands)
        body["workflow_task_ahead"] = {
            "expected_event_id": expected,
            "started_time": started.isoformat(),
            "history_size_bytes": size,
            "commands": activation.commands,
            "messages": activation.messages,
            "sticky_schedule_to_start_timeout": self.runner.sticky_timeout_seconds(),
        }
        return TaskRunAhead(run_id, instance, activation, reserved)

    def _result_events(
        self, first: int, started: datetime, activity_task: dict[str, Any], body: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The events the server writes for the result and the task it hands back."""
        scheduled = int(activity_task["scheduled_event_id"])
        identity = str(body.get("identity") or "")
        stamp = started.isoformat()

        def event(offset: int, kind: str, attributes: dict[str, Any]) -> dict[str, Any]:
            at = {"event_id": first + offset, "event_type": kind, "event_time": stamp}
            return {**at, "attributes": attributes}

        return [
            event(0, "ActivityTaskStarted", {"scheduled_event_id": scheduled, "identity": identity}),
            event(
                1,
                "ActivityTaskCompleted",
                {"scheduled_event_id": scheduled, "started_event_id": first, "result": body.get("result")},
            ),
            event(2, "WorkflowTaskScheduled", {"task_queue": {"name": self.runner.sticky_queue}}),
            event(
                3,
                "WorkflowTaskStarted",
                {"scheduled_event_id": first + 2, "identity": identity, "suggest_continue_as_new": False},
            ),
        ]

    def settle(self, ahead: TaskRunAhead, answer: dict[str, Any] | None) -> bool:
        """Act on the server's word on ``ahead``; True when it recorded the task."""
        completion = (answer or {}).get("workflow_task_ahead")
        runner = self.runner
        if not isinstance(completion, dict):
            self.drop(ahead.run_id, ahead.instance)
            for _ in range(ahead.reserved):
                runner.worker.activities.slots.release()
            return False
        runner.after_completion(ahead.run_id, ahead.instance, ahead.activation, completion, ahead.reserved)
        if ahead.activation.completed:
            runner.cache.pop(ahead.run_id, None)
        elif runner.cache.get(ahead.run_id) is ahead.instance:
            runner.cache.move_to_end(ahead.run_id)
        return True

    def forget(self, run_id: str) -> None:
        """The run left the cache: its recorded events are of no more use."""
        self._recorded.pop(run_id, None)

    def drop(self, run_id: str, instance: WorkflowInstance) -> None:
        """Forget ``instance``: it ran on events the history will not have."""
        if self.runner.cache.get(run_id) is instance:
            del self.runner.cache[run_id]
        self._recorded.pop(run_id, None)


def _schedules_task(events: list[dict[str, Any]]) -> bool:
    """Whether the recorded events already schedule the next task (a flushed signal)."""
    return any(e.get("event_type") == "WorkflowTaskScheduled" for e in events)


def _size(event: dict[str, Any]) -> int:
    """The size an event adds to the history, as nearly as a worker can tell."""
    return len(json.dumps(event.get("attributes"), separators=(",", ":"), default=str)) + len(
        str(event.get("event_type"))
    )
