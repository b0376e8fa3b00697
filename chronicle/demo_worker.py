"""The worker ``start_dev`` launches: hosts the examples' workflows and activities on "demo".

It lives with the development server, not in the SDK, so the SDK's wheel ships no demo
(it needs the ``examples`` package, which only a checkout has).

Reads the dev server's ``.chronicle/dev.json`` (or CHRONICLE_URL / CHRONICLE_NAMESPACE /
CHRONICLE_API_KEY) and runs until interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from examples import catalog
from examples._connect import TASK_QUEUE, connect
from sdk.worker import Worker


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    client = await connect()
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=catalog.WORKFLOWS,
        activities=catalog.ACTIVITIES,
    )
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):  # finish in-flight tasks before exiting
        loop.add_signal_handler(signum, lambda: asyncio.ensure_future(worker.shutdown()))
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
