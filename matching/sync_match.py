"""Sync match: a start hands its run's first workflow task to a poll waiting in this process.

Temporal's matching hands a task straight to a poller that is already waiting, without
storing it first. Here a workflow-task poll that found its queue empty registers while it
waits; a start on that queue in the same frontend process takes the longest-waiting poll,
starts the run's first task for it in the start's own transaction (as an eager start does
for its caller: no task row, no wake-up) and gives it the task once committed. The poll
answers at once: no notification round trip, no claim transaction, one commit where there
were two. A poll in another process is not seen; its task goes through the queue as before.

A taken poll that goes away before the task reaches it leaves a started task nobody has:
it times out after the run's task timeout and is dispatched again, as a lost answer
would be. Only unversioned polls of queues without a dispatch rate limit register (a
limit takes a token per task, which the start does not). Thread-safe: polls register on
the event loop, starts take them on the pool's threads.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

# A task's way to its poll, after the start committed; how long a taken poll waits for it.
HANDOFF_SECONDS = 10.0

Task = dict[str, Any]


@dataclass(eq=False)
class WaitingPoll:
    """A poll waiting in this process, and the future its task (or None) arrives on."""

    identity: str
    loop: asyncio.AbstractEventLoop
    delivered: asyncio.Future[Task | None] = field(init=False)
    taken: bool = False

    def __post_init__(self) -> None:
        self.delivered = self.loop.create_future()

    def deliver(self, task: Task | None) -> None:
        """Give the poll its task (None: the start did not start one); from any thread."""
        self.loop.call_soon_threadsafe(_settle, self.delivered, task)


def _settle(future: asyncio.Future[Task | None], task: Task | None) -> None:
    if not future.done():
        future.set_result(task)


class WaitingPolls:
    """The polls of this process waiting for a workflow task, per wake-up key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[WaitingPoll]] = defaultdict(list)

    def register(self, key: str, identity: str) -> WaitingPoll:
        poll = WaitingPoll(identity, asyncio.get_running_loop())
        with self._lock:
            self._waiting[key].append(poll)
        return poll

    def take(self, key: str) -> WaitingPoll | None:
        """The longest-waiting poll of ``key``, now promised the next task; None if none."""
        with self._lock:
            waiting = self._waiting.get(key)
            while waiting:
                poll = waiting.pop(0)
                if not poll.delivered.done():
                    poll.taken = True
                    return poll
            self._waiting.pop(key, None)
        return None

    def waiting(self, key: str) -> int:
        """How many polls of ``key`` are on offer now."""
        with self._lock:
            return len(self._waiting.get(key, ()))

    def withdraw(self, key: str, poll: WaitingPoll) -> bool:
        """Stop offering ``poll``; False when a start has taken it (its task is coming)."""
        with self._lock:
            if poll.taken:
                return False
            waiting = self._waiting.get(key)
            if waiting is not None and poll in waiting:
                waiting.remove(poll)
                if not waiting:
                    del self._waiting[key]
            return True


waiting_polls = WaitingPolls()
