"""The soak's workflow and its worker process (``python bench/soak_workflow.py``).

``Soak`` sleeps until a due instant its starter chose, notes how late it woke, and keeps
the tokens of the signals it was sent; it completes once the sleep is over and a ``done``
signal came, so every signal the starter sent before ``done`` is in its history and in
its result. Its result is ``{"lateness": seconds, "tokens": [...]}``: the soak reads the
results from the database at the end and checks them against what it was told.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sdk import workflow
from sdk.client import Client
from sdk.worker import Worker

WORKFLOW = "Soak"
TOKEN_SIGNAL = "token"
DONE_SIGNAL = "done"


@workflow.defn(name=WORKFLOW)
class Soak:
    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.done = False

    @workflow.signal(name=TOKEN_SIGNAL)
    def token(self, value: str) -> None:
        self.tokens.append(value)

    @workflow.signal(name=DONE_SIGNAL)
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self, due: float) -> dict[str, Any]:
        """Sleep until ``due`` (epoch seconds), then wait for ``done``."""
        await workflow.sleep(max(0.001, due - workflow.now().timestamp()))
        lateness = workflow.now().timestamp() - due
        await workflow.wait_condition(lambda: self.done)
        return {"lateness": lateness, "tokens": self.tokens}


async def serve() -> None:
    """Run a worker for the soak's queue until the process is stopped."""
    client = await Client.connect(
        os.environ["CHRONICLE_URL"],
        namespace=os.environ["CHRONICLE_NAMESPACE"],
        api_key=os.environ["CHRONICLE_API_KEY"],
    )
    worker = Worker(client, task_queue=os.environ["TASK_QUEUE"], workflows=[Soak])
    await worker.run()


if __name__ == "__main__":
    asyncio.run(serve())
