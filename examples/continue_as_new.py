"""Continue-as-new: a counter that lives forever in short runs. Each run takes a batch of
signals, then starts a fresh run with the total so far, so no history grows without bound.

A run continues when the server suggests it (``is_continue_as_new_suggested``, from the
namespace's history limits) or after ``MAX_PER_RUN`` signals, here kept small to show it;
handlers finish first (``all_handlers_finished``), so no signal is lost across the handover.
The workflow id stays the same; each run has its own run id. Written as a Temporal program
is, with only the imports changed. Run it against ``make run``:
``python -m examples.continue_as_new``.
"""

from __future__ import annotations

import asyncio
import uuid

from sdk import workflow
from sdk.client import Client
from sdk.envconfig import ClientConfig
from sdk.worker import Worker

MAX_PER_RUN = 3


@workflow.defn
class Counter:
    def __init__(self) -> None:
        self.pending: list[int] = []
        self.done = False

    @workflow.run
    async def run(self, total: int, runs: int) -> str:
        taken = 0
        while True:
            await workflow.wait_condition(lambda: bool(self.pending) or self.done)
            while self.pending:  # signals that came before ``finish`` still count
                total += self.pending.pop(0)
                taken += 1
            if self.done:
                break
            if taken >= MAX_PER_RUN or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(args=[total, runs + 1])
        return f"total {total} after {runs + 1} runs"

    @workflow.signal
    def add(self, amount: int) -> None:
        self.pending.append(amount)

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"counter-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[Counter]):
        handle = await client.start_workflow(
            Counter.run, args=[0, 0], id=f"counter-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        for amount in range(1, 8):  # 1 + 2 + ... + 7 = 28
            # a handle without a run id follows the workflow to its latest run
            await client.get_workflow_handle(handle.id).signal(Counter.add, amount)
            await asyncio.sleep(0.2)
        await client.get_workflow_handle(handle.id).signal(Counter.finish)
        print(f"Workflow result: {await client.get_workflow_handle(handle.id).result()}")
        runs = [run.run_id async for run in client.list_workflows(f"WorkflowId = '{handle.id}'")]
        print(f"Runs of {handle.id}: {len(runs)}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
