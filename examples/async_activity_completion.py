"""Async activity completion: an activity hands its task token to someone else and returns
without a result; that someone completes it later through the client.

Here "someone else" is a coroutine standing in for a person or another system. Run it
against ``make run``: ``python -m examples.async_activity_completion``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client
from sdk.envconfig import ClientConfig
from sdk.worker import Worker

# Where the activity leaves its task token for the outside completer.
pending_tokens: asyncio.Queue[bytes] = asyncio.Queue()


@activity.defn
async def request_approval(item: str) -> str:
    activity.logger.info("asking for approval of %s", item)
    await pending_tokens.put(activity.info().task_token)
    activity.raise_complete_async()
    return ""  # not reached


@workflow.defn
class Purchase:
    @workflow.run
    async def run(self, item: str) -> str:
        decision = await workflow.execute_activity(
            request_approval, item, start_to_close_timeout=timedelta(minutes=5)
        )
        return f"{item}: {decision}"


async def approver(client: Client) -> None:
    """Completes the activity from outside the worker, by its token."""
    token = await pending_tokens.get()
    handle = client.get_async_activity_handle(task_token=token)
    await handle.heartbeat("reviewing")
    await handle.complete("approved")


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"purchase-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[Purchase], activities=[request_approval]):
        outside = asyncio.create_task(approver(client))
        result = await client.execute_workflow(
            Purchase.run, "laptop", id=f"purchase-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        await outside
    print(f"Workflow result: {result}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
