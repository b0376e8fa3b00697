"""Typed history on real processes: a run's events fetched through the SDK are Temporal's typed
events, and the run's history replays with the awaitable ``Replayer`` (alone, through
``replay_workflows`` over ``list_workflows().map_histories()``, and after a JSON round trip)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from sdk import activity, workflow
from sdk._runtime.replayer import WorkflowHistory
from sdk.api.enums.v1 import EventType
from sdk.api.history.v1 import HistoryEvent
from sdk.client import Client
from sdk.worker import Replayer, Worker
from tests.conftest import Stack, Tenant

STEP = timedelta(seconds=10)


@activity.defn
async def weigh(parcel: str) -> int:
    return len(parcel)


@workflow.defn(name="Weighing")
class Weighing:
    def __init__(self) -> None:
        self.approved_by = ""

    @workflow.run
    async def run(self, parcel: str) -> str:
        grams = await workflow.execute_activity(weigh, parcel, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: bool(self.approved_by))
        await workflow.sleep(0.1)
        return f"{parcel}: {grams} g, approved by {self.approved_by}"

    @workflow.signal
    def approve(self, who: str) -> None:
        self.approved_by = who


@workflow.defn(name="Weighing")
class WeighingTwice(Weighing):
    """A changed version: weighs twice, which the recorded run never did."""

    @workflow.run
    async def run(self, parcel: str) -> str:
        await workflow.execute_activity(weigh, parcel, start_to_close_timeout=STEP)
        return await super().run(parcel)


async def _finished_run(stack: Stack, tenant: Tenant, queue: str) -> tuple[Client, str]:
    client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
    workflow_id = f"wf-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[Weighing], activities=[weigh]):
        handle = await client.start_workflow(Weighing.run, "box", id=workflow_id, task_queue=queue)
        await handle.signal(Weighing.approve, "ada")
        assert await handle.result() == "box: 3 g, approved by ada"
    return client, workflow_id


def test_a_runs_history_is_typed_and_replays_with_the_async_replayer(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        client, workflow_id = await _finished_run(stack, tenant, queue)
        handle = client.get_workflow_handle(workflow_id)
        events = [event async for event in handle.fetch_history_events(page_size=3)]
        assert all(isinstance(event, HistoryEvent) for event in events)
        assert [e.event_id for e in events] == list(range(1, len(events) + 1))
        kinds = [e.event_type for e in events]
        assert kinds[0] is EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
        assert kinds[-1] is EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED in kinds
        assert [e["event_type"] for e in events] == [k.short_name for k in kinds]
        times = [e.event_time for e in events]
        assert times == sorted(times) and times[0].tzinfo is not None

        scheduled = events[kinds.index(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)]
        attrs = scheduled.activity_task_scheduled_event_attributes
        assert (attrs.activity_type.name, attrs.start_to_close_timeout) == ("weigh", STEP)
        signaled = events[kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)]
        signal = signaled.workflow_execution_signaled_event_attributes
        assert signal.signal_name == "approve"
        assert client.data_converter.from_payloads(signal.input) == ["ada"]
        timer = events[kinds.index(EventType.EVENT_TYPE_TIMER_STARTED)]
        assert timer.timer_started_event_attributes.start_to_fire_timeout == timedelta(seconds=0.1)
        completed = events[-1].workflow_execution_completed_event_attributes
        assert client.data_converter.from_result(completed.result) == "box: 3 g, approved by ada"

        history = await handle.fetch_history()
        assert history.events == events and history.run_id
        result = await Replayer(workflows=[Weighing]).replay_workflow(history)
        assert result.replay_failure is None
        restored = WorkflowHistory.from_json(history.to_json())
        assert (await Replayer(workflows=[Weighing]).replay_workflow(restored)).replay_failure is None

        listed = client.list_workflows(f"WorkflowId = '{workflow_id}'").map_histories()
        results = await Replayer(workflows=[Weighing]).replay_workflows(listed)
        assert results.replay_failures == {}
        listed = client.list_workflows(f"WorkflowId = '{workflow_id}'").map_histories()
        changed = await Replayer(workflows=[WeighingTwice]).replay_workflows(
            listed, raise_on_replay_failure=False
        )
        assert list(changed.replay_failures) == [history.run_id]
        with pytest.raises(workflow.NondeterminismError):
            await Replayer(workflows=[WeighingTwice]).replay_workflow(history)
        await client.close()

    asyncio.run(scenario())


def test_fetch_history_events_waits_for_new_events_until_the_close(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        workflow_id = f"wf-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[Weighing], activities=[weigh]):
            handle = await client.start_workflow(Weighing.run, "crate", id=workflow_id, task_queue=queue)
            seen: list[EventType] = []

            async def follow() -> None:
                async for event in handle.fetch_history_events(wait_new_event=True):
                    seen.append(event.event_type)

            following = asyncio.create_task(follow())
            # The run waits for its signal: the iteration must still be going, not ended.
            while EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED not in seen:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            assert not following.done()
            await handle.signal(Weighing.approve, "grace")
            await asyncio.wait_for(following, timeout=30)
        assert seen[-1] is EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED in seen
        plain = [e.event_type async for e in handle.fetch_history_events()]
        assert plain == seen
        await client.close()

    asyncio.run(scenario())
