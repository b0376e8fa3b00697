"""Waking this worker's sleeping runs when their timers fall due, with one sticky poll.

A run this worker holds (cached, sticky to it) that sleeps wakes on the usual path in three
writes on the server: the shard owner fires the timer and queues the run's next task on
this worker's sticky queue, a sticky poll claims it, and the completion follows. The
worker knows when that timer falls due: its ``TimerStarted`` event came back with the
completion that started it (``recorded_events``). So at that instant it polls its sticky
queue naming the runs whose timers are due (``due_timers``, a batch at a time), and the
server fires those due by its clock and hands the woken tasks to that poll in one
transaction: no task row, no wake-up, no claim of its own.

It is only a shortcut: the shard owner fires every timer on time whoever asks, and a task
it wakes first reaches this worker's waiting sticky polls as before. A poll that finds
nothing due (the owner was first, the timer was cancelled, the clocks differ by a hair)
costs one call and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from sdk.exceptions import RPCError

if TYPE_CHECKING:
    from sdk.worker._workflows import WorkflowRunner

log = logging.getLogger("sdk.worker.workflow")

# After the due instant, so that the server's clock has passed it too.
SLACK_SECONDS = 0.003
# Runs named in one poll (the server's most tasks per poll).
MAX_RUNS_PER_POLL = 32
# How long the poll may take: it does not wait for tasks, only for its own write.
POLL_TIMEOUT_SECONDS = 0.5


class DueTimers:
    """When the timers of this worker's cached runs fall due, and the polls that wake them."""

    def __init__(self, runner: WorkflowRunner) -> None:
        self.runner = runner
        self._due: dict[str, float] = {}  # run id -> its earliest known due instant (epoch s)
        self._armed_at: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._polls: set[asyncio.Task[None]] = set()

    def note(self, run_id: str, events: Any) -> None:
        """Keep the due instants of the timers a completion's recorded events started."""
        if not isinstance(events, list):
            return
        for event in events:
            due = _due_instant(event)
            if due is not None:
                self._due[run_id] = min(due, self._due.get(run_id, due))
        if len(self._due) > 2 * max(1, self.runner.worker.max_cached_workflows):
            self._due = {run: at for run, at in self._due.items() if run in self.runner.cache}
        self._arm()

    def _arm(self) -> None:
        """Wake up at the earliest due instant (once armed sooner, nothing to do)."""
        earliest = min(self._due.values(), default=None)
        if earliest is None or (self._armed_at is not None and self._armed_at <= earliest):
            return
        if self._handle is not None:
            self._handle.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, earliest - time.time()) + SLACK_SECONDS
        self._armed_at, self._handle = earliest, loop.call_later(delay, self._wake)

    def _wake(self) -> None:
        """Poll for the runs whose timers are due now (those still cached here)."""
        self._armed_at = self._handle = None
        now = time.time()
        due = [run for run, at in self._due.items() if at <= now]
        for run in due:
            del self._due[run]
        due = [run for run in due if run in self.runner.cache]
        if not self.runner.worker.stopping:
            for start in range(0, len(due), MAX_RUNS_PER_POLL):
                polling = asyncio.create_task(self._poll(due[start : start + MAX_RUNS_PER_POLL]))
                self._polls.add(polling)
                polling.add_done_callback(self._polls.discard)
        self._arm()

    async def close(self) -> None:
        """Stop waking (the worker is stopping) and let the polls in flight finish."""
        if self._handle is not None:
            self._handle.cancel()
        self._armed_at = self._handle = None
        if self._polls:
            await asyncio.gather(*self._polls, return_exceptions=True)

    async def _poll(self, runs: list[str]) -> None:
        """One sticky poll naming ``runs``, on as many free slots as there are runs (one at
        least); the woken tasks run on them like any polled task."""
        slots = self.runner.slots
        await slots.acquire()
        held = 1
        while held < len(runs) and not slots.locked():
            await slots.acquire()
            held += 1
        tasks: list[dict[str, Any]] = []
        path = f"/task-queues/{quote(self.runner.sticky_queue, safe='')}/workflow-tasks/poll"
        try:
            body = {"max_tasks": held, "due_timers": runs, "timeout": POLL_TIMEOUT_SECONDS}
            tasks = await self.runner.worker.poll_once(path, body)
        except (RPCError, httpx.TransportError) as exc:  # the shard owner wakes them instead
            log.debug("polling for due timers failed (%s); the server fires them", exc)
        finally:
            for _ in range(held - len(tasks)):
                slots.release()
        for task in tasks:
            self.runner.run_reserved(task)


def _due_instant(event: Any) -> float | None:
    """A ``TimerStarted`` event's due instant: its time plus the timer's length."""
    if not isinstance(event, dict) or event.get("event_type") != "TimerStarted":
        return None
    try:
        started = datetime.fromisoformat(str(event["event_time"]).replace("Z", "+00:00"))
        return started.timestamp() + float(event["attributes"]["start_to_fire_timeout"])
    except (KeyError, TypeError, ValueError):
        return None
