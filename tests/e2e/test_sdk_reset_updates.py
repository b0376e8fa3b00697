"""A reset reapplies updates, with real server and worker processes: an update completed after
the reset point is validated and handled again by the new run, and a caller asking for that
update id gets the new run's outcome; excluding updates leaves it out. The new run's history,
with its ``WorkflowExecutionUpdateAdmitted`` event, replays deterministically."""

from __future__ import annotations

import asyncio
import uuid

from click.testing import CliRunner

from sdk import workflow
from sdk.cli.main import build
from sdk.client import Client
from sdk.worker import Replayer, Worker
from tests.conftest import Stack, Tenant


@workflow.defn
class Tally:
    def __init__(self) -> None:
        self.total = 0
        self.done = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.done)
        return self.total

    @workflow.update
    def add(self, n: int) -> str:
        self.total += n
        return f"{workflow.info().run_id}:{self.total}"

    @add.validator
    def check_add(self, n: int) -> None:
        if n <= 0:
            raise ValueError("add a positive amount")

    @workflow.signal
    def finish(self) -> None:
        self.done = True


def test_a_reset_asks_the_new_run_again_for_an_update_completed_after_the_point(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        async with Worker(client, task_queue=queue, workflows=[Tally]):
            kept = await client.start_workflow(
                Tally.run, id=f"tally-{uuid.uuid4().hex[:8]}", task_queue=queue
            )
            first_run = (await kept.describe()).run_id
            assert await kept.execute_update(Tally.add, 5, id="add-5") == f"{first_run}:5"
            new_run = await kept.reset(reset_type="FirstWorkflowTask", reason="redo")

            # The caller asks by update id, without a run: the new run handles it again.
            again = client.get_workflow_handle(kept.id).get_update_handle("add-5", result_type=str)
            assert await asyncio.wait_for(again.result(), 30) == f"{new_run}:5"
            current = client.get_workflow_handle(kept.id)
            await current.signal(Tally.finish)
            assert await asyncio.wait_for(current.result(), 30) == 5
            history = await client.get_workflow_handle(kept.id, run_id=new_run).fetch_history()

            dropped = await client.start_workflow(
                Tally.run, id=f"tally-{uuid.uuid4().hex[:8]}", task_queue=queue
            )
            await dropped.execute_update(Tally.add, 7, id="add-7")
            await dropped.reset(reset_type="FirstWorkflowTask", reason="redo", reapply_updates=False)
            current = client.get_workflow_handle(dropped.id)
            await current.signal(Tally.finish)
            assert await asyncio.wait_for(current.result(), 30) == 0
        await client.close()

        types = [e.event_type.name for e in history.events]
        assert types.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED") == 1
        assert types.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED") == 1
        assert types.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED") == 1
        assert Replayer(workflows=[Tally]).replay_workflow(history).replay_failure is None

    asyncio.run(scenario())


def test_the_cli_takes_one_of_reapply_type_and_reapply_exclude() -> None:
    both = CliRunner().invoke(
        build(),
        ["workflow", "reset", "-w", "w", "-e", "4", "--reason", "x", "--reapply-type", "Signal",
         "--reapply-exclude", "Update"],
    )  # fmt: skip
    assert both.exit_code == 2 and "--reapply-type cannot be used with --reapply-exclude" in both.output
    unknown = CliRunner().invoke(
        build(), ["workflow", "reset", "-w", "w", "-e", "4", "--reason", "x", "--reapply-exclude", "Timer"]
    )
    assert unknown.exit_code == 2 and "Timer" in unknown.output
