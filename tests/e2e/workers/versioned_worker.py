"""A worker process for redeploy tests: one deploy of the code, optionally with a build id.

``Pricing`` exists in three deploys of the same workflow, picked by PRICING_CODE:
``v1`` charges the list price, ``v2`` adds the discount behind ``workflow.patched``,
``v3`` keeps only the discount and marks the patch deprecated. ``Order`` reports, from
an activity, the build of the process that ran each of its two steps.
Environment: CHRONICLE_URL, CHRONICLE_NAMESPACE, CHRONICLE_API_KEY, TASK_QUEUE, and
optionally PRICING_CODE (default v1), BUILD_ID and USE_WORKER_VERSIONING=1.
"""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client
from sdk.worker import Worker

PATCH = "discount"
STEP = timedelta(seconds=30)


@activity.defn
def build_of_this_process() -> str:
    """The build the activity ran on, so a test sees where work really happened."""
    return os.environ.get("BUILD_ID") or "unversioned"


class _WaitsToProceed:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True


@workflow.defn(name="Pricing")
class PricingV1(_WaitsToProceed):
    @workflow.run
    async def run(self) -> str:
        label = "list price"
        await workflow.wait_condition(lambda: self.go)
        return label


@workflow.defn(name="Pricing")
class PricingV2(_WaitsToProceed):
    @workflow.run
    async def run(self) -> str:
        label = "discount" if workflow.patched(PATCH) else "list price"
        await workflow.wait_condition(lambda: self.go)
        return label


@workflow.defn(name="Pricing")
class PricingV3(_WaitsToProceed):
    @workflow.run
    async def run(self) -> str:
        workflow.deprecate_patch(PATCH)
        label = "discount"
        await workflow.wait_condition(lambda: self.go)
        return label


@workflow.defn
class Order(_WaitsToProceed):
    """Runs a step, waits for ``proceed``, runs another; returns the build of each step."""

    @workflow.run
    async def run(self) -> list[str]:
        first: str = await workflow.execute_activity(build_of_this_process, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: self.go)
        second: str = await workflow.execute_activity(build_of_this_process, start_to_close_timeout=STEP)
        return [first, second]


PRICING_DEPLOYS = {"v1": PricingV1, "v2": PricingV2, "v3": PricingV3}


async def main() -> None:
    client = await Client.connect(
        os.environ["CHRONICLE_URL"],
        namespace=os.environ["CHRONICLE_NAMESPACE"],
        api_key=os.environ["CHRONICLE_API_KEY"],
    )
    build_id = os.environ.get("BUILD_ID") or None
    worker = Worker(
        client,
        task_queue=os.environ["TASK_QUEUE"],
        workflows=[PRICING_DEPLOYS[os.environ.get("PRICING_CODE", "v1")], Order],
        activities=[build_of_this_process],
        identity=f"{build_id or 'unversioned'}-{os.getpid()}",
        build_id=build_id,
        use_worker_versioning=os.environ.get("USE_WORKER_VERSIONING") == "1",
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(worker.shutdown()))
    await worker.run()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
