"""Workflow-side SDK features end to end: continue-as-new, patching, timers, fan-out, timeouts."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sdk import activity, workflow
from sdk.client import Client
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant

STEP = timedelta(seconds=10)


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:8]}"


async def _client(stack: Stack, tenant: Tenant) -> Client:
    return await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])


@activity.defn
async def double(n: int) -> int:
    return 2 * n


@workflow.defn
class Countdown:
    """Adds n, n-1, ... 1 to a running total, one run per step, via continue-as-new."""

    @workflow.run
    async def run(self, n: int, total: int) -> int:
        if n > 0:
            workflow.continue_as_new(args=[n - 1, total + n])  # raises: this run ends here
        return total


@workflow.defn
class Sleeper:
    """Sleeps once through workflow.sleep and once through asyncio.sleep."""

    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(timedelta(milliseconds=300))
        await asyncio.sleep(0.3)
        return "rested"


@workflow.defn
class FanOut:
    """Doubles each input concurrently with asyncio.gather."""

    @workflow.run
    async def run(self, numbers: list[int]) -> list[int]:
        calls = [workflow.execute_activity(double, n, start_to_close_timeout=STEP) for n in numbers]
        return list(await asyncio.gather(*calls))


@workflow.defn
class Deadline:
    """Waits for an ``answer`` signal, but only for the timeout it is given."""

    def __init__(self) -> None:
        self.answer = ""

    @workflow.run
    async def run(self, seconds: float) -> str:
        try:
            await workflow.wait_condition(lambda: bool(self.answer), timeout=seconds)
        except TimeoutError:
            return "timed out"
        return f"answered {self.answer}"

    @workflow.signal
    def reply(self, answer: str) -> None:
        self.answer = answer


async def _run_on_worker(
    stack: Stack, tenant: Tenant, queue: str, workflows: Sequence[type], body: Any
) -> Any:
    client = await _client(stack, tenant)
    async with Worker(client, task_queue=queue, workflows=workflows, activities=[double]):
        outcome = await asyncio.wait_for(body(client), 60)
    await client.close()
    return outcome


def test_result_follows_a_continue_as_new_chain(stack: Stack, tenant: Tenant, api: Api, queue: str) -> None:
    wid = _wid()

    async def body(client: Client) -> tuple[Any, str]:
        handle = await client.start_workflow(Countdown.run, args=[4, 0], id=wid, task_queue=queue)
        return await handle.result(), handle.run_id or ""

    total, first_run = asyncio.run(_run_on_worker(stack, tenant, queue, [Countdown], body))
    assert total == 4 + 3 + 2 + 1
    first = api.get(f"/workflows/{wid}/runs/{first_run}/history", page_size=256)
    assert first.status_code == 200, first.text
    assert first.json()["events"][-1]["event_type"] == "WorkflowExecutionContinuedAsNew"
    assert api.event_types(wid)[-1] == "WorkflowExecutionCompleted"


def test_both_sleeps_are_durable_timers(stack: Stack, tenant: Tenant, api: Api, queue: str) -> None:
    wid = _wid()

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Sleeper.run, id=wid, task_queue=queue)

    assert asyncio.run(_run_on_worker(stack, tenant, queue, [Sleeper], body)) == "rested"
    events = api.event_types(wid)
    assert events.count("TimerStarted") == 2 and events.count("TimerFired") == 2


def test_gathered_activities_are_scheduled_in_one_task(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()

    async def body(client: Client) -> Any:
        return await client.execute_workflow(FanOut.run, [1, 2, 3], id=wid, task_queue=queue)

    assert asyncio.run(_run_on_worker(stack, tenant, queue, [FanOut], body)) == [2, 4, 6]
    events = api.event_types(wid)
    first_completed = events.index("WorkflowTaskCompleted")
    assert events[first_completed + 1 : first_completed + 4] == ["ActivityTaskScheduled"] * 3


def test_wait_condition_times_out_or_returns_when_signalled(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    async def body(client: Client) -> tuple[Any, Any]:
        lapsed = await client.start_workflow(Deadline.run, 0.3, id=_wid(), task_queue=queue)
        answered = await client.start_workflow(Deadline.run, 30.0, id=_wid(), task_queue=queue)
        await answered.signal(Deadline.reply, "yes")
        return await lapsed.result(), await answered.result()

    assert asyncio.run(_run_on_worker(stack, tenant, queue, [Deadline], body)) == (
        "timed out",
        "answered yes",
    )


@workflow.defn(name="Pricing")
class PricingBeforePatch:
    """The original code: the list price, once a ``go`` signal arrives."""

    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self) -> str:
        label = "list price"
        await workflow.wait_condition(lambda: self.go)
        return label

    @workflow.signal
    def proceed(self) -> None:
        self.go = True


@workflow.defn(name="Pricing")
class PricingWithPatch:
    """The redeploy: new runs take the discount branch; old runs keep the list price."""

    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self) -> str:
        label = "discount" if workflow.patched("discount") else "list price"
        await workflow.wait_condition(lambda: self.go)
        return label

    @workflow.signal
    def proceed(self) -> None:
        self.go = True


def test_patched_keeps_old_runs_on_the_old_branch_after_a_redeploy(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    async def scenario() -> tuple[Any, Any]:
        client = await _client(stack, tenant)
        async with Worker(
            client,
            task_queue=queue,
            workflows=[PricingBeforePatch],
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        ):
            old = await client.start_workflow("Pricing", id=_wid(), task_queue=queue)
            await _until_task_completed(api, old.id)
        async with Worker(client, task_queue=queue, workflows=[PricingWithPatch]):
            new = await client.start_workflow("Pricing", id=_wid(), task_queue=queue)
            await old.signal("proceed")
            await new.signal("proceed")
            results = await asyncio.wait_for(asyncio.gather(old.result(), new.result()), 60)
        await client.close()
        return results[0], results[1]

    assert asyncio.run(scenario()) == ("list price", "discount")


async def _until_task_completed(api: Api, workflow_id: str) -> None:
    """Wait until the first workflow task is recorded as completed."""
    for _ in range(200):
        if "WorkflowTaskCompleted" in await asyncio.to_thread(api.event_types, workflow_id):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the first workflow task never completed")
