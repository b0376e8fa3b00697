"""Schedules: a report that runs every day at 03:00, started once now, then paused and deleted.

The schedule starts a workflow each time it acts (its id is the action's id plus the time it
was due); ``trigger`` acts now, whatever the spec. Written as a Temporal program is, with only
the imports changed. Run it against ``make run``: ``python -m examples.schedules``.
"""

from __future__ import annotations

import asyncio
import uuid

from sdk import workflow
from sdk.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from sdk.envconfig import ClientConfig
from sdk.worker import Worker


@workflow.defn
class DailyReport:
    @workflow.run
    async def run(self, team: str) -> str:
        return f"report for {team}"


async def first_action(handle: ScheduleHandle) -> str:
    """The workflow id of the schedule's first action, once it has acted."""
    for _ in range(150):
        recent = (await handle.describe()).info.recent_actions
        if recent:
            return recent[0].action.workflow_id
        await asyncio.sleep(0.2)
    raise TimeoutError("the schedule did not act")


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"reports-{uuid.uuid4().hex[:8]}"
    schedule_id = f"daily-report-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[DailyReport]):
        handle = await client.create_schedule(
            schedule_id,
            Schedule(
                action=ScheduleActionStartWorkflow(
                    DailyReport.run, "data team", id=f"{schedule_id}-run", task_queue=task_queue
                ),
                spec=ScheduleSpec(cron_expressions=["0 3 * * *"]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
                state=ScheduleState(note="owned by the data team"),
            ),
            trigger_immediately=True,
        )
        described = await handle.describe()
        print(f"Next run at: {described.info.next_action_times[0]:%H:%M} UTC")
        workflow_id = await first_action(handle)
        print(f"Scheduled run result: {await client.get_workflow_handle(workflow_id).result()}")

        await handle.pause(note="paused for the holidays")
        state = (await handle.describe()).schedule.state
        print(f"Paused: {state.paused} ({state.note})")
        await handle.delete()
        remaining = [s.id async for s in await client.list_schedules() if s.id == schedule_id]
        print(f"Deleted: {not remaining}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
