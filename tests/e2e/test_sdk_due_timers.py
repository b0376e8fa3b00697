"""The SDK worker wakes its sleeping runs itself, by a sticky poll at their timers' due time.

Against the real stack with its shard owner paused: no process fires timers then but the
poll, so a workflow that sleeps twice and finishes proves the worker named its run when
each timer fell due and took the woken task. Its history is the usual one (each timer
fired once) and replays clean.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Callable
from datetime import timedelta

from sdk import workflow
from sdk.api.enums.v1 import EventType
from sdk.client import Client
from sdk.worker import Replayer, Worker
from tests.conftest import Stack, Tenant


@workflow.defn(name="Napper")
class Napper:
    """Sleeps twice (the second timer started by the task the first one woke)."""

    @workflow.run
    async def run(self, seconds: float) -> float:
        first = workflow.now()
        await asyncio.sleep(seconds)
        await workflow.sleep(timedelta(seconds=seconds))
        return round((workflow.now() - first).total_seconds(), 1)


def test_a_sleeping_run_is_woken_by_its_worker_s_poll(
    stack: Stack, make_tenant: Callable[..., Tenant]
) -> None:
    tenant = make_tenant()
    owner = stack.processes[1]  # the stack's shard owner: paused, it fires nothing

    async def story() -> None:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        queue = f"naps-{uuid.uuid4().hex[:6]}"
        async with Worker(client, task_queue=queue, workflows=[Napper]):
            handle = await client.start_workflow(
                Napper.run, 0.5, id=f"nap-{uuid.uuid4().hex[:6]}", task_queue=queue
            )
            owner.send_signal(signal.SIGSTOP)
            try:
                slept = await asyncio.wait_for(handle.result(), 20)
            finally:
                owner.send_signal(signal.SIGCONT)
        assert 1.0 <= slept < 2.0, slept
        history = await handle.fetch_history()
        kinds = [e.event_type for e in history.events]
        started, fired = EventType.EVENT_TYPE_TIMER_STARTED, EventType.EVENT_TYPE_TIMER_FIRED
        assert kinds.count(started) == 2 and kinds.count(fired) == 2, kinds
        await Replayer(workflows=[Napper]).replay_workflow(history)
        await client.close()

    asyncio.run(story())
