"""``ActivityEnvironment``: run one activity function outside a worker, as Temporal's does.

The function runs with an activity context of its own (``activity.info()``,
``heartbeat()``, ``is_cancelled()``, ``client()``), so it can be unit-tested without a
server. Heartbeats go to ``on_heartbeat``; ``cancel()`` cancels it the way a worker does: an
async activity's task gets ``asyncio.CancelledError``, a sync activity's next
``activity.heartbeat()`` raises ``CancelledError`` (and ``is_cancelled()`` turns true).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sdk import activity
from sdk.converter import DefaultPayloadConverter, PayloadConverter

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CANCEL_REQUESTED = activity.ActivityCancellationDetails(cancel_requested=True)


def _ignore_heartbeat(*details: Any) -> None:
    """The default ``on_heartbeat``: heartbeats go nowhere."""


class _Run:
    """One ``run``: its activity context and how to cancel it."""

    def __init__(self, env: ActivityEnvironment, fn: Callable[..., Any]) -> None:
        definition = getattr(fn, "__chronicle_activity_definition__", None)
        self.is_async = asyncio.iscoroutinefunction(fn)
        self.context = activity.ActivityContext(
            info=env.info,
            heartbeat_sink=lambda details: env.on_heartbeat(*details),
            client=None if not self.is_async else env._client,
            payload_converter=env.payload_converter,
            in_thread=not self.is_async,
            raise_on_heartbeat=not self.is_async
            and not getattr(definition, "no_thread_cancel_exception", False),
        )
        if env._worker_shutdown:
            self.context.worker_shutdown.set()
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def bound(self) -> contextvars.Context:
        """A copy of the caller's context with this activity set as current."""
        bound = contextvars.copy_context()
        bound.run(activity.set_context, self.context)
        return bound

    def cancel(self, reason: str) -> None:
        self.context.request_cancel(reason)
        if self.task is None or self.loop is None or self.task.done():
            return
        if _running_loop() is self.loop:
            self.task.cancel()
        else:
            self.loop.call_soon_threadsafe(self.task.cancel)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class ActivityEnvironment:
    """Runs activity functions with an activity context and no worker or server.

    Set ``info`` (``dataclasses.replace(ActivityEnvironment.default_info(), ...)``),
    ``on_heartbeat`` and ``payload_converter`` before ``run``. ``client`` is what
    ``activity.client()`` returns in an async activity (a sync one never has one).
    """

    def __init__(self, client: Any | None = None) -> None:
        self.info = ActivityEnvironment.default_info()
        self.on_heartbeat: Callable[..., None] = _ignore_heartbeat
        self.payload_converter: PayloadConverter = DefaultPayloadConverter()
        self._client = client
        self._cancel_reason: str | None = None
        self._worker_shutdown = False
        self._runs: list[_Run] = []
        self._lock = threading.Lock()

    @staticmethod
    def default_info() -> activity.Info:
        """The info an activity sees unless ``info`` is replaced (Temporal's test values)."""
        return activity.Info(
            activity_id="test",
            activity_type="unknown",
            attempt=1,
            task_token=b"test",
            task_queue="test",
            workflow_id="test",
            workflow_run_id="test-run",
            workflow_type="test",
            workflow_namespace="default",
            heartbeat_details=[],
            scheduled_time=_EPOCH,
            current_attempt_scheduled_time=_EPOCH,
            started_time=_EPOCH,
            schedule_to_close_timeout=timedelta(seconds=1),
            start_to_close_timeout=timedelta(seconds=1),
            heartbeat_timeout=None,
        )

    def cancel(
        self,
        cancellation_details: activity.ActivityCancellationDetails = CANCEL_REQUESTED,
    ) -> None:
        """Cancel the running activity (and any started later from this environment)."""
        with self._lock:
            if self._cancel_reason is not None:
                return
            self._cancel_reason = "Activity cancelled"
            runs = list(self._runs)
        for run in runs:
            run.cancel(self._cancel_reason)

    def worker_shutdown(self) -> None:
        """Tell the activity its worker is shutting down (``activity.is_worker_shutdown()``)."""
        with self._lock:
            self._worker_shutdown = True
            runs = list(self._runs)
        for run in runs:
            run.context.worker_shutdown.set()

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` as an activity: a sync function runs now, in this thread, and its result
        is returned; an async one gives an awaitable of its result, as in Temporal."""
        run = _Run(self, fn)
        with self._lock:
            self._runs.append(run)
            if self._cancel_reason is not None:
                run.context.request_cancel(self._cancel_reason)
        if run.is_async:
            return self._run_async(run, fn, args, kwargs)
        try:
            return run.bound().run(fn, *args, **kwargs)
        finally:
            self._forget(run)

    async def _run_async(
        self,
        run: _Run,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        async def body() -> Any:
            return await fn(*args, **kwargs)

        run.loop = asyncio.get_running_loop()
        run.task = asyncio.create_task(body(), context=run.bound())
        if run.context.cancelled.is_set():
            run.task.cancel()
        try:
            return await run.task
        finally:
            self._forget(run)

    def _forget(self, run: _Run) -> None:
        with self._lock:
            self._runs.remove(run)
