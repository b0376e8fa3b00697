"""Workflow Update end to end, with real server and worker processes: the handler's value comes
back, a validator's rejection leaves no update event, an update id sent twice is applied once, an
accepted update outlives the worker process that accepted it, and update-with-start."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from sdk import workflow
from sdk.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from sdk.common import RawValue, WorkflowIDConflictPolicy
from sdk.exceptions import ApplicationError
from sdk.worker import Replayer, Worker
from tests.conftest import ROOT, Api, Stack, Tenant, wait_until

UPDATE_EVENTS = ("WorkflowExecutionUpdateAccepted", "WorkflowExecutionUpdateCompleted")


@workflow.defn
class Cart:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.checked_out = False
        self.fixed = False

    @workflow.run
    async def run(self) -> list[str]:
        workflow.set_update_handler("count", lambda: len(self.items))
        await workflow.wait_condition(lambda: self.checked_out and workflow.all_handlers_finished())
        return self.items

    @workflow.update
    async def add(self, item: str) -> int:
        info = workflow.current_update_info()
        assert info is not None and info.name == "add"
        await asyncio.sleep(0.05)  # a durable timer inside the handler
        self.items.append(item)
        return len(self.items)

    @add.validator
    def check_add(self, item: str) -> None:
        if not item:
            raise ApplicationError("an item needs a name")

    @workflow.update
    def fail(self) -> None:
        raise ApplicationError("the handler refused", non_retryable=True)

    @workflow.update(dynamic=True)
    def any_update(self, name: str, args: Sequence[RawValue]) -> str:
        return f"{name} with {len(args)} args"

    @workflow.update
    def flaky(self) -> str:
        if not self.fixed:
            raise RuntimeError("a bug in the handler")
        return "fixed"

    @workflow.signal
    def fix(self) -> None:
        self.fixed = True

    @workflow.signal
    def checkout(self) -> None:
        self.checked_out = True


@workflow.defn(name="Cart")
class CartWithoutAdd:
    """The same workflow after a deploy that dropped the ``add`` handler: replay must notice."""

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: False)
        return []


async def _connect(stack: Stack, tenant: Tenant) -> Client:
    return await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])


def _run(scenario: Any) -> None:
    asyncio.run(scenario)


def test_execute_update_returns_the_handler_value_and_failures_raise(
    stack: Stack, tenant: Tenant, queue: str, api: Api
) -> None:
    workflow_id = f"cart-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        client = await _connect(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Cart]):
            handle = await client.start_workflow(Cart.run, id=workflow_id, task_queue=queue)
            assert await handle.execute_update(Cart.add, "apple") == 1
            accepted = await handle.start_update(
                Cart.add, "pear", wait_for_stage=WorkflowUpdateStage.ACCEPTED
            )
            assert accepted.workflow_id == workflow_id
            assert await accepted.result() == 2
            assert await handle.execute_update("count", result_type=int) == 2
            assert await handle.execute_update("anything", args=[1, "x"]) == "anything with 2 args"
            with pytest.raises(WorkflowUpdateFailedError) as failed:
                await handle.execute_update(Cart.fail)
            assert "the handler refused" in str(failed.value.cause)
            assert await handle.get_update_handle(accepted.id, result_type=int).result() == 2
            await handle.signal(Cart.checkout)
            assert await handle.result() == ["apple", "pear"]
            history = await handle.fetch_history()
        await client.close()
        # Replay re-runs the accepted updates' handlers from their accepted events, deterministically.
        assert Replayer(workflows=[Cart]).replay_workflow(history).replay_failure is None
        dropped = Replayer(workflows=[CartWithoutAdd]).replay_workflow(history, raise_on_replay_failure=False)
        assert "history accepted update 'add'" in str(dropped.replay_failure)

    _run(scenario())
    types = api.event_types(workflow_id)
    assert types.count("WorkflowExecutionUpdateAccepted") == 5
    assert types.count("WorkflowExecutionUpdateCompleted") == 5


def test_a_rejected_update_leaves_no_event_and_an_update_id_is_applied_once(
    stack: Stack, tenant: Tenant, queue: str, api: Api
) -> None:
    workflow_id = f"cart-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        client = await _connect(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Cart]):
            handle = await client.start_workflow(Cart.run, id=workflow_id, task_queue=queue)
            assert await handle.execute_update(Cart.add, "apple", id="first-add") == 1
            before = api.event_types(workflow_id)
            with pytest.raises(WorkflowUpdateFailedError) as rejected:
                await handle.execute_update(Cart.add, "")
            assert "an item needs a name" in str(rejected.value.cause)
            # No update event; the workflow task that carried it stays (history is append-only).
            added = api.event_types(workflow_id)[len(before) :]
            assert not any(kind.startswith("WorkflowExecutionUpdate") for kind in added)
            # The same id again: the first outcome, applied once.
            assert await handle.execute_update(Cart.add, "apple", id="first-add") == 1
            assert await handle.execute_update(Cart.add, "other", id="first-add") == 1
            await handle.signal(Cart.checkout)
            assert await handle.result() == ["apple"]
        await client.close()

    _run(scenario())
    assert api.event_types(workflow_id).count("WorkflowExecutionUpdateAccepted") == 1


def test_update_with_start_starts_the_workflow_and_then_uses_the_running_one(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    workflow_id = f"cart-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        client = await _connect(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Cart]):
            for item, expected in (("apple", 1), ("pear", 2)):
                start = WithStartWorkflowOperation(
                    Cart.run,
                    id=workflow_id,
                    task_queue=queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                )
                count = await client.execute_update_with_start_workflow(
                    Cart.add, item, start_workflow_operation=start
                )
                assert count == expected
                handle = await start.workflow_handle()
                assert handle.id == workflow_id
            await handle.signal(Cart.checkout)
            assert await handle.result() == ["apple", "pear"]
        await client.close()

    _run(scenario())


def _start_worker(stack: Stack, tenant: Tenant, queue: str) -> subprocess.Popen[bytes]:
    env = {
        **stack.env,
        "CHRONICLE_URL": stack.url,
        "CHRONICLE_NAMESPACE": tenant.namespace,
        "CHRONICLE_API_KEY": tenant.keys["all"],
        "TASK_QUEUE": queue,
    }
    return subprocess.Popen([sys.executable, "-m", "tests.e2e.workers.update_worker"], cwd=ROOT, env=env)


def test_an_update_accepted_by_a_killed_worker_is_completed_by_the_next(
    stack: Stack, tenant: Tenant, queue: str, api: Api
) -> None:
    workflow_id = f"held-{uuid.uuid4().hex[:8]}"
    first = _start_worker(stack, tenant, queue)

    async def send_update() -> Any:
        client = await _connect(stack, tenant)
        handle = await client.start_workflow("HeldCart", id=workflow_id, task_queue=queue)
        update = await handle.start_update(
            "add", "apple", wait_for_stage=WorkflowUpdateStage.ACCEPTED, id="held"
        )
        return client, handle, update

    async def finish(client: Client, handle: Any, update: Any) -> tuple[Any, Any]:
        await handle.signal("release")
        count = await asyncio.wait_for(update.result(), timeout=60)
        await handle.signal("close")
        return count, await asyncio.wait_for(handle.result(), timeout=60)

    async def scenario() -> tuple[Any, Any]:
        client, handle, update = await send_update()
        assert "WorkflowExecutionUpdateAccepted" in api.event_types(workflow_id)
        assert "WorkflowExecutionUpdateCompleted" not in api.event_types(workflow_id)
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
        second = _start_worker(stack, tenant, queue)
        try:
            return await finish(client, handle, update)
        finally:
            await client.close()
            second.terminate()
            assert second.wait(20) == 0

    try:
        count, items = asyncio.run(scenario())
    finally:
        if first.poll() is None:
            first.kill()
    assert (count, items) == (1, ["apple"])
    types = api.event_types(workflow_id)
    assert [t for t in types if t in UPDATE_EVENTS] == list(UPDATE_EVENTS)
    wait_until(lambda: api.describe(workflow_id)["status"] == "Completed")


def test_a_handler_bug_fails_the_workflow_task_until_it_is_fixed(
    stack: Stack, tenant: Tenant, queue: str, api: Api
) -> None:
    """Temporal's rule: only a failure (``ApplicationError``) fails the update; any other
    exception fails the task, which is retried, and the update waits for it."""
    workflow_id = f"cart-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        client = await _connect(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Cart]):
            handle = await client.start_workflow(Cart.run, id=workflow_id, task_queue=queue)
            pending = asyncio.create_task(handle.execute_update(Cart.flaky))
            await asyncio.to_thread(
                wait_until, lambda: "WorkflowTaskFailed" in api.event_types(workflow_id), 15
            )
            assert not pending.done()
            await handle.signal(Cart.fix)
            assert await asyncio.wait_for(pending, timeout=30) == "fixed"
            await handle.signal(Cart.checkout)
            await handle.result()
        await client.close()

    _run(scenario())
