"""How an SDK worker talks to the server: eager activity dispatch, heartbeat throttling,
and reconnecting after the API frontend restarts under it.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sdk import activity, workflow
from sdk._http import CallSeen
from sdk.client import Client
from sdk.common import RetryPolicy
from sdk.exceptions import ApplicationError, WorkflowFailureError
from sdk.worker import Worker
from tests.conftest import Stack, Tenant, free_port, frontend_up, start_frontend, wait_until

STEP = timedelta(seconds=30)


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:8]}"


@activity.defn(name="Step")
async def step(n: int) -> int:
    return n


@workflow.defn(name="OneStep")
class OneStep:
    @workflow.run
    async def run(self) -> int:
        result: int = await workflow.execute_activity(step, 7, start_to_close_timeout=STEP)
        return result


async def _connect(url: str, tenant: Tenant) -> Client:
    return await Client.connect(url, namespace=tenant.namespace, api_key=tenant.keys["all"])


async def _activity_start_request_ids(client: Client, workflow_id: str) -> list[str]:
    handle = client.get_workflow_handle(workflow_id)
    return [
        e["attributes"]["request_id"]
        async for e in handle.fetch_history_events()
        if e["event_type"] == "ActivityTaskStarted"
    ]


def test_an_activity_with_a_free_slot_arrives_in_the_completion_response(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    """Eager dispatch is the default; with no free slot the task goes through matching instead."""

    async def scenario() -> None:
        client = await _connect(stack.url, tenant)
        eager_id, polled_id = _wid(), _wid()
        async with Worker(client, task_queue=queue, workflows=[OneStep], activities=[step]):
            assert await client.execute_workflow(OneStep.run, id=eager_id, task_queue=queue) == 7
        # One activity slot, held by the worker's single activity poll: nothing to reserve.
        async with Worker(
            client,
            task_queue=queue,
            workflows=[OneStep],
            activities=[step],
            max_concurrent_activities=1,
            max_concurrent_activity_task_polls=1,
        ):
            assert await client.execute_workflow(OneStep.run, id=polled_id, task_queue=queue) == 7
        assert await _activity_start_request_ids(client, eager_id) == ["eager"]
        polled = await _activity_start_request_ids(client, polled_id)
        assert len(polled) == 1 and polled[0] != "eager"
        await client.close()

    asyncio.run(scenario())


def test_an_eager_start_hands_the_first_workflow_task_to_the_worker_in_this_process(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        client = await _connect(stack.url, tenant)
        wid = _wid()
        async with Worker(client, task_queue=queue, workflows=[OneStep], activities=[step]):
            handle = await client.start_workflow(
                OneStep.run, id=wid, task_queue=queue, request_eager_start=True
            )
            assert await handle.result() == 7
        started = [
            e["attributes"]["request_id"]
            async for e in handle.fetch_history_events()
            if e["event_type"] == "WorkflowTaskStarted"
        ]
        assert started[0] == "eager" and len(started) == 2
        await client.close()

    asyncio.run(scenario())


def test_result_waits_for_the_close_event_in_one_request(stack: Stack, tenant: Tenant, queue: str) -> None:
    """The run appends nine events after the start; the waiting client is answered once."""
    history_requests: list[str] = []

    def count(call: CallSeen) -> None:
        if call.path.endswith("/history"):
            history_requests.append(str(call.params.get("history_event_filter_type")))

    async def scenario() -> None:
        client = await _connect(stack.url, tenant)
        handle = await client.start_workflow(OneStep.run, id=_wid(), task_queue=queue)
        running = await client.transport.get(
            f"/workflows/{handle.id}/history", params={"history_event_filter_type": "CLOSE_EVENT"}
        )
        assert running is not None and running["events"] == [] and running["status"] == "Running"
        client.transport.observers.append(count)
        async with Worker(client, task_queue=queue, workflows=[OneStep], activities=[step]):
            assert await handle.result() == 7
        assert history_requests == ["CLOSE_EVENT"]
        await client.close()

    asyncio.run(scenario())


@workflow.defn(name="Declines")
class Declines:
    @workflow.run
    async def run(self) -> None:
        raise ApplicationError("card declined", type="Declined", non_retryable=True)


def test_an_eagerly_started_run_closed_by_this_process_needs_no_call_for_its_result(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    """The completion that closes the run answers with the close event; result() takes it
    from there, for a result and for a failure, without reading the history."""
    history_requests: list[str] = []

    def count(call: CallSeen) -> None:
        if call.path.endswith("/history"):
            history_requests.append(call.path)

    async def scenario() -> None:
        client = await _connect(stack.url, tenant)
        client.transport.observers.append(count)
        async with Worker(client, task_queue=queue, workflows=[OneStep, Declines], activities=[step]):
            ok = await client.start_workflow(
                OneStep.run, id=_wid(), task_queue=queue, request_eager_start=True
            )
            assert await ok.result() == 7
            failing = await client.start_workflow(
                Declines.run, id=_wid(), task_queue=queue, request_eager_start=True
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await failing.result()
            assert "card declined" in str(failed.value.cause)
            assert history_requests == []
            # A handle not started here asks the server, as ever.
            assert await client.get_workflow_handle(ok.id).result() == 7
            assert len(history_requests) == 1
        await client.close()

    asyncio.run(scenario())


def test_a_worker_with_free_slots_takes_a_backlog_in_batches(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    """Twelve runs wait on the queue before the worker starts: its polls ask for as many
    tasks as it has free slots, so the backlog arrives in a few answers, and every run ends."""
    batch_sizes: list[int] = []

    def record(call: CallSeen) -> None:
        if call.path.endswith("/workflow-tasks/poll") and isinstance(call.answer, dict):
            batch_sizes.append(len(call.answer["tasks"]))

    async def scenario() -> None:
        client = await _connect(stack.url, tenant)
        handles = [await client.start_workflow(OneStep.run, id=_wid(), task_queue=queue) for _ in range(12)]
        client.transport.observers.append(record)
        async with Worker(client, task_queue=queue, workflows=[OneStep], activities=[step]):
            assert [await handle.result() for handle in handles] == [7] * 12
        await client.close()

    asyncio.run(scenario())
    assert max(batch_sizes) > 1, batch_sizes
    assert sum(batch_sizes) >= 12


BEATING_SECONDS: list[float] = []


@activity.defn(name="Beating")
async def beating(beats: int) -> int:
    """First attempt: heartbeat ``beats`` times over ~3 s, then fail; the retry returns the last beat."""
    info = activity.info()
    if info.attempt > 1:
        last: int = info.heartbeat_details[0]
        return last
    started = time.monotonic()
    for i in range(beats):
        activity.heartbeat(i)
        await asyncio.sleep(3.0 / beats)
    BEATING_SECONDS.append(time.monotonic() - started)
    raise ApplicationError("fail once so the retry reads the recorded details")


@workflow.defn(name="Heartbeats")
class Heartbeats:
    @workflow.run
    async def run(self, beats: int) -> int:
        result: int = await workflow.execute_activity(
            beating,
            beats,
            start_to_close_timeout=STEP,
            heartbeat_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )
        return result


def test_many_heartbeats_are_throttled_to_few_requests_and_the_last_details_are_kept(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    """heartbeat_timeout 2 s: at most one request per 1.6 s; the failure report carries the last beat."""
    heartbeat_requests: list[str] = []

    def count(call: CallSeen) -> None:
        if call.path.endswith("/activity-tasks/heartbeat"):
            heartbeat_requests.append(call.path)

    async def scenario() -> None:
        client = await _connect(stack.url, tenant)
        client.transport.observers.append(count)
        async with Worker(client, task_queue=queue, workflows=[Heartbeats], activities=[beating]):
            result = await client.execute_workflow(Heartbeats.run, 150, id=_wid(), task_queue=queue)
        assert result == 149
        # One at once, then at most one per 1.6 s of beating (a loaded machine stretches the 3 s).
        allowed = 1 + math.ceil(BEATING_SECONDS[-1] / 1.6)
        assert 1 <= len(heartbeat_requests) <= allowed < 150, (heartbeat_requests, BEATING_SECONDS)
        await client.close()

    asyncio.run(scenario())


@activity.defn(name="Journal")
async def journal(step: int) -> int:
    Restarting.ran.append(step)
    return step


@workflow.defn(name="Restarting")
class Restarting:
    """One step, a wait for ``go``, another step: the frontend restarts during the wait."""

    ran: list[int] = []

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.run
    async def run(self) -> int:
        first: int = await workflow.execute_activity(journal, 1, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: self.go)
        second: int = await workflow.execute_activity(journal, 2, start_to_close_timeout=STEP)
        return first + second


@pytest.fixture
def own_frontend(stack: Stack) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A frontend of this test's own (same database, the stack's shard owner), free to restart."""
    port = free_port()
    processes = [start_frontend(stack.env, port)]
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: frontend_up(url), timeout=30)
    yield url, processes
    for process in processes:
        process.terminate()
        process.wait(15)


def _restart(url: str, processes: list[subprocess.Popen[bytes]], env: dict[str, str]) -> None:
    """Kill the frontend outright (master and workers: open long polls are cut), start a new one."""
    old = processes[-1]
    children = Path(f"/proc/{old.pid}/task/{old.pid}/children").read_text().split()
    for pid in [old.pid, *map(int, children)]:
        os.kill(pid, signal.SIGKILL)
    old.wait(20)
    wait_until(lambda: not frontend_up(url), timeout=10)
    assert not frontend_up(url)
    processes.append(start_frontend(env, int(url.rsplit(":", 1)[1])))
    wait_until(lambda: frontend_up(url), timeout=30)


def test_the_worker_reconnects_after_the_frontend_restarts_and_the_workflow_finishes(
    stack: Stack, tenant: Tenant, queue: str, own_frontend: tuple[str, list[subprocess.Popen[bytes]]]
) -> None:
    url, processes = own_frontend
    Restarting.ran.clear()

    async def scenario() -> None:
        client = await _connect(url, tenant)
        async with Worker(client, task_queue=queue, workflows=[Restarting], activities=[journal]):
            handle = await client.start_workflow(Restarting.run, id=_wid(), task_queue=queue)
            await _until_waiting(handle)
            await asyncio.to_thread(_restart, url, processes, stack.env)
            await handle.signal(Restarting.proceed)
            assert await asyncio.wait_for(handle.result(), 60) == 3
        assert Restarting.ran == [1, 2]
        await client.close()

    asyncio.run(scenario())


async def _until_waiting(handle: Any) -> None:
    """Until the first step is recorded and the run waits for the signal."""
    for _ in range(200):
        events = [e["event_type"] async for e in handle.fetch_history_events()]
        if "ActivityTaskCompleted" in events and events[-1] == "WorkflowTaskCompleted":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the first step never completed")


class Blocked:
    """The activity below waits here until the test has taken the server away."""

    started = asyncio.Event()
    release = asyncio.Event()


@activity.defn(name="WaitForRelease")
async def wait_for_release() -> int:
    Blocked.started.set()
    await Blocked.release.wait()
    return 1


@workflow.defn(name="WaitsForRelease")
class WaitsForRelease:
    @workflow.run
    async def run(self) -> int:
        return int(await workflow.execute_activity(wait_for_release, start_to_close_timeout=STEP))


def _kill(processes: list[subprocess.Popen[bytes]]) -> None:
    old = processes[-1]
    children = Path(f"/proc/{old.pid}/task/{old.pid}/children").read_text().split()
    for pid in [old.pid, *map(int, children)]:
        os.kill(pid, signal.SIGKILL)
    old.wait(20)


def test_shutdown_with_the_server_down_gives_up_the_unreported_outcome_and_returns(
    stack: Stack, tenant: Tenant, queue: str, own_frontend: tuple[str, list[subprocess.Popen[bytes]]]
) -> None:
    """The activity finishes after the frontend died: its outcome cannot be delivered."""
    url, processes = own_frontend
    workflow_id = _wid()

    async def scenario() -> float:
        Blocked.started, Blocked.release = asyncio.Event(), asyncio.Event()
        client = await _connect(url, tenant)
        worker = Worker(
            client,
            task_queue=queue,
            workflows=[WaitsForRelease],
            activities=[wait_for_release],
            shutdown_report_grace=timedelta(seconds=1),
        )
        runner = asyncio.create_task(worker.run())
        await client.start_workflow(WaitsForRelease.run, id=workflow_id, task_queue=queue)
        await asyncio.wait_for(Blocked.started.wait(), 30)
        await asyncio.to_thread(_kill, processes)
        began = time.monotonic()
        stopping = asyncio.create_task(worker.shutdown())
        Blocked.release.set()
        await asyncio.wait_for(stopping, 30)
        await asyncio.wait_for(runner, 5)
        return time.monotonic() - began

    took = asyncio.run(scenario())
    assert took < 15, f"shutdown took {took:.1f} s"
    # Nothing was recorded for the outcome (a started activity's ActivityTaskStarted is
    # written when it closes): the server retries the activity after its timeout.
    history = httpx.get(
        f"{stack.url}/api/v1/namespaces/{tenant.namespace}/workflows/{workflow_id}/history",
        headers={"Authorization": f"Bearer {tenant.keys['all']}"},
    ).json()
    types = [e["event_type"] for e in history["events"]]
    assert types[-1] == "ActivityTaskScheduled", types
