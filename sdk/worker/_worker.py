"""The Worker: polls a task queue and runs the workflows and activities registered on it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from sdk._http import NotFoundError
from sdk._worker_interceptor import Interceptor
from sdk.client import Client
from sdk.exceptions import RPCError
from sdk.worker._activities import REPORT_BACKOFF_MAX, ActivityRunner
from sdk.worker._reports import ReportBatcher
from sdk.worker._shared_state import SharedStateManager
from sdk.worker._workflows import WorkflowRunner as WorkflowTaskRunner
from sdk.worker.workflow_sandbox import UnsandboxedWorkflowRunner, WorkflowRunner

log = logging.getLogger("sdk.worker")

POLL_TIMEOUT_SECONDS = 30.0
# The most tasks one poll asks for (the server's limit is 32).
MAX_TASKS_PER_POLL = 8
# Once shutdown is asked for, an outcome the server cannot take is retried this long, then
# given up: the server retries the task after its timeout, so nothing is lost, and a
# worker stopping while the server is down does not hang.
SHUTDOWN_REPORT_GRACE = timedelta(seconds=10)


# Temporal's Worker options with nothing to configure here (no gRPC, no sandbox, no tuners).
TEMPORAL_WORKER_OPTIONS = frozenset(
    {
        "activity_task_poller_behavior", "debug_mode", "deployment_config",
        "disable_safe_workflow_eviction", "graceful_shutdown_timeout",
        "max_activities_per_second", "max_concurrent_local_activities",
        "max_task_queue_activities_per_second", "no_remote_activities", "on_fatal_error",
        "plugins", "tuner", "workflow_task_executor",
        "workflow_task_poller_behavior",
    }
)  # fmt: skip


def _refuse_unknown(what: str, given: dict[str, Any], known: frozenset[str]) -> None:
    """Temporal's options are accepted; a misspelt one is an error, not silently dropped."""
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(f"{what}() got unexpected keyword argument(s): {', '.join(unknown)}")


class Worker:
    """Runs registered workflows and activities for one task queue until shut down."""

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str,
        workflows: Sequence[type] = (),
        activities: Sequence[Callable[..., Any]] = (),
        activity_executor: concurrent.futures.Executor | None = None,
        max_concurrent_activities: int = 100,
        max_concurrent_workflow_tasks: int = 100,
        max_cached_workflows: int = 1000,
        max_concurrent_workflow_task_polls: int = 5,
        nonsticky_to_sticky_poll_ratio: float = 0.2,
        max_concurrent_activity_task_polls: int = 5,
        identity: str | None = None,
        sticky_queue_schedule_to_start_timeout: timedelta = timedelta(seconds=10),
        max_heartbeat_throttle_interval: timedelta = timedelta(seconds=60),
        default_heartbeat_throttle_interval: timedelta = timedelta(seconds=30),
        max_eager_activity_reservations_per_workflow_task: int = 3,
        disable_eager_activity_execution: bool = False,
        build_id: str | None = None,
        use_worker_versioning: bool = False,
        shutdown_report_grace: timedelta = SHUTDOWN_REPORT_GRACE,
        workflow_failure_exception_types: Sequence[type[BaseException]] = (),
        determinism_guard: bool = True,
        shared_state_manager: SharedStateManager | None = None,
        workflow_runner: WorkflowRunner | None = None,
        unsandboxed_workflow_runner: WorkflowRunner | None = None,
        interceptors: Sequence[Interceptor] = (),
        **_temporal_options: Any,
    ) -> None:
        """``build_id`` names this worker's code; it is recorded on the workflow tasks it runs.

        With ``use_worker_versioning`` the worker takes only tasks of runs pinned to its
        build (a namespace admin sets the queue's current build; new runs are pinned to it).

        An exception whose type is in ``workflow_failure_exception_types`` fails the run
        instead of its workflow task (as ``@workflow.defn(failure_exception_types=...)`` does
        for one workflow). ``determinism_guard`` makes wall clocks, randomness and blocking
        I/O raise in workflow code (``sdk.worker.workflow_sandbox`` explains; there is no
        sandbox, so the runner options are accepted and change nothing). ``interceptors``
        (``sdk.worker.Interceptor``) wrap the activities and workflows run here, after the
        client's own interceptors that are worker interceptors too. Temporal's other options
        (``plugins``, ``debug_mode``, tuners, ...) are accepted and have nothing to configure
        here.
        """
        _refuse_unknown("Worker", _temporal_options, TEMPORAL_WORKER_OPTIONS)
        if not workflows and not activities:
            raise ValueError("a worker needs at least one workflow or activity")
        if use_worker_versioning and not build_id:
            raise ValueError("build_id must be specified when use_worker_versioning is True")
        self.client = client
        self.task_queue = task_queue
        self.identity = identity or client.identity
        self.max_concurrent_activities = max_concurrent_activities
        self.max_concurrent_workflow_tasks = max_concurrent_workflow_tasks
        self.max_cached_workflows = max_cached_workflows
        if max_concurrent_workflow_task_polls < 1 or max_concurrent_activity_task_polls < 1:
            raise ValueError("a worker needs at least one poll of each kind")
        self.max_concurrent_workflow_task_polls = max_concurrent_workflow_task_polls
        self.nonsticky_to_sticky_poll_ratio = nonsticky_to_sticky_poll_ratio
        self.max_concurrent_activity_task_polls = max_concurrent_activity_task_polls
        self.sticky_schedule_to_start_timeout = sticky_queue_schedule_to_start_timeout
        self.max_heartbeat_throttle_interval = max_heartbeat_throttle_interval.total_seconds()
        self.default_heartbeat_throttle_interval = default_heartbeat_throttle_interval.total_seconds()
        self.max_eager_activity_reservations = (
            0 if disable_eager_activity_execution else max_eager_activity_reservations_per_workflow_task
        )
        self.build_id = build_id
        self.use_worker_versioning = use_worker_versioning
        self.workflow_failure_exception_types = tuple(workflow_failure_exception_types)
        self.determinism_guard = determinism_guard
        self.workflow_runner_option = workflow_runner or UnsandboxedWorkflowRunner()
        # Temporal's order: the client's worker interceptors, then this worker's; first outermost.
        given = getattr(client, "interceptors", ())
        self.interceptors = [i for i in given if isinstance(i, Interceptor)] + list(interceptors)
        self.activities = (
            ActivityRunner(self, activities, activity_executor, shared_state_manager) if activities else None
        )
        self.workflow_runner = WorkflowTaskRunner(self, workflows) if workflows else None
        self._stopping = asyncio.Event()
        self._pollers: list[asyncio.Task[None]] = []
        self._done = asyncio.Event()
        self.shutdown_report_grace = shutdown_report_grace.total_seconds()
        self._abandon_reports = asyncio.Event()
        self._reports = ReportBatcher(client.transport, f"/task-queues/{quote(task_queue, safe='')}/")

    async def run(self) -> None:
        """Poll until :meth:`shutdown`; then finish what is in flight and return (a worker runs once)."""
        if self.activities is not None:
            for _ in range(self.max_concurrent_activity_task_polls):
                self._pollers.append(asyncio.create_task(self.activities.poll_loop(self._stopping)))
        self._pollers.extend(self._workflow_pollers())
        if self.workflow_runner is not None:
            self.client.register_eager_runner(self.task_queue, self.workflow_runner)
        log.info("worker %s polling task queue %r", self.identity, self.task_queue)
        try:
            await self._stopping.wait()
        finally:
            if self.workflow_runner is not None:
                self.client.unregister_eager_runner(self.task_queue, self.workflow_runner)
            for poller in self._pollers:
                poller.cancel()
            await asyncio.gather(*self._pollers, return_exceptions=True)
            self._pollers.clear()
            if self.workflow_runner is not None:
                await self.workflow_runner.drain()
            if self.activities is not None:
                await self.activities.drain()
            self._done.set()

    def _workflow_pollers(self) -> list[asyncio.Task[None]]:
        return self.workflow_runner.pollers(self._stopping) if self.workflow_runner else []

    async def shutdown(self) -> None:
        """Stop polling, wait for in-flight tasks to finish and report."""
        self._stopping.set()
        if self.activities is not None:
            self.activities.shutting_down.set()
        asyncio.get_running_loop().call_later(self.shutdown_report_grace, self._abandon_reports.set)
        if self._pollers:
            await self._done.wait()

    async def __aenter__(self) -> Worker:
        self._runner = asyncio.create_task(self.run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()
        await self._runner

    @staticmethod
    def poll_share(slots: int, polls: int) -> int:
        """How many tasks each of ``polls`` concurrent polls may ask for from ``slots``: an
        even part of half of them, at least one, at most :data:`MAX_TASKS_PER_POLL`.

        The other half stay free while the polls wait, for the tasks handed over without
        a poll (an eager start's first task, eager activities, the workflow task an
        activity's result brings back), which a worker with no free slot refuses, each then
        costing a call more."""
        return max(1, min(MAX_TASKS_PER_POLL, slots // (2 * max(1, polls))))

    async def poll_loop(
        self,
        path: str,
        slots: asyncio.Semaphore,
        start: Callable[[dict[str, Any]], None],
        what: str,
        stopping: asyncio.Event,
        share: int,
    ) -> None:
        """Long-poll ``path`` while a slot is free, asking for as many tasks as slots are
        free (up to ``share``), and ``start`` each task on its slot.

        A burst (many timers firing at once, a fan-out's results) then arrives in a few
        calls instead of one call per task; an idle queue costs one waiting poll as before.
        ``share`` is this poll's part of the slots (:meth:`poll_share`): a poll holds the
        slots it asks for while it waits, and one that held every free slot kept its
        siblings from polling, so a queue with no poll of its own waited for that poll's
        timeout. Outages are retried with backoff, so a worker keeps polling through them.
        """
        failures = 0
        while not stopping.is_set():
            await slots.acquire()
            held = 1
            while held < share and not slots.locked():
                await slots.acquire()  # free: returns at once
                held += 1
            tasks: list[dict[str, Any]] = []
            error: Exception | None = None
            try:
                tasks = await self._poll(path, stopping, held)
                failures = 0
            except (RPCError, httpx.TransportError) as exc:
                error = exc
            finally:
                for _ in range(held - len(tasks)):
                    slots.release()
            if error is not None:
                failures += 1
                await self.backoff(what, error, failures, stopping)
            for task in tasks:
                start(task)

    async def _poll(self, path: str, stopping: asyncio.Event, max_tasks: int) -> list[dict[str, Any]]:
        """One long poll for up to ``max_tasks`` tasks; none when it timed out empty or the
        worker is stopping."""
        if stopping.is_set():
            return []
        body: dict[str, Any] = {
            "identity": self.identity,
            "timeout": POLL_TIMEOUT_SECONDS,
            "max_tasks": max_tasks,
        }
        if self.version_stamp is not None:
            body["worker_version_capabilities"] = self.version_stamp
        answer = await self.client.transport.post(
            path,
            body,
            idempotent=False,
            timeout=POLL_TIMEOUT_SECONDS + 30,
        )
        if not answer:
            return []
        return list(answer["tasks"]) if "tasks" in answer else [answer]

    @property
    def version_stamp(self) -> dict[str, Any] | None:
        """The build this worker reports on polls and completions, if it has one."""
        if not self.build_id:
            return None
        return {"build_id": self.build_id, "use_versioning": self.use_worker_versioning}

    async def backoff(self, what: str, exc: BaseException, failures: int, stopping: asyncio.Event) -> None:
        """Wait before retrying: 0.1 s after a first failure (a dropped connection), doubling to 30 s."""
        delay = min(REPORT_BACKOFF_MAX, 0.1 * 2 ** min(failures - 1, 9)) * (0.5 + random.random() / 2)
        log.warning("%s failed (%s: %s); retrying in %.1fs", what, type(exc).__name__, exc, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), delay)

    async def report(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Deliver a task's outcome, retrying until the server takes it or refuses the token,
        or, once shutting down, until the shutdown grace has passed."""
        body = {key: value for key, value in body.items() if value is not None}  # the API refuses nulls
        failures = 0
        while True:
            if self._abandon_reports.is_set():
                log.warning(
                    "shutting down with the server unreachable: the outcome for %s is not reported;"
                    " the server retries the task after its timeout",
                    path,
                )
                return None
            try:
                return await self._reports.post(path, body)
            except NotFoundError as exc:
                log.warning("server refused the task token (%s); dropping the outcome", exc.message)
                return None
            except RPCError as exc:
                if exc.status < 500 and exc.status != 429:
                    log.error("server rejected the report to %s: %s %s", path, exc.message, exc.details)
                    return None
                failures += 1
                await self.backoff(f"report to {path}", exc, failures, self._abandon_reports)
            except httpx.TransportError as exc:
                failures += 1
                await self.backoff(f"report to {path}", exc, failures, self._abandon_reports)
