"""Activity execution: poll, run (async on the loop, sync in an executor), heartbeat, report."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sdk import activity
from sdk._async_activity import task_token_for
from sdk._failure import exception_to_failure
from sdk._http import NotFoundError
from sdk._worker_interceptor import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    headers_from_wire,
)
from sdk.common import RetryPolicy
from sdk.converter import DataConverter, parameter_hints
from sdk.exceptions import ApplicationError, ApplicationErrorCategory, CancelledError
from sdk.worker._shared_state import SharedStateManager, run_in_process

log = logging.getLogger("sdk.worker.activity")

MAX_HEARTBEAT_THROTTLE_INTERVAL = 60.0
DEFAULT_HEARTBEAT_THROTTLE_INTERVAL = 30.0
REPORT_BACKOFF_MAX = 30.0


def heartbeat_interval(
    heartbeat_timeout: float,
    maximum: float = MAX_HEARTBEAT_THROTTLE_INTERVAL,
    default: float = DEFAULT_HEARTBEAT_THROTTLE_INTERVAL,
) -> float:
    """At most one heartbeat per 0.8 × the timeout (so one always lands in time), capped at 60 s;
    30 s apart when the activity has no heartbeat timeout (Temporal's throttle intervals)."""
    return min(0.8 * heartbeat_timeout, maximum) if heartbeat_timeout > 0 else default


def _seconds(value: Any) -> timedelta | None:
    return timedelta(seconds=float(value)) if value else None


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass
class Heartbeater:
    """Keeps only the latest details and wakes the sender; safe to call from executor threads."""

    interval: float
    loop: asyncio.AbstractEventLoop
    pending: Sequence[Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self, details: Sequence[Any]) -> None:
        with self.lock:
            self.pending = details
        self.loop.call_soon_threadsafe(self.wake.set)

    def take(self) -> Sequence[Any] | None:
        with self.lock:
            details, self.pending = self.pending, None
        self.wake.clear()
        return details


class ActivityRunner:
    """Runs activity tasks for one worker, bounded by its activity slots."""

    def __init__(
        self,
        worker: Any,
        activities: Sequence[Any],
        executor: concurrent.futures.Executor | None,
        shared_state: SharedStateManager | None = None,
    ) -> None:
        if executor is not None and not isinstance(executor, concurrent.futures.ThreadPoolExecutor):
            if shared_state is None:
                raise ValueError(
                    "a shared_state_manager is needed with an executor that is not a thread pool"
                )
        else:
            shared_state = None  # threads share the worker's memory
        self.shared_state = shared_state
        self.worker = worker
        self.definitions = {d.name: d for d in (activity.definition_of(fn) for fn in activities)}
        needs_executor = any(not d.is_async for d in self.definitions.values())
        self._owns_executor = executor is None and needs_executor
        self.executor = executor or (
            concurrent.futures.ThreadPoolExecutor(worker.max_concurrent_activities)
            if needs_executor
            else None
        )
        self.slots = asyncio.Semaphore(worker.max_concurrent_activities)
        self.interceptors: list[Interceptor] = list(getattr(worker, "interceptors", ()))
        self.in_flight: set[asyncio.Task[None]] = set()
        # Set when the worker starts shutting down (activity.is_worker_shutdown()).
        self.shutting_down = threading.Event()

    def has_free_slot(self) -> bool:
        return not self.slots.locked()

    async def poll_loop(self, stopping: asyncio.Event) -> None:
        """Poll only while a slot is free; each task runs in its own asyncio task."""
        path = f"/task-queues/{self.worker.task_queue}/activity-tasks/poll"
        worker = self.worker
        share = worker.poll_share(worker.max_concurrent_activities, worker.max_concurrent_activity_task_polls)
        await worker.poll_loop(path, self.slots, self.start, "activity poll", stopping, share)

    def start(self, task: dict[str, Any]) -> None:
        """Run a task already holding a slot (from a poll or an eager dispatch)."""
        running = asyncio.create_task(self._run_and_release(task))
        self.in_flight.add(running)
        running.add_done_callback(self.in_flight.discard)

    async def _run_and_release(self, task: dict[str, Any]) -> None:
        try:
            await self.execute(task)
        except Exception:
            log.exception("activity %s crashed the runner", task.get("activity_id"))
        finally:
            self.slots.release()

    async def execute(self, task: dict[str, Any]) -> None:
        info = _info(task, self.worker.task_queue, self.worker.client.data_converter)
        beats = Heartbeater(
            heartbeat_interval(
                float(task.get("heartbeat_timeout") or 0),
                self.worker.max_heartbeat_throttle_interval,
                self.worker.default_heartbeat_throttle_interval,
            ),
            asyncio.get_running_loop(),
        )
        context = self._context(info, beats.record)
        body = asyncio.create_task(self._invoke(task, context))
        beating = asyncio.create_task(self._heartbeat_loop(task["task_token"], beats, context, body))
        try:
            outcome = await asyncio.shield(body)
        finally:
            beating.cancel()
        await self._report(task, outcome, beats)

    def _context(
        self, info: activity.Info, heartbeat_sink: Callable[[Sequence[Any]], None]
    ) -> activity.ActivityContext:
        return activity.ActivityContext(
            info=info,
            heartbeat_sink=heartbeat_sink,
            client=self.worker.client,
            payload_converter=self.worker.client.data_converter.payload_converter,
            worker_shutdown=self.shutting_down,
        )

    async def _invoke(self, task: dict[str, Any], context: activity.ActivityContext) -> tuple[str, Any]:
        """Run the function; returns ("complete", value), ("cancel", exc) or ("fail", exc)."""
        name = task["activity_type"]["name"]
        definition = self.definitions.get(name)
        try:
            if definition is None:
                known = ", ".join(sorted(self.definitions)) or "none"
                raise ApplicationError(
                    f"activity type {name!r} is not registered (registered: {known})", type="NotFoundError"
                )
            args = self.worker.client.data_converter.from_payloads(
                task.get("input") or [], parameter_hints(definition.fn)
            )
            return "complete", await self._call(definition, args, context, task.get("header"))
        except activity._CompleteAsyncError:
            return "async", None  # a client completes it later, by its task token
        except (asyncio.CancelledError, CancelledError) as exc:
            if context.cancelled.is_set():
                return "cancel", exc
            raise
        except Exception as exc:
            if context.cancelled.is_set() and isinstance(exc, CancelledError):
                return "cancel", exc
            return "fail", exc

    async def _call(
        self,
        definition: activity.ActivityDefinition,
        args: list[Any],
        context: activity.ActivityContext,
        header: Any = None,
    ) -> Any:
        token = activity.set_context(context)
        context.in_thread = not definition.is_async
        context.raise_on_heartbeat = context.in_thread and not definition.no_thread_cancel_exception
        try:
            if self.interceptors:
                return await self._intercepted(definition, args, context, header)
            return await self.run_fn(definition, definition.fn, args, context)
        finally:
            activity._current.reset(token)

    def run_fn(
        self,
        definition: activity.ActivityDefinition,
        fn: Callable[..., Any],
        args: Sequence[Any],
        context: activity.ActivityContext,
    ) -> Awaitable[Any]:
        """The attempt itself: ``fn`` awaited on the loop, or run in the executor."""
        if definition.is_async:
            return fn(*args)  # type: ignore[no-any-return]
        assert self.executor is not None
        if self.shared_state is not None:
            return run_in_process(self.executor, self.shared_state, fn, list(args), context)
        snapshot = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self.executor, lambda: snapshot.run(fn, *args))

    async def _intercepted(
        self,
        definition: activity.ActivityDefinition,
        args: list[Any],
        context: activity.ActivityContext,
        header: Any,
    ) -> Any:
        """The attempt through the worker's interceptors, a chain built for it (Temporal's order:
        the first interceptor outermost, ``init`` before ``execute_activity``)."""
        inbound: ActivityInboundInterceptor = _ActivityInbound(self, definition, context)
        for interceptor in reversed(self.interceptors):
            inbound = interceptor.intercept_activity(inbound)
        inbound.init(_ActivityOutbound(context))
        headers = headers_from_wire(header)
        return await inbound.execute_activity(
            ExecuteActivityInput(definition.fn, args, self.executor, headers)
        )

    async def _heartbeat_loop(
        self,
        task_token: str,
        beats: Heartbeater,
        context: activity.ActivityContext,
        body: asyncio.Task[tuple[str, Any]],
    ) -> None:
        path = f"/task-queues/{self.worker.task_queue}/activity-tasks/heartbeat"
        while True:
            await beats.wake.wait()
            details = beats.take()
            if details is None:
                continue
            converter = self.worker.client.data_converter
            try:
                answer = (
                    await self.worker.client.transport.post(
                        path, {"task_token": task_token, "details": converter.to_payloads(list(details))}
                    )
                    or {}
                )
            except NotFoundError:
                answer = {"cancel_requested": True}
            except Exception as exc:
                log.warning("heartbeat failed (%s); will send the next one", exc)
                answer = {}
            if answer.get("cancel_requested") and not context.cancelled.is_set():
                context.request_cancel("cancel requested")
                definition = self.definitions.get(context.info.activity_type)
                if definition is not None and definition.is_async and not body.done():
                    body.cancel()  # sync activities see is_cancelled() instead
            await asyncio.sleep(beats.interval)

    async def _report(self, task: dict[str, Any], outcome: tuple[str, Any], beats: Heartbeater) -> None:
        kind, value = outcome
        if kind == "async":
            return
        converter = self.worker.client.data_converter
        base = f"/task-queues/{self.worker.task_queue}/activity-tasks/"
        body: dict[str, Any] = {"task_token": task["task_token"], "identity": self.worker.identity}
        if kind == "complete":
            path, body["result"] = base + "complete", converter.to_result(value)
        elif kind == "cancel":
            details = getattr(value, "details", ())
            path, body["details"] = (
                base + "canceled",
                converter.to_payloads(list(details)) if details else None,
            )
        else:
            path, body["failure"] = base + "fail", exception_to_failure(value, converter)
            _log_failure(task, value)
            last = beats.take()
            if last is not None:
                body["last_heartbeat_details"] = converter.to_payloads(list(last))
        workflows = self.worker.workflow_runner if kind != "cancel" else None
        offered = workflows is not None and await workflows.offer_slot_for(task, body)
        ahead = None
        if offered and kind == "complete" and workflows is not None:
            ahead = await workflows.ahead.run(task, body)
        answer = None
        try:
            answer = await self.worker.report(path, body)
        finally:
            if offered and workflows is not None:
                workflows.take_handed_back(answer, ahead)

    async def run_local(
        self, activity_type: str, args: list[dict[str, Any]], options: dict[str, Any], base: activity.Info
    ) -> tuple[Any, BaseException | None, int]:
        """Run a local activity with its retry policy, within its deadline: (value, error, attempt)."""
        policy = RetryPolicy.from_wire(options.get("retry_policy")) or RetryPolicy()
        per_attempt = options.get("start_to_close_timeout") or options.get("schedule_to_close_timeout")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(options.get("schedule_to_close_timeout") or per_attempt or 60)
        attempt = 0
        while True:
            attempt += 1
            kind, value = await self._local_attempt(activity_type, args, base, attempt, per_attempt)
            if kind == "complete":
                return value, None, attempt
            delay = _retry_delay(policy, attempt, value)
            if delay is None or loop.time() + delay >= deadline:
                return None, value, attempt
            await asyncio.sleep(delay)

    async def _local_attempt(
        self, activity_type: str, args: list[dict[str, Any]], base: activity.Info, attempt: int, timeout: Any
    ) -> tuple[str, Any]:
        info = dataclasses.replace(base, activity_type=activity_type, attempt=attempt, is_local=True)
        context = self._context(info, lambda details: None)
        task = {"activity_type": {"name": activity_type}, "input": args}
        try:
            return await asyncio.wait_for(self._invoke(task, context), float(timeout) if timeout else None)
        except TimeoutError:
            return "fail", ApplicationError(
                f"local activity {activity_type!r} timed out", type="TimeoutError"
            )

    async def drain(self) -> None:
        if self.in_flight:
            await asyncio.gather(*self.in_flight, return_exceptions=True)
        if self._owns_executor and self.executor is not None:
            self.executor.shutdown(wait=False)


class _ActivityInbound(ActivityInboundInterceptor):
    """The innermost inbound link: runs the input's function with its arguments."""

    def __init__(
        self,
        runner: ActivityRunner,
        definition: activity.ActivityDefinition,
        context: activity.ActivityContext,
    ) -> None:
        self.runner, self.definition, self.context = runner, definition, context

    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        self.context.outbound = outbound

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        return await self.runner.run_fn(self.definition, input.fn, input.args, self.context)


class _ActivityOutbound(ActivityOutboundInterceptor):
    """The innermost outbound link: the attempt's own info and heartbeat."""

    def __init__(self, context: activity.ActivityContext) -> None:
        self.context = context

    def info(self) -> activity.Info:
        return self.context.info

    def heartbeat(self, *details: Any) -> None:
        self.context.record_heartbeat(details)


def _log_failure(task: dict[str, Any], error: BaseException) -> None:
    """An attempt's failure, at WARNING; at DEBUG for a BENIGN application error (an expected outcome)."""
    benign = getattr(error, "category", None) == ApplicationErrorCategory.BENIGN
    log.log(
        logging.DEBUG if benign else logging.WARNING,
        "activity %s (%s) attempt %s failed: %s",
        task.get("activity_id"),
        (task.get("activity_type") or {}).get("name"),
        task.get("attempt"),
        error,
        extra={"__temporal_error_identifier": "ActivityFailure"},
    )


def _retry_delay(policy: RetryPolicy, attempt: int, error: BaseException) -> float | None:
    """Seconds before the next attempt, or None when the policy says stop."""
    if isinstance(error, ApplicationError) and (
        error.non_retryable or error.type in (policy.non_retryable_error_types or ())
    ):
        return None
    if policy.maximum_attempts and attempt >= policy.maximum_attempts:
        return None
    if isinstance(error, ApplicationError) and error.next_retry_delay is not None:
        return float(error.next_retry_delay)
    delay = policy.initial_interval.total_seconds() * policy.backoff_coefficient ** (attempt - 1)
    if policy.maximum_interval is not None:
        delay = min(delay, policy.maximum_interval.total_seconds())
    return delay


def _info(task: dict[str, Any], task_queue: str, converter: DataConverter) -> activity.Info:
    execution = task.get("workflow_execution") or {}
    return activity.Info(
        activity_id=task["activity_id"],
        activity_type=task["activity_type"]["name"],
        attempt=int(task.get("attempt") or 1),
        task_token=task_token_for(task_queue, task["task_token"]),
        task_queue=task.get("task_queue") or task_queue,
        workflow_id=execution.get("workflow_id", ""),
        workflow_run_id=execution.get("run_id", ""),
        workflow_type=(task.get("workflow_type") or {}).get("name", ""),
        workflow_namespace=task.get("workflow_namespace", ""),
        heartbeat_details=converter.from_payloads(task.get("heartbeat_details") or []),
        scheduled_time=_time(task.get("scheduled_time")),
        current_attempt_scheduled_time=_time(task.get("current_attempt_scheduled_time")),
        started_time=_time(task.get("started_time")),
        schedule_to_close_timeout=_seconds(task.get("schedule_to_close_timeout")),
        start_to_close_timeout=_seconds(task.get("start_to_close_timeout")),
        heartbeat_timeout=_seconds(task.get("heartbeat_timeout")),
    )
