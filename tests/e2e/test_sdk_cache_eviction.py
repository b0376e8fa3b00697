"""A worker whose workflow cache holds one run still completes many interleaved runs.

With ``max_cached_workflows=1`` nearly every task arrives for an evicted run, so the
worker must rebuild each one by replaying its full history, timers and signals included.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from functools import partial

from sdk import workflow
from sdk.client import Client, WorkflowHandle
from sdk.worker import Worker
from tests.conftest import Stack, Tenant

ROUNDS = 3
RUNS = 5


@workflow.defn
class Tally:
    """Per round: a short durable timer, then wait for that round's ``add`` signal."""

    def __init__(self) -> None:
        self.added: list[int] = []

    @workflow.run
    async def run(self, label: str) -> str:
        for round_number in range(ROUNDS):
            await workflow.sleep(timedelta(milliseconds=50))
            await workflow.wait_condition(partial(self._received, round_number + 1))
        return f"{label}={sum(self.added)} from {self.added}"

    def _received(self, count: int) -> bool:
        return len(self.added) >= count

    @workflow.signal
    def add(self, amount: int) -> None:
        self.added.append(amount)


def test_a_one_run_cache_completes_interleaved_runs_with_timers_and_signals(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> list[str]:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        async with Worker(client, task_queue=queue, workflows=[Tally], max_cached_workflows=1):
            handles: list[WorkflowHandle] = [
                await client.start_workflow(
                    Tally.run, f"run{i}", id=f"wf-{uuid.uuid4().hex[:8]}", task_queue=queue
                )
                for i in range(RUNS)
            ]
            for round_number in range(ROUNDS):
                for i, handle in enumerate(handles):
                    await handle.signal(Tally.add, 10 * i + round_number)
            results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
        await client.close()
        return list(results)

    expected = [
        f"run{i}={sum(10 * i + r for r in range(ROUNDS))} from {[10 * i + r for r in range(ROUNDS)]}"
        for i in range(RUNS)
    ]
    assert asyncio.run(scenario()) == expected
