"""A worker that evicts a run from its cache resets the run's sticky queue.

With ``max_cached_workflows=1``, the second of two sleeping runs evicts the first from the
worker's cache. The worker says so (``reset-sticky-task-queue``), so when the evicted
run's timer fires its task is scheduled on the normal queue and the poll answer carries
the whole history: the worker replays it without fetching the history, while the run it
kept cached gets its task on the sticky queue as before. Against the real stack, the
worker's own transport's calls counted.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from sdk import workflow
from sdk.client import Client
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant


@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(timedelta(seconds=seconds))
        return f"slept {seconds}"


def _counted(client: Client) -> list[tuple[str, str, Any]]:
    """Record every request the client's transport sends: (method, path, body)."""
    calls: list[tuple[str, str, Any]] = []
    transport = client.transport
    send = transport.request

    async def request(method: str, path: str, **options: Any) -> Any:
        calls.append((method, path, options.get("body")))
        return await send(method, path, **options)

    transport.request = request  # type: ignore[method-assign]
    return calls


def _resets(calls: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """The sticky resets among the calls, sent alone or in a batch of reports."""
    found = []
    for method, path, body in calls:
        if method == "POST" and path.endswith("/reset-sticky-task-queue"):
            found.append(body)
        elif method == "POST" and path.endswith("/responses"):
            found += [r["body"] for r in body["responses"] if r["kind"] == "reset-sticky-task-queue"]
    return found


def _second_task_queue_kind(api: Api, workflow_id: str) -> str:
    scheduled = [e for e in api.events(workflow_id) if e["event_type"] == "WorkflowTaskScheduled"]
    return str(scheduled[1]["attributes"]["task_queue"]["kind"])


def test_an_evicted_run_gets_its_next_task_on_the_normal_queue_with_its_whole_history(
    stack: Stack, tenant: Tenant, queue: str, api: Api
) -> None:
    ids = [f"nap-{uuid.uuid4().hex[:8]}" for _ in range(2)]

    async def scenario() -> tuple[list[str], list[tuple[str, str, Any]]]:
        starter = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        worker_client = await Client.connect(
            stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"]
        )
        calls = _counted(worker_client)
        async with Worker(worker_client, task_queue=queue, workflows=[Nap], max_cached_workflows=1):
            handles = [
                await starter.start_workflow(Nap.run, seconds, id=wid, task_queue=queue)
                for wid, seconds in zip(ids, (2.0, 3.0), strict=True)
            ]
            results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
        await worker_client.close()
        await starter.close()
        return list(results), calls

    results, calls = asyncio.run(scenario())

    assert results == ["slept 2.0", "slept 3.0"]
    history_reads = [path for method, path, _ in calls if method == "GET" and path.endswith("/history")]
    assert history_reads == [], "no run was replayed from a fetched history"
    resets = _resets(calls)
    assert len(resets) == 1, calls
    evicted = resets[0]["workflow_id"]
    kept = next(wid for wid in ids if wid != evicted)
    assert _second_task_queue_kind(api, evicted) == "NORMAL"
    assert _second_task_queue_kind(api, kept) == "STICKY"
