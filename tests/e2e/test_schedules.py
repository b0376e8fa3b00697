"""Schedules end to end: the shard owner fires them, SDK workers run what they start.

Every test drives the SDK client against the real stack (gunicorn + shard owner) and
reads outcomes back through the API. Intervals are one second, so counts allow a
firing of slack either way on a loaded machine.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import pytest

from sdk import workflow
from sdk._http import NotFoundError
from sdk.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowExecutionDescription,
)
from sdk.common import WorkflowExecutionStatus
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant

EVERY_SECOND = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))])
YEARLY = ScheduleSpec(cron_expressions=["0 0 1 1 *"])


@workflow.defn
class Report:
    """Takes longer than the schedule's interval, so actions overlap."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"


def _sid() -> str:
    return f"sched-{uuid.uuid4().hex[:8]}"


@asynccontextmanager
async def _client(stack: Stack, tenant: Tenant) -> AsyncIterator[Client]:
    client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
    try:
        yield client
    finally:
        await client.close()


def _schedule(
    queue: str,
    spec: ScheduleSpec = EVERY_SECOND,
    *,
    seconds: float = 0.0,
    overlap: ScheduleOverlapPolicy = ScheduleOverlapPolicy.ALLOW_ALL,
    paused: bool = False,
    action_id: str = "report",
) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(Report.run, seconds, id=action_id, task_queue=queue),
        spec=spec,
        policy=SchedulePolicy(overlap=overlap),
        state=ScheduleState(paused=paused),
    )


async def _started(client: Client, description: ScheduleDescription) -> list[WorkflowExecutionDescription]:
    """The runs a schedule started (its recent actions), oldest first."""
    runs = [
        await client.get_workflow_handle(a.action.workflow_id).describe()
        for a in description.info.recent_actions
    ]
    return sorted(runs, key=lambda r: r.start_time or datetime.min.replace(tzinfo=UTC))


def _nominal(run: WorkflowExecutionDescription) -> datetime:
    """The nominal time a scheduled run's workflow id ends with (``...-2026-01-05T09:00:00Z``)."""
    return datetime.fromisoformat(run.workflow_id[-len("2026-01-05T09:00:00Z") :])


def _max_concurrent(runs: list[WorkflowExecutionDescription]) -> int:
    far = datetime.max.replace(tzinfo=UTC)
    edges = sorted(
        [(r.start_time, 1) for r in runs if r.start_time] + [(r.close_time or far, -1) for r in runs],
        key=lambda e: (e[0], e[1]),
    )
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def test_every_second_for_five_seconds_starts_about_five_runs(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        async with _client(stack, tenant) as client:
            handle = await client.create_schedule(_sid(), _schedule(queue))
            await asyncio.sleep(5.2)
            await handle.pause(note="counted")
            described = await handle.describe()
            assert 4 <= described.info.num_actions <= 6, described.info
            ids = [a.action.workflow_id for a in described.info.recent_actions]
            assert all(i.startswith("report-") and i.endswith("Z") for i in ids)
            for action in described.info.recent_actions:
                assert action.action.workflow_id == f"report-{action.scheduled_at:%Y-%m-%dT%H:%M:%SZ}"
                assert action.started_at - action.scheduled_at < timedelta(seconds=1)
            run = await client.get_workflow_handle(ids[0]).describe()
            assert run.search_attributes["ChronicleScheduledById"] == handle.id
            assert "ChronicleScheduledStartTime" in run.search_attributes
            assert described.schedule.state.paused and described.schedule.state.note == "counted"
            await handle.delete()

    asyncio.run(scenario())


def test_overlap_policies_with_a_workflow_longer_than_the_interval(
    stack: Stack, tenant: Tenant, queue: str, api: Api
) -> None:
    """Six schedules, one per policy, each firing every second a 2 s workflow for 8 s."""

    async def scenario() -> None:
        async with _client(stack, tenant) as client, Worker(client, task_queue=queue, workflows=[Report]):
            handles = {
                policy: await client.create_schedule(
                    _sid(), _schedule(queue, seconds=2.0, overlap=policy, action_id=policy.name.lower())
                )
                for policy in ScheduleOverlapPolicy
            }
            await asyncio.sleep(8)
            for handle in handles.values():
                await handle.pause()
            described = {p: await h.describe() for p, h in handles.items()}
            runs = {p: await _started(client, d) for p, d in described.items()}
            statuses = {p: [r.status for r in rs] for p, rs in runs.items()}

            skip = described[ScheduleOverlapPolicy.SKIP].info
            assert _max_concurrent(runs[ScheduleOverlapPolicy.SKIP]) == 1
            assert skip.num_actions >= 2 and skip.num_actions_skipped_overlap >= 2

            one = described[ScheduleOverlapPolicy.BUFFER_ONE]
            assert _max_concurrent(runs[ScheduleOverlapPolicy.BUFFER_ONE]) == 1
            assert one.info.num_actions_skipped_overlap >= 1
            first, second = runs[ScheduleOverlapPolicy.BUFFER_ONE][:2]
            assert first.close_time and second.start_time and second.start_time >= first.close_time
            # the one buffered time is the first one due after the first run started
            assert _nominal(second) - _nominal(first) == timedelta(seconds=1), runs

            every = described[ScheduleOverlapPolicy.BUFFER_ALL]
            assert _max_concurrent(runs[ScheduleOverlapPolicy.BUFFER_ALL]) == 1
            assert every.info.num_actions_skipped_overlap == 0
            waiting = api.get(f"/schedules/{every.id}").json()["info"]["buffered_actions"]
            assert waiting >= 2  # every due time waits its turn

            assert WorkflowExecutionStatus.CANCELED in statuses[ScheduleOverlapPolicy.CANCEL_OTHER]
            assert _max_concurrent(runs[ScheduleOverlapPolicy.CANCEL_OTHER]) == 1
            assert WorkflowExecutionStatus.TERMINATED in statuses[ScheduleOverlapPolicy.TERMINATE_OTHER]
            assert statuses[ScheduleOverlapPolicy.TERMINATE_OTHER].count(WorkflowExecutionStatus.RUNNING) <= 1

            allow = described[ScheduleOverlapPolicy.ALLOW_ALL].info
            assert allow.num_actions >= 5 and allow.num_actions_skipped_overlap == 0
            assert _max_concurrent(runs[ScheduleOverlapPolicy.ALLOW_ALL]) >= 2

            completed = statuses[ScheduleOverlapPolicy.SKIP][0]
            assert completed == WorkflowExecutionStatus.COMPLETED
            for handle in handles.values():
                await handle.delete()

    asyncio.run(scenario())


def test_pause_stops_firing_and_unpause_resumes(stack: Stack, tenant: Tenant, queue: str) -> None:
    async def scenario() -> None:
        async with _client(stack, tenant) as client:
            handle = await client.create_schedule(_sid(), _schedule(queue))
            await asyncio.sleep(2.2)
            await handle.pause(note="maintenance window")
            paused = await handle.describe()
            assert paused.schedule.state.paused and paused.schedule.state.note == "maintenance window"
            await asyncio.sleep(2.5)
            assert (await handle.describe()).info.num_actions == paused.info.num_actions
            await handle.unpause(note="back")
            await asyncio.sleep(2.5)
            resumed = await handle.describe()
            assert not resumed.schedule.state.paused
            # the paused seconds are not caught up: about two more, not four or five
            assert 1 <= resumed.info.num_actions - paused.info.num_actions <= 3
            await handle.delete()

    asyncio.run(scenario())


def test_trigger_starts_a_run_now(stack: Stack, tenant: Tenant, queue: str) -> None:
    async def scenario() -> None:
        async with _client(stack, tenant) as client:
            handle = await client.create_schedule(_sid(), _schedule(queue, YEARLY, paused=True))
            before = await handle.describe()
            assert before.info.num_actions == 0
            assert before.info.next_action_times[0].month == 1 and before.info.next_action_times[0].day == 1
            async with Worker(client, task_queue=queue, workflows=[Report]):
                await handle.trigger()
                described = await handle.describe()
                assert described.info.num_actions == 1
                (action,) = described.info.recent_actions
                result = await client.get_workflow_handle(action.action.workflow_id).result()
                assert result == "done"
            await handle.delete()

    asyncio.run(scenario())


def test_backfill_over_a_past_range_starts_one_run_per_spec_time(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        async with _client(stack, tenant) as client:
            minutely = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(minutes=1))])
            handle = await client.create_schedule(_sid(), _schedule(queue, minutely, paused=True))
            start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
            await handle.backfill(
                ScheduleBackfill(start, start + timedelta(minutes=5), overlap=ScheduleOverlapPolicy.ALLOW_ALL)
            )
            described = await handle.describe()
            ids = sorted(a.action.workflow_id for a in described.info.recent_actions)
            assert ids == [f"report-2026-01-05T09:0{m}:00Z" for m in range(5)]
            assert described.info.num_actions == 5
            await handle.delete()

    asyncio.run(scenario())


def test_update_changes_the_action_and_delete_removes_the_schedule(
    stack: Stack, tenant: Tenant, queue: str, api: Api
) -> None:
    async def scenario() -> None:
        async with _client(stack, tenant) as client:
            sid = _sid()
            handle = await client.create_schedule(sid, _schedule(queue, YEARLY))

            def longer(update: ScheduleUpdateInput) -> ScheduleUpdate:
                schedule = update.description.schedule
                schedule.action.args = [9.0]
                schedule.state.note = "nine seconds"
                return ScheduleUpdate(schedule=schedule)

            await handle.update(longer)
            described = await handle.describe()
            assert described.schedule.action.args == [9.0]
            assert described.info.last_updated_at is not None
            assert sid in [s.id async for s in client.list_schedules()]
            await handle.delete()
            with pytest.raises(NotFoundError):
                await handle.describe()
            assert sid not in [s.id async for s in client.list_schedules()]

    asyncio.run(scenario())
    bad = api.post(
        "/schedules",
        {"schedule_id": "x", "schedule": {"spec": {"cron_expressions": ["99 * * * *"]}, "action": {}}},
    )
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"
    wrong_tz = api.post(
        "/schedules",
        {
            "schedule_id": "tz",
            "schedule": {
                "spec": {"intervals": [{"every": 60}], "time_zone_name": "Nowhere/Land"},
                "action": {"workflow_type": "Report", "workflow_id": "r", "task_queue": queue},
            },
        },
    )
    assert wrong_tz.status_code == 400 and "time_zone_name" in wrong_tz.json()["message"]
    assert api.get("/schedules/tz").status_code == 404


def test_a_shard_owner_that_was_down_fires_only_what_is_inside_the_catchup_window(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    """Stop the stack's shard owner for 13 s under a 10 s catch-up window, then start a new one."""

    async def scenario() -> None:
        async with _client(stack, tenant) as client:
            schedule = _schedule(queue)
            schedule.policy.catchup_window = timedelta(seconds=10)
            handle = await client.create_schedule(_sid(), schedule)
            owner = stack.shard_owner
            owner.terminate()  # SIGTERM: it releases its leases on the way out
            owner.wait(15)
            stopped_at = datetime.now(UTC)
            before = (await handle.describe()).info
            await asyncio.sleep(13)
            assert (await handle.describe()).info.num_actions == before.num_actions  # nobody fires
            stack.replace_shard_owner(f"owner-{uuid.uuid4().hex[:6]}")  # later tests use it
            for _ in range(300):  # the new daemon boots, claims the shards and catches up
                if (await handle.describe()).info.num_actions > before.num_actions:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)
            await handle.pause()
            after = (await handle.describe()).info
            assert after.num_actions_missed_catchup_window >= 2, after
            # what fired is the window's worth (ten times), not the whole outage
            assert after.num_actions - before.num_actions >= 9, after
            caught_up = [
                a.scheduled_at for a in after.recent_actions[-(after.num_actions - before.num_actions) :]
            ]
            first_fired = min(caught_up)
            assert first_fired - stopped_at >= timedelta(seconds=2), (stopped_at, caught_up)
            await handle.delete()

    asyncio.run(scenario())
