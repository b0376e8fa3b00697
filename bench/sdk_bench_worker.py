"""The Chronicle side of the SDK benchmark: the workflows, and a worker process hosting them.

Run as ``python bench/sdk_bench_worker.py`` with CHRONICLE_URL, CHRONICLE_NAMESPACE,
CHRONICLE_API_KEY and TASK_QUEUE set; SIGTERM shuts the worker down gracefully. With
BENCH_PROFILE=path the worker runs under cProfile and writes its stats there on exit.

``python bench/sdk_bench_worker.py --drive [plan options]`` is an application process
instead: the worker runs in it, and the process itself starts the workloads with eager
start (the first workflow task comes back in the start response, as DBOS runs a workflow
in the process that starts it); the figures go to stdout as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from sdk_bench_workloads import Plan, measure

from sdk import activity, workflow
from sdk.client import Client
from sdk.worker import Worker

STEP_TIMEOUT = timedelta(seconds=30)


@activity.defn(name="bench_step")
async def bench_step(i: int) -> int:
    """The work of one step: none, so the figures are the system's own cost."""
    return i


@workflow.defn(name="OneStep")
class OneStep:
    @workflow.run
    async def run(self) -> int:
        result: int = await workflow.execute_activity(bench_step, 1, start_to_close_timeout=STEP_TIMEOUT)
        return result


@workflow.defn(name="OneLocalStep")
class OneLocalStep:
    @workflow.run
    async def run(self) -> int:
        result: int = await workflow.execute_local_activity(
            bench_step, 1, start_to_close_timeout=STEP_TIMEOUT
        )
        return result


@workflow.defn(name="TenSteps")
class TenSteps:
    @workflow.run
    async def run(self) -> int:
        total = 0
        for i in range(10):
            total += await workflow.execute_activity(bench_step, i, start_to_close_timeout=STEP_TIMEOUT)
        return total


@workflow.defn(name="SleepUntil")
class SleepUntil:
    @workflow.run
    async def run(self, due: float) -> float:
        """Sleep until ``due`` (epoch seconds); return how late the wake-up task started."""
        await workflow.sleep(max(0.001, due - workflow.now().timestamp()))
        return workflow.now().timestamp() - due


WORKFLOWS = [OneStep, OneLocalStep, TenSteps, SleepUntil]


class ChronicleSystem:
    """The workloads through the SDK client, as an application would call them."""

    def __init__(self, client: Client, task_queue: str, *, eager_start: bool = False) -> None:
        self.client = client
        self.task_queue = task_queue
        self.eager_start = eager_start

    async def _start(self, workflow: str, key: str, *args: Any) -> Any:
        return await self.client.start_workflow(
            workflow, args=args, id=key, task_queue=self.task_queue, request_eager_start=self.eager_start
        )

    async def _execute(self, workflow: str, key: str) -> None:
        """Start and wait as an application would: ``execute_workflow``, one call whose answer
        carries the close (with eager start the start answers at once and ``result()`` waits)."""
        await self.client.execute_workflow(
            workflow, id=key, task_queue=self.task_queue, request_eager_start=self.eager_start
        )

    async def one_step(self, key: str) -> None:
        await self._execute("OneStep", key)

    async def one_local_step(self, key: str) -> None:
        await self._execute("OneLocalStep", key)

    async def ten_steps(self, key: str) -> None:
        await self._execute("TenSteps", key)

    async def start_sleep(self, key: str, due: float) -> Callable[[], Awaitable[float]]:
        handle = await self._start("SleepUntil", key, due)

        async def lateness() -> float:
            value: float = await handle.result()
            return value

        return lateness


async def connect() -> Client:
    return await Client.connect(
        os.environ["CHRONICLE_URL"],
        namespace=os.environ["CHRONICLE_NAMESPACE"],
        api_key=os.environ["CHRONICLE_API_KEY"],
    )


def bench_worker(client: Client) -> Worker:
    return Worker(
        client,
        task_queue=os.environ["TASK_QUEUE"],
        workflows=WORKFLOWS,
        activities=[bench_step],
        max_concurrent_workflow_task_polls=int(os.environ.get("BENCH_WORKFLOW_POLLS", "5")),
        nonsticky_to_sticky_poll_ratio=float(os.environ.get("BENCH_NONSTICKY_RATIO", "0.2")),
    )


async def serve() -> None:
    client = await connect()
    worker = bench_worker(client)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(worker.shutdown()))
    await worker.run()
    await client.close()


async def drive(plan: Plan) -> dict[str, Any]:
    """Worker and application in one process: the workloads with eager start."""
    client = await connect()
    try:
        async with bench_worker(client):
            system = ChronicleSystem(client, os.environ["TASK_QUEUE"], eager_start=True)
            return await measure(system, plan, log)
    finally:
        await client.close()


def log(message: str) -> None:
    print(f"[chronicle in-process {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_plan(argv: list[str]) -> Plan:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drive", action="store_true", required=True)
    Plan.add_arguments(parser)
    return Plan.from_arguments(parser.parse_args(argv))


def main(argv: list[str]) -> None:
    if argv:
        print(json.dumps(asyncio.run(drive(parse_plan(argv)))))
        return
    path = os.environ.get("BENCH_PROFILE")
    if not path:
        asyncio.run(serve())
        return
    profiler = cProfile.Profile()
    profiler.runcall(asyncio.run, serve())
    profiler.dump_stats(path)


if __name__ == "__main__":
    main(sys.argv[1:])
