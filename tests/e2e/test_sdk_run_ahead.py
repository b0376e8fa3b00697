"""The SDK worker sends an activity's result with the next workflow task, run ahead.

Against the real stack (frontend, shard owner, PostgreSQL) with the SDK worker: a workflow
of sequential activities takes one call per step, its history has every event the two
calls would have written, and it replays clean, with ``workflow.now()`` and the history
length its code saw. A signal that arrives while an activity runs makes the server refuse
the task run ahead; the worker drops what it ran and replays the task it is handed, so the
signal is seen and the result is right.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

from sdk import activity, workflow
from sdk.client import Client
from sdk.worker import Replayer, Worker
from tests.conftest import Stack, Tenant

STEP = timedelta(seconds=10)


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:8]}"


@activity.defn
async def add_one(value: int) -> int:
    return value + 1


# The client the signalling activity uses (set by its test).
_signaller: list[Client] = []


@activity.defn
async def signal_my_workflow(value: int) -> int:
    """Signal this activity's own workflow, then return at once: the signal reaches the run
    between the worker's last look at it and the result, which the worker reports with
    the next task run ahead (unless the signal's task is already running there)."""
    info = activity.info()
    await _signaller[0].get_workflow_handle(info.workflow_id).signal("note", "stop")
    return value


@workflow.defn(name="Counter")
class Counter:
    """Five steps; each step's ``now()`` and history length are kept in the result."""

    @workflow.run
    async def run(self, start: int) -> dict[str, list[str] | list[int] | int]:
        value, seen_at, lengths = start, [], []
        for _ in range(5):
            value = await workflow.execute_activity(add_one, value, start_to_close_timeout=STEP)
            seen_at.append(workflow.now().isoformat())
            lengths.append(workflow.info().get_current_history_length())
        return {"value": value, "now": seen_at, "lengths": lengths}


@workflow.defn(name="Interrupted")
class Interrupted:
    """One activity that signals its workflow; the signal must be seen before the result returns."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.run
    async def run(self) -> list[str]:
        value = await workflow.execute_activity(signal_my_workflow, 7, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: bool(self.notes))
        return [*self.notes, str(value)]


async def _client(stack: Stack, tenant: Tenant) -> Client:
    return await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])


def test_sequential_steps_take_one_call_each_and_their_history_replays(stack: Stack, tenant: Tenant) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        queue = f"ahead-{uuid.uuid4().hex[:6]}"
        calls: list[str] = []
        client.transport.observers.append(lambda call: calls.append(call.path))
        async with Worker(client, task_queue=queue, workflows=[Counter], activities=[add_one]):
            handle = await client.start_workflow(Counter.run, 10, id=_wid(), task_queue=queue)
            result = await handle.result()
        # Only the first task was completed on its own; each step's rode with its result.
        completions = [path for path in calls if path.endswith("/workflow-tasks/complete")]
        results = [path for path in calls if path.endswith("/activity-tasks/complete")]
        assert (len(completions), len(results)) == (1, 5), calls
        events = [e async for e in handle.fetch_history_events()]
        history = await handle.fetch_history()
        await client.close()

        assert result["value"] == 15
        kinds = [e["event_type"] for e in events]
        # Every step wrote what the two calls write: the result, then a whole task.
        assert kinds.count("ActivityTaskCompleted") == 5 and kinds.count("WorkflowTaskCompleted") == 6
        started = [e for e in events if e["event_type"] == "WorkflowTaskStarted"][1:]
        # The code's now() is the time its task's Started event records, on the worker's clock.
        assert result["now"] == [datetime.fromisoformat(e["event_time"]).isoformat() for e in started]
        assert result["lengths"] == [e["event_id"] for e in started]
        # The steps ran ahead: no step's task went through the sticky queue's poll.
        requests = [e["attributes"].get("request_id") for e in started]
        assert requests == ["handed-back"] * 5
        assert Replayer(workflows=[Counter]).replay_workflow(history).replay_failure is None

    asyncio.run(scenario())


def test_a_signal_during_the_activity_refuses_the_task_run_ahead_and_is_seen(
    stack: Stack, tenant: Tenant
) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        queue = f"ahead-{uuid.uuid4().hex[:6]}"
        _signaller[:] = [client]
        async with Worker(client, task_queue=queue, workflows=[Interrupted], activities=[signal_my_workflow]):
            handle = await client.start_workflow(Interrupted.run, id=_wid(), task_queue=queue)
            result = await handle.result()
        history = await handle.fetch_history()
        kinds = [e["event_type"] async for e in handle.fetch_history_events()]
        await client.close()

        assert result == ["stop", "7"]
        assert kinds.index("WorkflowExecutionSignaled") < kinds.index("ActivityTaskCompleted")
        assert kinds.count("ActivityTaskCompleted") == 1
        assert Replayer(workflows=[Interrupted]).replay_workflow(history).replay_failure is None

    asyncio.run(scenario())


def test_a_client_and_its_worker_reuse_their_connections(stack: Stack, tenant: Tenant) -> None:
    """Twenty workflows of five steps, one after another, are some 160 calls: they travel
    over a handful of kept-alive connections (the polls' and the reports'), not one each."""

    async def scenario() -> None:
        client = await _client(stack, tenant)
        queue = f"ahead-{uuid.uuid4().hex[:6]}"
        async with Worker(client, task_queue=queue, workflows=[Counter], activities=[add_one]):
            for _ in range(20):
                result = await client.execute_workflow(Counter.run, 0, id=_wid(), task_queue=queue)
                assert result["value"] == 5
        opened = client.transport.connections_opened
        await client.close()
        assert 1 <= opened <= 20, opened

    asyncio.run(scenario())
