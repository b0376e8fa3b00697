"""Sync activities in a process pool: what they share with their worker, through a manager.

A thread-pool activity shares the worker's memory: its cancel flag and heartbeats are plain
objects. An activity in another process (``activity_executor=ProcessPoolExecutor(...)``)
reaches them through ``SharedStateManager`` (Temporal's name), which a
``multiprocessing.Manager()`` backs: the cancel flag is a managed event the worker sets and
the activity's heartbeats travel back on a managed queue, which the worker forwards to the
server as its own heartbeats.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import queue
from collections.abc import Callable, Sequence
from multiprocessing.managers import SyncManager
from typing import Any

from sdk import activity

HEARTBEAT_POLL_SECONDS = 0.2


class SharedStateManager:
    """Cancel flags and heartbeat queues shared with activities in other processes."""

    def __init__(self, manager: SyncManager) -> None:
        self._manager = manager

    @staticmethod
    def create_from_multiprocessing(
        mgr: SyncManager, queue_poller_executor: concurrent.futures.Executor | None = None
    ) -> SharedStateManager:
        """From a started ``multiprocessing.Manager()``; ``queue_poller_executor`` is accepted
        for Temporal's signature (heartbeats are polled on the event loop's default executor)."""
        return SharedStateManager(mgr)

    def new_event(self) -> Any:
        return self._manager.Event()

    def new_queue(self) -> Any:
        return self._manager.Queue()


def _in_process(
    fn: Callable[..., Any], args: Sequence[Any], context_fields: dict[str, Any], cancelled: Any, beats: Any
) -> Any:
    """Runs in the pool's process: the activity, with a context whose heartbeats go to the queue."""
    context = activity.ActivityContext(heartbeat_sink=beats.put, cancelled=cancelled, **context_fields)
    token = activity.set_context(context)
    try:
        return fn(*args)
    finally:
        activity._current.reset(token)


async def _forward_heartbeats(beats: Any, context: activity.ActivityContext) -> None:
    """Hand the activity's heartbeats to the worker's throttled sender, as they arrive."""
    loop = asyncio.get_running_loop()
    while True:
        with contextlib.suppress(queue.Empty):
            details = await loop.run_in_executor(
                None, functools.partial(beats.get, True, HEARTBEAT_POLL_SECONDS)
            )
            context.heartbeat_sink(details)


async def run_in_process(
    executor: concurrent.futures.Executor,
    shared: SharedStateManager,
    fn: Callable[..., Any],
    args: Sequence[Any],
    context: activity.ActivityContext,
) -> Any:
    """Run a sync activity in ``executor``'s process, its cancel flag and heartbeats shared."""
    cancelled = shared.new_event()
    if context.cancelled.is_set():
        cancelled.set()
    context.cancelled = cancelled  # the worker's request_cancel() now reaches the process
    beats = shared.new_queue()
    fields = {"info": context.info, "in_thread": True, "raise_on_heartbeat": context.raise_on_heartbeat}
    loop = asyncio.get_running_loop()
    forwarding = asyncio.create_task(_forward_heartbeats(beats, context))
    try:
        return await loop.run_in_executor(executor, _in_process, fn, list(args), fields, cancelled, beats)
    finally:
        forwarding.cancel()
