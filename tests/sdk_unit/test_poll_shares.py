"""How many tasks a worker's polls ask for: an even part of half the slots, at most 8.

A poll holds a slot for each task it asks for while it waits. When one poll could ask for
every free slot, the worker's other polls found none, and a queue whose only poll was among
them (the task queue of new runs, or the sticky queue) went unpolled until that poll's long
wait ended; and a task handed over without a poll found no free slot.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from sdk._http import HttpTransport
from sdk.client import Client
from sdk.converter import default_converter
from sdk.worker import Worker
from tests.e2e.workers.versioned_worker import Order


def _worker(asked: dict[str, list[int]], **options: int) -> Worker:
    """A worker whose server has nothing to hand out: each poll waits, then answers none."""

    async def serve(request: httpx.Request) -> httpx.Response:
        queue = request.url.path.split("/task-queues/")[1].split("/")[0]
        asked.setdefault(queue, []).append(json.loads(request.content)["max_tasks"])
        await asyncio.sleep(0.2)
        return httpx.Response(204)

    transport = HttpTransport("http://server", namespace="ns", api_key="k")
    transport._client = httpx.AsyncClient(base_url="http://server", transport=httpx.MockTransport(serve))
    client = Client(transport, data_converter=default_converter, identity="w")
    return Worker(client, task_queue="q", workflows=[Order], **options)


def test_a_poll_asks_for_an_even_part_of_half_the_slots_at_most_eight() -> None:
    assert Worker.poll_share(100, 5) == 8
    assert Worker.poll_share(40, 4) == 5
    assert Worker.poll_share(8, 2) == 2
    assert Worker.poll_share(3, 5) == 1


def test_waiting_polls_leave_half_the_slots_free_for_tasks_handed_over_eagerly() -> None:
    for slots, polls in [(100, 5), (40, 4), (10, 5), (8, 2), (1000, 2)]:
        assert Worker.poll_share(slots, polls) * polls <= slots / 2


def test_every_queue_is_polled_while_the_others_wait_none_asking_for_more_than_its_part() -> None:
    asked: dict[str, list[int]] = {}
    worker = _worker(asked, max_concurrent_workflow_tasks=8, max_concurrent_workflow_task_polls=2)

    async def poll_a_while() -> None:
        assert worker.workflow_runner is not None
        stopping = asyncio.Event()
        pollers = worker.workflow_runner.pollers(stopping)
        await asyncio.sleep(0.1)  # every poll has been sent and is waiting
        stopping.set()
        await asyncio.gather(*pollers)

    asyncio.run(poll_a_while())
    sticky = [queue for queue in asked if queue != "q"]
    assert asked["q"] == [2] and len(sticky) == 1 and asked[sticky[0]] == [2], asked
