"""How many tasks a worker's polls ask for: each an even part of the slots.

A poll holds the slots it asks for while it waits. When one poll could ask for every free
slot, the worker's other polls found none, and a queue whose only poll was among them (the
task queue of new runs, or the sticky queue) went unpolled until that poll's long wait ended.
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


def test_a_poll_asks_for_an_even_part_of_the_slots_at_most_the_servers_limit() -> None:
    assert Worker.poll_share(100, 5) == 20
    assert Worker.poll_share(4, 2) == 2
    assert Worker.poll_share(1000, 2) == 32
    assert Worker.poll_share(3, 5) == 1


def test_every_queue_is_polled_while_the_others_wait_and_none_asks_for_more_than_its_part() -> None:
    asked: dict[str, list[int]] = {}

    async def hold_the_poll(request: httpx.Request) -> httpx.Response:
        queue = request.url.path.split("/task-queues/")[1].split("/")[0]
        asked.setdefault(queue, []).append(json.loads(request.content)["max_tasks"])
        await asyncio.sleep(0.2)  # an empty queue: the long poll waits, then answers none
        return httpx.Response(204)

    async def poll_a_while() -> None:
        transport = HttpTransport("http://server", namespace="ns", api_key="k")
        transport._client = httpx.AsyncClient(
            base_url="http://server", transport=httpx.MockTransport(hold_the_poll)
        )
        client = Client(transport, data_converter=default_converter, identity="w")
        worker = Worker(
            client,
            task_queue="q",
            workflows=[Order],
            max_concurrent_workflow_tasks=4,
            max_concurrent_workflow_task_polls=2,
        )
        assert worker.workflow_runner is not None
        stopping = asyncio.Event()
        pollers = worker.workflow_runner.pollers(stopping)
        await asyncio.sleep(0.1)  # every poll has been sent and is waiting
        stopping.set()
        await asyncio.gather(*pollers)

    asyncio.run(poll_a_while())
    sticky = [queue for queue in asked if queue != "q"]
    assert asked["q"] == [2] and len(sticky) == 1 and asked[sticky[0]] == [2], asked
