"""Queries that reach the SDK worker while one of its workflow tasks is in flight."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client
from sdk.worker import Worker
from tests.conftest import Stack, Tenant

release_slow_step = threading.Event()


@activity.defn
def slow_step() -> str:
    """Keeps the workflow task in flight (a local activity) until the test lets it go."""
    release_slow_step.wait(timeout=20)
    return "slow step done"


@workflow.defn
class Counter:
    def __init__(self) -> None:
        self.bumps = 0
        self.done = False

    @workflow.run
    async def run(self) -> int:
        await workflow.execute_local_activity(slow_step, start_to_close_timeout=timedelta(seconds=30))
        await workflow.wait_condition(lambda: self.done)
        return self.bumps

    @workflow.signal
    def bump(self) -> None:
        self.bumps += 1

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def count(self) -> int:
        return self.bumps


def test_query_during_an_in_flight_task_is_answered_from_the_state_after_it(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        release_slow_step.clear()
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        async with Worker(client, task_queue=queue, workflows=[Counter], activities=[slow_step]):
            run_id = f"q-{uuid.uuid4().hex[:8]}"
            handle = await client.start_workflow(Counter.run, id=run_id, task_queue=queue)
            await asyncio.sleep(0.5)  # the first task is now running the local activity
            await handle.signal(Counter.bump)  # buffered behind the in-flight task
            pending_query = asyncio.create_task(handle.query(Counter.count))
            await asyncio.sleep(0.3)
            assert not pending_query.done(), "the query must wait for the in-flight task"
            release_slow_step.set()
            assert await asyncio.wait_for(pending_query, timeout=15) == 1
            await handle.signal(Counter.finish)
            assert await handle.result() == 1
        await client.close()

    asyncio.run(scenario())
