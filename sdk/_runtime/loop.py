"""A deterministic asyncio event loop: no threads, no wall clock, timers become durable timers."""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, Protocol


class TimerSink(Protocol):
    """Where the loop sends timer starts and cancellations (the workflow instance)."""

    def start_timer(self, handle: asyncio.TimerHandle, delay: float) -> None: ...

    def cancel_timer(self, handle: asyncio.TimerHandle) -> None: ...


class DeterministicLoop(asyncio.AbstractEventLoop):
    """Runs ready callbacks until none are left; time only moves when history says so."""

    def __init__(self, sink: TimerSink) -> None:
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._sink = sink
        self._now = 0.0
        self._exception: BaseException | None = None

    def set_time(self, seconds: float) -> None:
        self._now = seconds

    def time(self) -> float:
        return self._now

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return True

    def is_closed(self) -> bool:
        return False

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(  # type: ignore[override]
        self,
        coro: Coroutine[Any, Any, Any],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        return asyncio.Task(coro, loop=self, name=name, context=context)

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: contextvars.Context | None = None
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        handle = asyncio.TimerHandle(self._now + delay, callback, args, self, context)
        if delay <= 0:
            self._ready.append(handle)
        else:
            self._sink.start_timer(handle, delay)
        return handle

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_later(when - self._now, callback, *args, context=context)

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        self._sink.cancel_timer(handle)

    def fire_timer(self, handle: asyncio.TimerHandle) -> None:
        if not handle.cancelled():
            self._ready.append(handle)

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, BaseException) and self._exception is None:
            self._exception = exc

    def run_until_blocked(self, after_each_pass: Callable[[], bool]) -> None:
        """Run callbacks until none are ready; ``after_each_pass`` may make more ready."""
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        try:
            while True:
                while self._ready:
                    handle = self._ready.popleft()
                    if not handle.cancelled():
                        handle._run()
                if not after_each_pass() and not self._ready:
                    break
        finally:
            asyncio.events._set_running_loop(previous)
        if self._exception is not None:
            exc, self._exception = self._exception, None
            raise exc
