"""Workflow tasks: poll normal and sticky queues, drive cached instances, report commands."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from sdk import activity
from sdk._failure import exception_to_failure
from sdk._payload_refs import PayloadRefResolver
from sdk._runtime.instance import (
    Activation,
    LocalActivityRequest,
    LocalActivityResult,
    StaleInstanceError,
    WorkflowInstance,
)
from sdk._runtime.replayer import info_from_started_event
from sdk.exceptions import ApplicationError, NondeterminismError
from sdk.worker._run_ahead import RunAhead, TaskRunAhead
from sdk.workflow import Info
from sdk.workflow._definition import DYNAMIC, WorkflowDefinition

log = logging.getLogger("sdk.worker.workflow")

NONDETERMINISM_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
UNHANDLED_FAILURE_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE"


def local_activity_info(run: Info, activity_type: str) -> activity.Info:
    """What ``activity.info()`` reports inside a local activity of ``run``."""
    return activity.Info(
        activity_id="local",
        activity_type=activity_type,
        attempt=1,
        task_token=b"",
        task_queue=run.task_queue,
        workflow_id=run.workflow_id,
        workflow_run_id=run.run_id,
        workflow_type=run.workflow_type,
        workflow_namespace=run.namespace,
        heartbeat_details=[],
        scheduled_time=None,
        current_attempt_scheduled_time=None,
        started_time=None,
        schedule_to_close_timeout=None,
        start_to_close_timeout=None,
        heartbeat_timeout=None,
        is_local=True,
    )


class WorkflowRunner:
    """Runs workflow and query tasks with a sticky LRU cache of instances keyed by run id."""

    def __init__(self, worker: Any, workflows: Sequence[type]) -> None:
        self.worker = worker
        self.definitions: dict[str, WorkflowDefinition] = {}
        extra_failures = tuple(getattr(worker, "workflow_failure_exception_types", ()))
        for cls in workflows:
            definition = WorkflowDefinition.from_class(cls)
            if extra_failures:
                failures = definition.failure_exception_types + extra_failures
                definition = dataclasses.replace(definition, failure_exception_types=failures)
            self.definitions[definition.name] = definition
        self.cache: OrderedDict[str, WorkflowInstance] = OrderedDict()
        self.sticky_queue = f"{worker.task_queue}-sticky-{uuid.uuid4().hex[:12]}"
        self.slots = asyncio.Semaphore(worker.max_concurrent_workflow_tasks)
        self.in_flight: set[asyncio.Task[None]] = set()
        # Sticky-queue resets on their way, for runs evicted from the cache (kept until sent).
        self.resets: set[asyncio.Task[dict[str, Any] | None]] = set()
        self.ahead = RunAhead(self)

    def pollers(self, stopping: asyncio.Event) -> list[asyncio.Task[None]]:
        """Concurrent long polls split between the task queue and this worker's sticky queue.

        Most tasks of a running workflow arrive on the sticky queue, so it gets the larger
        share; each queue always has at least one poll, and each poll asks for at most its
        even part of the slots, so a poll on one queue cannot hold every slot.
        """
        total = self.worker.max_concurrent_workflow_task_polls
        normal = max(1, round(total * self.worker.nonsticky_to_sticky_poll_ratio))
        sticky = max(1, total - normal)
        queues = [self.worker.task_queue] * normal + [self.sticky_queue] * sticky
        share = self.worker.poll_share(self.worker.max_concurrent_workflow_tasks, len(queues))
        return [
            asyncio.create_task(
                self.worker.poll_loop(
                    f"/task-queues/{quote(queue, safe='')}/workflow-tasks/poll",
                    self.slots,
                    self.run_reserved,
                    f"workflow poll on {queue}",
                    stopping,
                    share,
                )
            )
            for queue in queues
        ]

    async def reserve_slot(self) -> bool:
        """For an eager start from this process: take a free task slot without waiting."""
        if self.slots.locked():
            return False
        await self.slots.acquire()
        return True

    def release_slot(self) -> None:
        self.slots.release()

    async def offer_slot_for(self, activity_task: dict[str, Any], body: dict[str, Any]) -> bool:
        """Offer, in an activity's report ``body``, to run the workflow task its result
        schedules, when this worker has that run cached (so the run is sticky here) and a
        free slot, which is then held for it. The server hands the task back in its answer
        only if the run is still on this worker's sticky queue; that saves the sticky poll."""
        run_id = (activity_task.get("workflow_execution") or {}).get("run_id")
        if run_id not in self.cache or not await self.reserve_slot():
            return False
        body["return_new_workflow_task"] = True
        body["sticky_task_queue"] = self.sticky_queue
        body["worker_version_stamp"] = self.worker.version_stamp
        return True

    def take_handed_back(self, answer: dict[str, Any] | None, ahead: TaskRunAhead | None = None) -> None:
        """Settle the task run ahead (``ahead``), if one was; run the workflow task an
        activity report's answer carried on the slot offered for it, or give the slot back."""
        if ahead is not None and self.ahead.settle(ahead, answer):
            self.release_slot()
            return
        task = (answer or {}).get("workflow_task")
        if task:
            self.run_reserved(task)
        else:
            self.release_slot()

    def run_reserved(self, task: dict[str, Any]) -> None:
        """Run a workflow task that arrived in a start response, on a slot already reserved."""
        running = asyncio.create_task(self._handle_and_release(task))
        self.in_flight.add(running)
        running.add_done_callback(self.in_flight.discard)

    async def _handle_and_release(self, task: dict[str, Any]) -> None:
        try:
            if task.get("query"):
                await self._answer_query(task)
            else:
                await self._run_task(task)
        except Exception:
            log.exception("workflow task for %s crashed the runner", task.get("workflow_execution"))
        finally:
            self.slots.release()

    async def _instance_for(self, task: dict[str, Any]) -> tuple[WorkflowInstance, list[dict[str, Any]]]:
        """The cached instance and the new events, or a fresh instance and the full history."""
        run_id = task["workflow_execution"]["run_id"]
        events = await self.resolved((task.get("history") or {}).get("events") or [])
        cached = self.cache.get(run_id)
        if cached is not None and events and int(events[0]["event_id"]) == cached.last_event_id + 1:
            self.cache.move_to_end(run_id)
            return cached, events
        self.cache.pop(run_id, None)
        if not events or int(events[0]["event_id"]) != 1:
            events = await self.resolved(await self._full_history(task, events))
        definition = self.definitions.get(task["workflow_type"]["name"]) or self.definitions.get(DYNAMIC)
        if definition is None:
            known = ", ".join(sorted(self.definitions)) or "none"
            raise LookupError(f"workflow type {task['workflow_type']['name']!r} is not registered ({known})")
        execution = task["workflow_execution"]
        info = info_from_started_event(
            events[0],
            workflow_id=execution["workflow_id"],
            run_id=execution["run_id"],
            namespace=self.worker.client.namespace,
        )
        guard = bool(getattr(self.worker, "determinism_guard", True))
        converter = self.worker.client.data_converter
        interceptors = getattr(self.worker, "interceptors", ())
        instance = WorkflowInstance(
            definition, info, converter, determinism_guard=guard, interceptors=interceptors
        )
        return instance, events

    async def resolved(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The events with payload references swapped for the stored payloads."""
        resolver: PayloadRefResolver = self.worker.client.payload_refs
        return await resolver.resolve(list(events))

    async def _full_history(self, task: dict[str, Any], tail: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Page the stored history, then append the poll's (possibly transient) newer events."""
        execution = task["workflow_execution"]
        path = f"/workflows/{quote(execution['workflow_id'], safe='')}/runs/{execution['run_id']}/history"
        events: list[dict[str, Any]] = []
        after = 0
        while True:
            page = await self.worker.client.transport.get(path, params={"after_event_id": after}) or {}
            events.extend(page.get("events") or [])
            cursor = page.get("next_after_event_id")
            if not cursor:
                break
            after = int(cursor)
        last = events[-1]["event_id"] if events else 0
        return events + [e for e in tail if int(e["event_id"]) > last]

    async def _activate(self, task: dict[str, Any]) -> tuple[WorkflowInstance, Activation]:
        """Apply the task's events; a cached instance the events do not continue is replaced by replay."""
        instance, events = await self._instance_for(task)
        requests = [] if task.get("query") else list(task.get("messages") or [])
        try:
            instance.receive_update_requests(requests)
            return instance, instance.activate(events)
        except StaleInstanceError:
            self.cache.pop(task["workflow_execution"]["run_id"], None)
            instance, events = await self._instance_for(task)
            instance.receive_update_requests(requests)
            return instance, instance.activate(events)

    def _remember(self, run_id: str, instance: WorkflowInstance) -> None:
        self.cache[run_id] = instance
        self.cache.move_to_end(run_id)
        while len(self.cache) > self.worker.max_cached_workflows:
            evicted, gone = self.cache.popitem(last=False)
            self.ahead.forget(evicted)
            self.worker.client.local_closes.left(evicted)
            self._reset_sticky(gone.info)

    def _reset_sticky(self, run: Info) -> None:
        """Tell the server this worker no longer caches ``run`` (Temporal's
        ResetStickyTaskQueue), so its next task goes to the normal queue with the whole
        history instead of to this sticky queue with only the new events, which would cost
        a fetch of the history before the replay. Sent in the background, as a report (so
        batched with the others on their way); ``report`` logs a failure."""
        path = f"/task-queues/{quote(self.worker.task_queue, safe='')}/reset-sticky-task-queue"
        sending = asyncio.create_task(
            self.worker.report(path, {"workflow_id": run.workflow_id, "run_id": run.run_id})
        )
        self.resets.add(sending)
        sending.add_done_callback(self.resets.discard)

    async def _run_task(self, task: dict[str, Any]) -> None:
        run_id = task["workflow_execution"]["run_id"]
        with self.ahead.busy(run_id):
            await self._run_busy_task(task, run_id)

    async def _run_busy_task(self, task: dict[str, Any], run_id: str) -> None:
        try:
            instance, activation = await self._activate(task)
            activation = await self.settle_local_activities(instance, activation)
        except NondeterminismError as exc:
            await self._fail_task(task, NONDETERMINISM_CAUSE, exc)
            return
        except Exception as exc:
            await self._fail_task(task, UNHANDLED_FAILURE_CAUSE, exc)
            return
        await self._complete_task(task, instance, activation)
        if activation.completed:
            self.cache.pop(run_id, None)
        else:
            self._remember(run_id, instance)

    async def settle_local_activities(self, instance: WorkflowInstance, activation: Activation) -> Activation:
        """Run requested local activities (concurrently per batch) and feed their results back."""
        while activation.local_activities:
            batch = activation.local_activities
            outcomes = await asyncio.gather(*(self._run_local(instance, request) for request in batch))
            for request, outcome in zip(batch, outcomes, strict=True):
                activation = instance.resolve_local_activity(request.seq, outcome)
        return activation

    async def _run_local(
        self, instance: WorkflowInstance, request: LocalActivityRequest
    ) -> LocalActivityResult:
        runner = self.worker.activities
        converter = self.worker.client.data_converter
        if runner is None:
            error = ApplicationError(f"no activities registered for local activity {request.activity_type!r}")
            return LocalActivityResult(failure=exception_to_failure(error, converter))
        base = local_activity_info(instance.info, request.activity_type)
        value, error, attempt = await runner.run_local(
            request.activity_type, request.args, request.options, base
        )
        if error is not None:
            return LocalActivityResult(failure=exception_to_failure(error, converter), attempt=attempt)
        return LocalActivityResult(result=converter.to_payload(value), attempt=attempt)

    async def _fail_task(self, task: dict[str, Any], cause: str, exc: BaseException) -> None:
        self.cache.pop(task["workflow_execution"]["run_id"], None)
        self.ahead.forget(task["workflow_execution"]["run_id"])
        self.worker.client.local_closes.left(task["workflow_execution"]["run_id"])
        # Temporal's marker on this record, which log filters written for it look for.
        marker = {"__temporal_error_identifier": "WorkflowTaskFailure"}
        log.error("workflow task failed (%s): %s", cause, exc, extra=marker)
        await self.worker.report(
            f"/task-queues/{quote(self.worker.task_queue, safe='')}/workflow-tasks/fail",
            {
                "task_token": task["task_token"],
                "identity": self.worker.identity,
                "cause": cause,
                "failure": exception_to_failure(exc, self.worker.client.data_converter),
            },
        )

    async def _complete_task(
        self, task: dict[str, Any], instance: WorkflowInstance, activation: Activation
    ) -> None:
        reserved = await self.reserve_eager_slots(activation.commands)
        queries: dict[str, dict[str, Any]] = task.get("queries") or {}
        body = {
            "task_token": task["task_token"],
            "identity": self.worker.identity,
            "commands": activation.commands,
            # Queries the server held back while this task ran, answered from the new state.
            "query_results": {
                query_id: answer_query(instance, q, query_id) for query_id, q in queries.items()
            },
            "messages": activation.messages,  # the answers to the task's update requests
            "sticky_task_queue": "" if activation.completed else self.sticky_queue,
            "sticky_schedule_to_start_timeout": self.sticky_timeout_seconds(),
            "worker_version_stamp": self.worker.version_stamp,
        }
        if not activation.completed:
            body["return_recorded_events"] = True  # what the next task run ahead builds on
        answer = await self.worker.report(
            f"/task-queues/{quote(self.worker.task_queue, safe='')}/workflow-tasks/complete", body
        )
        self.after_completion(task["workflow_execution"]["run_id"], instance, activation, answer, reserved)

    def sticky_timeout_seconds(self) -> float:
        return float(self.worker.sticky_schedule_to_start_timeout.total_seconds())

    def after_completion(
        self,
        run_id: str,
        instance: WorkflowInstance,
        activation: Activation,
        answer: dict[str, Any] | None,
        reserved: int,
    ) -> None:
        """Act on a completion's answer: the close, the eager activities (on the slots
        ``reserved`` for them), and the events recorded, for the next task run ahead."""
        closed = (answer or {}).get("closed")
        if closed:
            self.worker.client.local_closes.closed(run_id, closed)
        elif answer is None or activation.completed:
            # Refused, or closed without word of it (a server that does not say): ask it.
            self.worker.client.local_closes.left(run_id)
        self.ahead.note_recorded(run_id, instance, (answer or {}).get("recorded_events"))
        eager = list((answer or {}).get("activity_tasks") or [])
        runner = self.worker.activities
        for activity_task in eager[:reserved]:
            runner.start(activity_task)
        for _ in range(reserved - min(reserved, len(eager))):
            runner.slots.release()

    async def reserve_eager_slots(self, commands: list[dict[str, Any]]) -> int:
        """Ask for eager dispatch of activities this worker runs: one free slot each, a few per task."""
        runner = self.worker.activities
        if runner is None:
            return 0
        reserved = 0
        for cmd in commands:
            if reserved >= self.worker.max_eager_activity_reservations:
                break
            if cmd["command_type"] != "ScheduleActivityTask" or not runner.has_free_slot():
                continue
            attrs = cmd["attributes"]
            name = attrs.get("activity_type")
            name = name.get("name") if isinstance(name, dict) else name
            queue = attrs.get("task_queue")
            queue = queue.get("name") if isinstance(queue, dict) else queue
            if name in runner.definitions and (not queue or queue == self.worker.task_queue):
                await runner.slots.acquire()
                attrs["request_eager_execution"] = True
                reserved += 1
        return reserved

    async def _answer_query(self, task: dict[str, Any]) -> None:
        query = task["query"]
        body: dict[str, Any] = {"task_token": task["task_token"]}
        try:
            run_id = task["workflow_execution"]["run_id"]
            instance = self.cache.get(run_id)
            if instance is None:
                instance, _ = await self._activate(task)
        except Exception as exc:
            body["error_message"] = str(exc) or type(exc).__name__
        else:
            body.update(answer_query(instance, query, str(task.get("task_token") or "")))
        await self.worker.report(
            f"/task-queues/{quote(self.worker.task_queue, safe='')}/query-tasks/respond", body
        )

    async def drain(self) -> None:
        if self.in_flight:
            await asyncio.gather(*self.in_flight, return_exceptions=True)
        if self.resets:
            await asyncio.gather(*self.resets, return_exceptions=True)


def answer_query(instance: WorkflowInstance, query: dict[str, Any], query_id: str = "") -> dict[str, Any]:
    """``{"answer": payload}`` or ``{"error_message": ...}``, the shape both query replies take."""
    try:
        args = list(query.get("query_args") or [])
        return {"answer": instance.query(query["query_type"], args, query_id)}
    except Exception as exc:  # QueryFailed and handler bugs both go back as the answer
        return {"error_message": str(exc) or type(exc).__name__}
