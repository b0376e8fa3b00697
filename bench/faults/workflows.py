"""The fault harness's workflows and activities, and the SDK worker process that hosts them.

Run as ``python -m bench.faults.workflows`` with CHRONICLE_URL, CHRONICLE_NAMESPACE,
CHRONICLE_API_KEY, TASK_QUEUE and FAULTS_EFFECTS (a JSONL file) set. Each activity writes
a ``begin`` line before its work and an ``end`` line after it, flushed per line, so the
nemesis can kill this process while an activity is in flight (a SIGKILL loses nothing
already written) and the report can count physical executions.

The workflows are small on purpose: between them they use signals, activities that
heartbeat, user timers, a child and continue-as-new, the features whose histories the
checker replays. The nemesis adds its own: ``FaultsPoison`` (activities that always fail
or hang past their timeout), ``FaultsEcho`` (a payload at the namespace's limit, in and
out). ``FAULTS_VARIANT=reordered`` makes the process a bad deploy: its ``FaultsMixed``
runs the activity before the timer, the command order change a replay must refuse.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sdk import activity, workflow
from sdk.client import Client
from sdk.common import RetryPolicy
from sdk.exceptions import ActivityError, ApplicationError, TimeoutError
from sdk.worker import Worker

TOKEN_SIGNAL = "token"
FINISH_SIGNAL = "finish"
BLOB_SIGNAL = "blob"  # (token, data): a signal whose payload sits at the namespace's limit
REORDERED = "reordered"  # FAULTS_VARIANT of the bad deploy
STEP_RETRY = RetryPolicy(initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=2))
STEP_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=20),
    "heartbeat_timeout": timedelta(seconds=2),
    "retry_policy": STEP_RETRY,
}


def _effect(phase: str, key: str) -> None:
    """One line of this process's effect ledger (open, write, close: survives a SIGKILL)."""
    path = os.environ.get("FAULTS_EFFECTS")
    if not path:
        return
    info = activity.info()
    line = {"t": time.time(), "pid": os.getpid(), "phase": phase, "key": key, "attempt": info.attempt}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


@activity.defn(name="faults_step")
async def step(key: str, seconds: float) -> str:
    """Work that takes ``seconds`` and heartbeats, so a killed worker's attempt times out fast."""
    _effect("begin", key)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        activity.heartbeat()
        await asyncio.sleep(0.25)
    _effect("end", key)
    return key


@workflow.defn(name="FaultsMixed")
class Mixed:
    """Timers and activities in turn, collecting token signals until told to finish."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.finished = False

    @workflow.signal(name=TOKEN_SIGNAL)
    def token(self, value: str) -> None:
        self.tokens.append(value)

    @workflow.signal(name=FINISH_SIGNAL)
    def finish(self, value: str) -> None:
        self.finished = True

    @workflow.run
    async def run(self, steps: int, timer_seconds: float, work_seconds: float) -> int:
        wid = workflow.info().workflow_id
        for i in range(steps):
            await workflow.sleep(timer_seconds)
            await workflow.execute_activity(step, args=[f"{wid}/{i}", work_seconds], **STEP_OPTIONS)
        await workflow.wait_condition(lambda: self.finished)
        return len(self.tokens)


@workflow.defn(name="FaultsChild")
class Child:
    @workflow.run
    async def run(self, timer_seconds: float, work_seconds: float) -> str:
        await workflow.sleep(timer_seconds)
        key = f"{workflow.info().workflow_id}/0"
        result: str = await workflow.execute_activity(step, args=[key, work_seconds], **STEP_OPTIONS)
        return result


@workflow.defn(name="FaultsParent")
class Parent:
    """Runs one child to its end; the child's id is the parent's with ``-child``."""

    @workflow.run
    async def run(self, timer_seconds: float, work_seconds: float) -> str:
        child_id = f"{workflow.info().workflow_id}-child"
        result: str = await workflow.execute_child_workflow(
            Child.run, args=[timer_seconds, work_seconds], id=child_id
        )
        return result


@workflow.defn(name="FaultsChain")
class Chain:
    """A timer per run, then continue-as-new until ``hops`` runs are done; takes token signals."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    @workflow.signal(name=TOKEN_SIGNAL)
    def token(self, value: str) -> None:
        self.tokens.append(value)

    @workflow.run
    async def run(self, hops: int, timer_seconds: float) -> int:
        await workflow.sleep(timer_seconds)
        if hops > 1:
            workflow.continue_as_new(args=[hops - 1, timer_seconds])
        return hops


# A poison activity's policy: three attempts, fast backoff (Temporal's "maximum attempts").
POISON_ATTEMPTS = 3
POISON_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=0.2),
    maximum_interval=timedelta(seconds=0.5),
    maximum_attempts=POISON_ATTEMPTS,
)
HANG_TIMEOUT = timedelta(seconds=1)  # the hanging activity's start_to_close_timeout
HANG_ATTEMPTS = 2


@activity.defn(name="faults_always_fails")
async def always_fails(key: str) -> str:
    """A retryable failure on every attempt: the run sees it once the attempts are spent."""
    raise ApplicationError(f"{key}: attempt {activity.info().attempt} fails", type="FaultsPoison")


@activity.defn(name="faults_fails_non_retryable")
async def fails_non_retryable(key: str) -> str:
    """A non-retryable failure: one attempt, whatever the policy allows."""
    raise ApplicationError(f"{key}: refuses for good", type="FaultsPoison", non_retryable=True)


@activity.defn(name="faults_hangs")
async def hangs(seconds: float) -> str:
    """Sleeps past its start_to_close_timeout without a heartbeat (its late answer is refused)."""
    await asyncio.sleep(seconds)
    return "late"


def _outcome(exc: ActivityError) -> str:
    """What the run was told: the cause's kind (a timeout's type) and the retry state."""
    cause = exc.__cause__
    kind = type(cause).__name__
    if isinstance(cause, TimeoutError) and cause.type is not None:
        kind = f"{kind}:{cause.type.name}"
    return f"{kind}/{exc.retry_state.name if exc.retry_state else '-'}"


@workflow.defn(name="FaultsPoison")
class Poison:
    """Calls each poison activity and reports what each ended as; the run itself completes."""

    @workflow.run
    async def run(self, hang_seconds: float) -> dict[str, str]:
        key = workflow.info().workflow_id
        outcomes: dict[str, str] = {}
        calls: list[tuple[str, Any, list[Any], dict[str, Any]]] = [
            ("always_fails", always_fails, [key], {"retry_policy": POISON_RETRY}),
            ("non_retryable", fails_non_retryable, [key], {"retry_policy": POISON_RETRY}),
            (
                "hangs",
                hangs,
                [hang_seconds],
                {"retry_policy": RetryPolicy(maximum_attempts=HANG_ATTEMPTS)},
            ),
        ]
        for name, fn, args, options in calls:
            timeout = HANG_TIMEOUT if name == "hangs" else timedelta(seconds=10)
            try:
                await workflow.execute_activity(fn, args=args, start_to_close_timeout=timeout, **options)
                outcomes[name] = "completed"
            except ActivityError as exc:
                outcomes[name] = _outcome(exc)
        return outcomes


@workflow.defn(name="FaultsEcho")
class Echo:
    """Returns its input once a ``blob`` signal (or ``finish``) came: a payload in and out."""

    def __init__(self) -> None:
        self.done = False

    @workflow.signal(name=BLOB_SIGNAL)
    def blob(self, token: str, data: str) -> None:
        self.done = True

    @workflow.signal(name=FINISH_SIGNAL)
    def finish(self, value: str) -> None:
        self.done = True

    @workflow.run
    async def run(self, data: str) -> str:
        await workflow.wait_condition(lambda: self.done)
        return data


@workflow.defn(name="FaultsMixed")
class MixedReordered:
    """The bad deploy's ``FaultsMixed``: the activity before the timer in each step, with no
    ``patched()``; replaying a history the good code wrote must fail with nondeterminism."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.finished = False

    @workflow.signal(name=TOKEN_SIGNAL)
    def token(self, value: str) -> None:
        self.tokens.append(value)

    @workflow.signal(name=FINISH_SIGNAL)
    def finish(self, value: str) -> None:
        self.finished = True

    @workflow.run
    async def run(self, steps: int, timer_seconds: float, work_seconds: float) -> int:
        wid = workflow.info().workflow_id
        for i in range(steps):
            await workflow.execute_activity(step, args=[f"{wid}/{i}", work_seconds], **STEP_OPTIONS)
            await workflow.sleep(timer_seconds)
        await workflow.wait_condition(lambda: self.finished)
        return len(self.tokens)


WORKFLOWS: list[type] = [Mixed, Child, Parent, Chain, Poison, Echo]
ACTIVITIES: list[Callable[..., Any]] = [step, always_fails, fails_non_retryable, hangs]


def workflows_for(variant: str) -> list[type]:
    """The good code, or the bad deploy's (``FaultsMixed`` reordered)."""
    if variant == REORDERED:
        return [MixedReordered if w is Mixed else w for w in WORKFLOWS]
    return WORKFLOWS


async def serve() -> None:
    client = await Client.connect(
        os.environ["CHRONICLE_URL"],
        namespace=os.environ["CHRONICLE_NAMESPACE"],
        api_key=os.environ["CHRONICLE_API_KEY"],
    )
    worker = Worker(
        client,
        task_queue=os.environ["TASK_QUEUE"],
        workflows=workflows_for(os.environ.get("FAULTS_VARIANT", "")),
        activities=ACTIVITIES,
        max_concurrent_workflow_task_polls=2,
        max_concurrent_activity_task_polls=2,
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(worker.shutdown()))
    await worker.run()
    await client.close()


if __name__ == "__main__":
    asyncio.run(serve())
