"""Large payloads live once in the payload store; events carry references the SDK resolves."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

from sdk import activity, workflow
from sdk._runtime.replayer import WorkflowHistory
from sdk.client import Client
from sdk.worker import Replayer, Worker
from tests.conftest import Api, Stack, Tenant

BLOB = "x" * 50_000  # far past the 2 KiB inline limit
STEP = timedelta(seconds=10)


@activity.defn
async def make_blob(tag: str) -> str:
    return f"{tag}:{BLOB}"


@workflow.defn
class BlobCollector:
    """Takes two large signals, then runs an activity with a large result twice."""

    def __init__(self) -> None:
        self.blobs: list[str] = []

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: len(self.blobs) == 2)
        first = await workflow.execute_activity(make_blob, "same", start_to_close_timeout=STEP)
        second = await workflow.execute_activity(make_blob, "same", start_to_close_timeout=STEP)
        assert first == second == f"same:{BLOB}"
        assert self.blobs == [BLOB, BLOB]
        return len(first) + sum(len(b) for b in self.blobs)

    @workflow.signal
    def blob(self, value: str) -> None:
        self.blobs.append(value)


def _refs(events: list[dict[str, Any]]) -> list[str]:
    """The digests the raw (server-side) events refer to."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "payload_ref" in value:
                found.append(value["payload_ref"]["sha256"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(events)
    return found


def test_large_signals_and_results_are_stored_once_and_seen_in_full(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = f"blob-{uuid.uuid4().hex[:8]}"

    async def body() -> tuple[int, WorkflowHistory, int]:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        async with Worker(client, task_queue=queue, workflows=[BlobCollector], activities=[make_blob]):
            handle = await client.start_workflow("BlobCollector", id=wid, task_queue=queue)
            await handle.signal("blob", BLOB)
            await handle.signal("blob", BLOB)
            result = await asyncio.wait_for(handle.result(), 60)
        # A fresh client (empty cache) sees full values in the fetched history.
        reader = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["client"])
        history = await reader.get_workflow_handle(wid).fetch_history()
        fetches = reader.payload_refs.fetches
        await client.close()
        await reader.close()
        return result, history, fetches

    result, history, fetches = asyncio.run(body())
    assert result == 3 * 50_000 + len("same:")

    raw = api.events(wid)
    digests = _refs(raw)
    # Two signals with one value, two activity results with one value: two stored payloads.
    assert len(digests) == 4 and len(set(digests)) == 2
    assert fetches == 2
    assert BLOB not in json.dumps(raw)
    assert api.describe(wid)["history_size_bytes"] < 10_000

    # The fetched history has the values inline and round-trips through JSON into a replay.
    assert _refs(history.events) == []
    signals = [e for e in history.events if e["event_type"] == "WorkflowExecutionSignaled"]
    assert signals[0]["attributes"]["input"][0]["data"] == BLOB
    again = WorkflowHistory.from_json(history.to_json())
    assert again.events == history.events
    Replayer(workflows=[BlobCollector]).replay_workflow(again)

    for digest in set(digests):
        for key in ("worker", "client"):
            r = Api(stack, tenant, key).get(f"/payloads/{digest}")
            assert r.status_code == 200, r.text
            assert r.json()["sha256"] == digest
    bad = api.get("/payloads/not-a-digest")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"
    missing = api.get("/payloads/" + "0" * 64)
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_a_signal_past_the_hard_limit_is_refused(stack: Stack, tenant: Tenant, api: Api, queue: str) -> None:
    wid = f"huge-{uuid.uuid4().hex[:8]}"
    api.start(wid, queue)
    huge = {"metadata": {"encoding": "json/plain"}, "data": "y" * (2 * 1024 * 1024 + 10)}
    r = api.post(f"/workflows/{wid}/signal", {"signal_name": "blob", "input": [huge]})
    assert r.status_code == 413 and r.json()["code"] == "payload_too_large", r.text
    assert "WorkflowExecutionSignaled" not in api.event_types(wid)
