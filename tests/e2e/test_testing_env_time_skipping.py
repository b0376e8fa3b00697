"""``WorkflowEnvironment.start_time_skipping()``: a private stack whose server clock jumps to
the next timer when the worker is idle, so a 30-day sleep ends in well under a second, and
the example program that shows it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sdk import workflow
from sdk.testing import WorkflowEnvironment
from sdk.worker import Worker
from tests.e2e.test_testing_env_start_local import own_database  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400), pytest.mark.usefixtures("own_database")]

ROOT = Path(__file__).resolve().parents[2]
THIRTY_DAYS = timedelta(days=30)


@workflow.defn
class LongNap:
    @workflow.run
    async def run(self) -> float:
        """Sleep 30 days; return how long the workflow's own clock says that took, in seconds."""
        before = workflow.now()
        await workflow.sleep(THIRTY_DAYS)
        return (workflow.now() - before).total_seconds()


def test_a_thirty_day_sleep_ends_in_seconds_of_wall_time() -> None:
    async def scenario() -> tuple[float, float, timedelta, bool]:
        async with await WorkflowEnvironment.start_time_skipping() as env:
            queue = f"q-{uuid.uuid4().hex[:8]}"
            async with Worker(env.client, task_queue=queue, workflows=[LongNap]):
                began = time.monotonic()
                slept = await env.client.execute_workflow(
                    LongNap.run, id=f"nap-{uuid.uuid4().hex[:8]}", task_queue=queue
                )
                wall = time.monotonic() - began
            ahead = await env.get_current_time() - datetime.now(UTC)
            return wall, slept, ahead, env.supports_time_skipping

    wall, slept, ahead, supported = asyncio.run(scenario())

    assert supported
    assert slept >= THIRTY_DAYS.total_seconds(), "workflow.now() moved on by the whole 30 days"
    # Skipped, not waited: about a second here, bounded loosely so a busy machine does not fail it.
    assert wall < 10.0, f"the 30-day sleep took {wall:.2f} s of wall time"
    assert ahead >= THIRTY_DAYS - timedelta(minutes=1), "the server's clock kept the jump"


def test_the_example_program_prints_what_it_documents() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "examples.time_skipping"],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for line in [
        "Supports time skipping: True",
        "Trial of ada: charged after 30 days",
        "Thirty days took ",
        "Trial of bob: cancelled after 10 days",
        "Server clock ahead of real time: 40 days",
    ]:
        assert line in done.stdout, done.stdout
