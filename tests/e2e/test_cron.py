"""Classic cron on start, end to end: the first run waits for the next cron time, each run
that completes, fails or times out starts the next one, and cancel or terminate ends the chain."""

from __future__ import annotations

import asyncio
import itertools
import math
import uuid
from datetime import datetime, timedelta
from typing import Any

from sdk import activity, workflow
from sdk.client import Client
from sdk.exceptions import ApplicationError
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant, wait_until

STEP = timedelta(seconds=10)
_ticks = itertools.count(1)


def _wid() -> str:
    return f"cron-{uuid.uuid4().hex[:8]}"


@activity.defn
async def tick() -> int:
    return next(_ticks)


@workflow.defn
class Ticker:
    """Tick 1 completes, tick 2 fails, tick 3 outlives its run timeout, later ticks complete."""

    @workflow.run
    async def run(self, base: int) -> dict[str, Any]:
        n = await workflow.execute_activity(tick, start_to_close_timeout=STEP) - base
        if n == 2:
            raise ApplicationError("tick two fails", non_retryable=True)
        if n == 3:
            await workflow.sleep(timedelta(seconds=30))
        last_failure = workflow.get_last_failure()
        return {
            "tick": n,
            "last": workflow.get_last_completion_result(),
            "last_failure": str(last_failure) if last_failure else None,
        }


def _run(api: Api, wid: str, run_id: str) -> dict[str, Any]:
    r = api.get(f"/workflows/{wid}/runs/{run_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _events(api: Api, wid: str, run_id: str) -> list[dict[str, Any]]:
    r = api.get(f"/workflows/{wid}/runs/{run_id}/history", page_size=256)
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def _chain(api: Api, wid: str, first_run: str) -> list[dict[str, Any]]:
    runs = [_run(api, wid, first_run)]
    while runs[-1]["new_run_id"]:
        runs.append(_run(api, wid, runs[-1]["new_run_id"]))
    return runs


def test_a_minute_cron_waits_for_the_next_minute_and_terminate_ends_it(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()

    async def start() -> str:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        handle = await client.start_workflow("Ticker", 0, id=wid, task_queue=queue, cron_schedule="* * * * *")
        await client.close()
        return handle.run_id or ""

    before = datetime.now().astimezone()
    run_id = asyncio.run(start())
    described = api.describe(wid)
    assert described["cron_schedule"] == "* * * * *" and described["status"] == "Running"
    events = _events(api, wid, run_id)
    assert [e["event_type"] for e in events] == ["WorkflowExecutionStarted"]  # no task before the minute
    started = events[0]["attributes"]
    assert started["cron_schedule"] == "* * * * *"
    backoff = started["first_workflow_task_backoff"]
    assert backoff == math.ceil(backoff) and 1 <= backoff <= 60
    scheduled = datetime.fromisoformat(described["execution_time"])
    next_minute = before.replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert next_minute <= scheduled < next_minute + timedelta(seconds=2)

    # A signal during the wait is recorded but schedules no workflow task.
    assert api.post(f"/workflows/{wid}/signal", {"signal_name": "poke"}).status_code == 200
    assert [e["event_type"] for e in _events(api, wid, run_id)][-1] == "WorkflowExecutionSignaled"
    assert api.describe(wid)["pending_workflow_task"] is None

    assert api.post(f"/workflows/{wid}/terminate", {"reason": "done"}).status_code == 200
    ended = api.describe(wid)
    assert ended["status"] == "Terminated" and ended["new_run_id"] is None
    assert len(api.get("/workflows", query=f"WorkflowId = '{wid}'").json()["executions"]) == 1


def test_each_closing_run_starts_the_next_until_cancelled(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()
    base = next(_ticks)  # ticks are counted per test process; this chain counts from here

    async def body(client: Client) -> str:
        handle = await client.start_workflow(
            Ticker.run,
            base,
            id=wid,
            task_queue=queue,
            cron_schedule="@every 1s",
            run_timeout=timedelta(seconds=2),
        )
        first = handle.run_id or ""
        await asyncio.to_thread(wait_until, lambda: len(_chain(api, wid, first)) >= 5, 40, 0.2)
        await client.get_workflow_handle(wid).cancel()
        await asyncio.to_thread(
            wait_until, lambda: _chain(api, wid, first)[-1]["status"] != "Running", 20, 0.2
        )
        return first

    async def with_worker() -> str:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        async with Worker(client, task_queue=queue, workflows=[Ticker], activities=[tick]):
            first = await asyncio.wait_for(body(client), 90)
        await client.close()
        return first

    first = asyncio.run(with_worker())
    runs = _chain(api, wid, first)
    statuses = [r["status"] for r in runs]
    assert statuses[:4] == ["Completed", "Failed", "TimedOut", "Completed"]
    assert statuses[-1] == "Canceled" and runs[-1]["new_run_id"] is None  # cancel ends the chain
    assert {r["first_run_id"] for r in runs} == {first}
    assert all(r["cron_schedule"] == "@every 1s" for r in runs)

    closes = [_events(api, wid, r["run_id"])[-1] for r in runs[:3]]
    assert [c["event_type"] for c in closes] == [
        "WorkflowExecutionCompleted",
        "WorkflowExecutionFailed",
        "WorkflowExecutionTimedOut",
    ]
    for close, later in zip(closes, runs[1:4], strict=True):
        assert close["attributes"]["new_execution_run_id"] == later["run_id"]

    starts = [_events(api, wid, r["run_id"])[0]["attributes"] for r in runs[:4]]
    assert "initiator" not in starts[0]
    assert [s["initiator"] for s in starts[1:]] == ["CRON_SCHEDULE"] * 3
    assert [s["attempt"] for s in starts] == [1, 1, 1, 1]
    assert [s["continued_execution_run_id"] for s in starts[1:]] == [r["run_id"] for r in runs[:3]]
    # A completed run hands on its result; a failed or timed-out one its failure and the last result.
    first_result = _run(api, wid, runs[0]["run_id"])["result"]
    assert [s.get("last_completion_result") for s in starts] == [
        None,
        first_result,
        first_result,
        first_result,
    ]
    assert starts[1]["continued_failure"] is None
    assert starts[2]["continued_failure"]["message"] == "tick two fails"
    assert starts[3]["continued_failure"]["message"] == "workflow timed out"
    fourth = _run(api, wid, runs[3]["run_id"])["result"][0]["data"]
    assert fourth["tick"] == 4 and fourth["last"] == {"tick": 1, "last": None, "last_failure": None}
    assert "timed out" in fourth["last_failure"]

    # Each run is scheduled at a whole-second step after the previous one's scheduled time.
    times = [datetime.fromisoformat(r["execution_time"]) for r in runs[:4]]
    for earlier, later in itertools.pairwise(times):
        gap = (later - earlier).total_seconds()
        assert gap >= 1.0


def test_bad_cron_schedules_are_refused(stack: Stack, tenant: Tenant, api: Api, queue: str) -> None:
    base = {"workflow_id": _wid(), "workflow_type": "Ticker", "task_queue": queue}
    r = api.post("/workflows", {**base, "cron_schedule": "61 * * * *"})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_argument"
    assert "minute: 61 is outside 0-59" in r.json()["message"]
    r = api.post("/workflows", {**base, "cron_schedule": "* * * * *", "start_delay": 5})
    assert r.status_code == 400 and "cannot be combined" in r.json()["message"]
    assert api.get("/workflows", query=f"WorkflowId = '{base['workflow_id']}'").json()["executions"] == []
