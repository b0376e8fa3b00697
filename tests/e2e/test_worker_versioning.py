"""Versioning across real redeploys: patch markers, and worker versioning by build id.

Every worker here is its own process (tests/e2e/workers/versioned_worker.py), stopped
and started the way a deploy would, so each new process replays history from scratch.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from sdk.client import BuildIdOpAddNewDefault, Client
from tests.conftest import ROOT, Api, Stack, Tenant, wait_until

PATCH_MARKER = "core_patch"


def _wid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextmanager
def _worker(stack: Stack, tenant: Tenant, queue: str, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A worker process for the duration of the block, then stopped cleanly (SIGTERM)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.workers.versioned_worker"],
        cwd=ROOT,
        env={
            **stack.env,
            "CHRONICLE_URL": stack.url,
            "CHRONICLE_NAMESPACE": tenant.namespace,
            "CHRONICLE_API_KEY": tenant.keys["all"],
            "TASK_QUEUE": queue,
            **env,
        },
    )
    try:
        yield process
    finally:
        process.terminate()
        assert process.wait(30) == 0


def _versioned(build_id: str, code: str = "v1") -> dict[str, str]:
    return {"BUILD_ID": build_id, "USE_WORKER_VERSIONING": "1", "PRICING_CODE": code}


def _start(api: Api, workflow_type: str, queue: str, prefix: str) -> str:
    workflow_id = _wid(prefix)
    api.start(workflow_id, queue, workflow_type=workflow_type)
    return workflow_id


def _until_blocked(api: Api, workflow_id: str, activities: int = 0) -> None:
    """Wait until the run has done its first steps and waits for ``proceed``."""

    def blocked() -> bool:
        types = api.event_types(workflow_id)
        done = "WorkflowTaskCompleted" in types and types.count("ActivityTaskCompleted") == activities
        return done and api.describe(workflow_id)["pending_workflow_task"] is None

    wait_until(blocked, timeout=30)


def _proceed(api: Api, workflow_id: str) -> None:
    r = api.post(f"/workflows/{workflow_id}/signal", {"signal_name": "proceed"})
    assert r.status_code in (200, 202), r.text


def _results(stack: Stack, tenant: Tenant, *workflow_ids: str) -> list[Any]:
    async def collect() -> list[Any]:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        try:
            handles = [client.get_workflow_handle(w).result() for w in workflow_ids]
            return list(await asyncio.wait_for(asyncio.gather(*handles), 60))
        finally:
            await client.close()

    return asyncio.run(collect())


def _patch_markers(api: Api, workflow_id: str) -> list[tuple[str, bool]]:
    """(patch id, deprecated) of each patch marker the run recorded."""
    markers = []
    for event in api.events(workflow_id):
        attrs = event["attributes"]
        if event["event_type"] == "MarkerRecorded" and attrs["marker_name"] == PATCH_MARKER:
            details = attrs["details"]
            markers.append((details["patch_id"]["data"], details["deprecated"]["data"]))
    return markers


def test_patched_code_redeployed_twice_keeps_every_run_on_the_branch_it_started_on(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    with _worker(stack, tenant, queue, PRICING_CODE="v1"):
        before_patch = _start(api, "Pricing", queue, "v1-run")
        _until_blocked(api, before_patch)
    with _worker(stack, tenant, queue, PRICING_CODE="v2"):
        with_patch = _start(api, "Pricing", queue, "v2-run")
        _until_blocked(api, with_patch)
        # The v1 run replays on v2 code: no marker in its history, so the old branch.
        _proceed(api, before_patch)
        assert _results(stack, tenant, before_patch) == ["list price"]
    with _worker(stack, tenant, queue, PRICING_CODE="v3"):
        after_deprecation = _start(api, "Pricing", queue, "v3-run")
        _until_blocked(api, after_deprecation)
        _proceed(api, with_patch)
        _proceed(api, after_deprecation)
        assert _results(stack, tenant, with_patch, after_deprecation) == ["discount", "discount"]
    assert _patch_markers(api, before_patch) == []
    assert _patch_markers(api, with_patch) == [("discount", False)]
    assert _patch_markers(api, after_deprecation) == [("discount", True)]
    for workflow_id in (before_patch, with_patch, after_deprecation):
        assert "WorkflowTaskFailed" not in api.event_types(workflow_id)


def _set_current_build(api: Api, queue: str, build_id: str) -> dict[str, Any]:
    r = api.post(f"/task-queues/{queue}/build-ids", {"build_id": build_id})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def _switch_with_the_sdk(stack: Stack, tenant: Tenant, queue: str, build_id: str) -> Any:
    client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
    try:
        await client.update_worker_build_id_compatibility(queue, BuildIdOpAddNewDefault(build_id))
        return await client.get_worker_build_id_compatibility(queue)
    finally:
        await client.close()


async def _described_build(stack: Stack, tenant: Tenant, workflow_id: str) -> str | None:
    client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
    try:
        return (await client.get_workflow_handle(workflow_id).describe()).assigned_build_id
    finally:
        await client.close()


def _workflow_task_builds(api: Api, workflow_id: str) -> set[str]:
    """The builds recorded on the run's WorkflowTaskStarted and WorkflowTaskCompleted events."""
    return {
        e["attributes"]["worker_version"]["build_id"]
        for e in api.events(workflow_id)
        if e["event_type"] in ("WorkflowTaskStarted", "WorkflowTaskCompleted")
    }


def _queue(api: Api, queue: str) -> dict[str, Any]:
    r = api.get(f"/task-queues/{queue}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _backlog(api: Api, queue: str) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {(b["task_type"], b["build_id"]): b for b in _queue(api, queue)["backlog"]}


def _pollers_by_build(api: Api, queue: str) -> dict[str | None, set[str]]:
    grouped: dict[str | None, set[str]] = {}
    for poller in _queue(api, queue)["pollers"]:
        grouped.setdefault(poller["build_id"], set()).add(poller["task_type"])
    return grouped


def test_runs_stay_on_the_build_they_started_on_while_new_runs_go_to_the_new_build(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    _set_current_build(api, queue, "A")
    with _worker(stack, tenant, queue, **_versioned("A")):
        on_a = [_start(api, "Order", queue, "on-a") for _ in range(2)]
        for workflow_id in on_a:
            _until_blocked(api, workflow_id, activities=1)
        changes = _set_current_build(api, queue, "B")
        assert changes["current_build_id"] == "B"
        assert [c["build_id"] for c in changes["changes"]] == ["B", "A"]
        with _worker(stack, tenant, queue, **_versioned("B")):
            on_b = [_start(api, "Order", queue, "on-b") for _ in range(2)]
            for workflow_id in on_b:
                _until_blocked(api, workflow_id, activities=1)
            wait_until(lambda: _pollers_by_build(api, queue).keys() >= {"A", "B"}, timeout=15)
            assert _pollers_by_build(api, queue)["A"] == {"workflow", "activity"}
            assert _pollers_by_build(api, queue)["B"] == {"workflow", "activity"}
            for workflow_id in on_a + on_b:
                _proceed(api, workflow_id)
            assert _results(stack, tenant, *on_a, *on_b) == [["A", "A"]] * 2 + [["B", "B"]] * 2
    for workflow_id in on_a:
        assert api.describe(workflow_id)["assigned_build_id"] == "A"
        assert _workflow_task_builds(api, workflow_id) == {"A"}
    for workflow_id in on_b:
        assert api.describe(workflow_id)["assigned_build_id"] == "B"
        assert _workflow_task_builds(api, workflow_id) == {"B"}
    listed = api.get("/workflows", query="WorkflowType = 'Order'").json()["executions"]
    assert {e["workflow_id"]: e["assigned_build_id"] for e in listed} == {
        **dict.fromkeys(on_a, "A"),
        **dict.fromkeys(on_b, "B"),
    }


def test_a_run_pinned_to_a_build_waits_for_that_build_and_never_goes_to_the_current_one(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    _set_current_build(api, queue, "A")
    with _worker(stack, tenant, queue, **_versioned("A")):
        pinned = _start(api, "Order", queue, "pinned")
        _until_blocked(api, pinned, activities=1)
    sets = asyncio.run(_switch_with_the_sdk(stack, tenant, queue, "B"))
    assert [s.build_ids for s in sets.version_sets] == [["A"], ["B"]]
    assert sets.default_build_id() == "B"
    with _worker(stack, tenant, queue, **_versioned("B")):
        fresh = _start(api, "Order", queue, "fresh")
        _until_blocked(api, fresh, activities=1)
        _proceed(api, pinned)
        _proceed(api, fresh)
        assert _results(stack, tenant, fresh) == [["B", "B"]]
        # The gone A worker's sticky queue times out; the task moves to the normal queue, still A's.
        wait_until(lambda: ("workflow", "A") in _backlog(api, queue), timeout=15)
        watch_until = time.monotonic() + 2  # B's pollers have every chance to take the task
        while time.monotonic() < watch_until:
            waiting = api.describe(pinned)
            assert waiting["status"] == "Running"
            assert waiting["pending_workflow_task"]["started"] is False
            time.sleep(0.2)
        backlog = _backlog(api, queue)
        assert backlog[("workflow", "A")]["backlog_count"] == 1
        assert backlog[("workflow", "A")]["oldest_task_age_seconds"] >= 2
        assert ("workflow", "B") not in backlog
    with _worker(stack, tenant, queue, **_versioned("A")):
        assert _results(stack, tenant, pinned) == [["A", "A"]]
    assert _workflow_task_builds(api, pinned) == {"A"}
    assert asyncio.run(_described_build(stack, tenant, pinned)) == "A"


def _error(r: Any, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["message"], body
    return str(body["code"])


@pytest.mark.parametrize(
    "body",
    [{}, {"build_id": ""}, {"build_id": 7}, {"build_id": "x" * 256}, {"build_id": "a\u0000b"}],
)
def test_a_bad_build_id_is_refused_and_changes_nothing(api: Api, queue: str, body: dict[str, Any]) -> None:
    _set_current_build(api, queue, "A")
    code = _error(api.post(f"/task-queues/{queue}/build-ids", body), 400)
    assert code in ("invalid_argument", "malformed_request")
    assert api.get(f"/task-queues/{queue}/build-ids").json()["current_build_id"] == "A"


def test_only_an_admin_key_reads_or_sets_the_current_build(stack: Stack, tenant: Tenant, queue: str) -> None:
    for role in ("client", "worker"):
        limited = Api(stack, tenant, key=role)
        assert _error(limited.post(f"/task-queues/{queue}/build-ids", {"build_id": "A"}), 403)
        assert _error(limited.get(f"/task-queues/{queue}/build-ids"), 403)
    admin = Api(stack, tenant)
    assert admin.get(f"/task-queues/{queue}/build-ids").json() == {
        "task_queue": queue,
        "current_build_id": None,
        "changes": [],
    }


@pytest.mark.parametrize(
    "capabilities",
    [
        "A",
        {"use_versioning": True},
        {"build_id": 3, "use_versioning": True},
        {"build_id": "A", "use_versioning": "yes"},
    ],
)
def test_a_poll_with_a_malformed_worker_version_gets_a_400(api: Api, queue: str, capabilities: Any) -> None:
    r = api.post(
        f"/task-queues/{queue}/workflow-tasks/poll",
        {"identity": "w", "timeout": 1, "worker_version_capabilities": capabilities},
    )
    assert _error(r, 400) == "invalid_argument"


def test_an_unversioned_queue_describes_its_pollers_without_builds(api: Api, queue: str) -> None:
    r = api.post(f"/task-queues/{queue}/workflow-tasks/poll", {"identity": "plain", "timeout": 0.1})
    assert r.status_code == 204, r.text
    description = _queue(api, queue)
    assert description["current_build_id"] is None
    assert description["backlog"] == []
    assert [(p["identity"], p["build_id"], p["task_type"]) for p in description["pollers"]] == [
        ("plain", None, "workflow")
    ]
