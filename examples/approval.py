"""An approval flow: the workflow waits for an ``approve`` signal; ``status`` answers meanwhile.

Run ``python -m examples.approval`` against ``make run``.
"""

from __future__ import annotations

import asyncio
import uuid

from examples._connect import TASK_QUEUE, connect
from sdk import workflow


@workflow.defn
class Approval:
    def __init__(self) -> None:
        self.approver = ""

    @workflow.run
    async def run(self, request: str) -> str:
        await workflow.wait_condition(lambda: bool(self.approver))
        return f"{request} approved by {self.approver}"

    @workflow.signal
    def approve(self, approver: str) -> None:
        self.approver = approver

    @workflow.query
    def status(self) -> str:
        return f"approved by {self.approver}" if self.approver else "waiting for approval"


async def main() -> None:
    client = await connect()
    handle = await client.start_workflow(
        Approval.run, "expense #7", id=f"approval-{uuid.uuid4().hex[:6]}", task_queue=TASK_QUEUE
    )
    print("status:", await handle.query(Approval.status))
    await handle.signal(Approval.approve, "grace")
    print("result:", await handle.result())
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
