"""Child workflows and workflows talking to other workflows, run by real SDK workers.

A three-level tree (root → middle → leaf) shows each parent close policy acting on
the leaf when the middle closes; failures, duplicate ids, cancellation and external
signals and cancels show up in the parent both as SDK errors and as linked events.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from sdk import workflow
from sdk._runtime.replayer import WorkflowHistory
from sdk.client import Client
from sdk.common import RetryPolicy
from sdk.exceptions import (
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    NondeterminismError,
    WorkflowAlreadyStartedError,
    WorkflowFailureError,
)
from sdk.worker import Replayer, Worker
from tests.conftest import Api, Stack, Tenant, wait_until


def _wid(prefix: str = "wf") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@workflow.defn
class Leaf:
    """Waits for a ``finish`` signal; a cancel ends it as canceled."""

    def __init__(self) -> None:
        self.word = ""
        self.parent = ""

    @workflow.run
    async def run(self) -> str:
        parent = workflow.info().parent
        self.parent = f"{parent.workflow_id}/{parent.run_id}" if parent else ""
        await workflow.wait_condition(lambda: bool(self.word))
        return f"leaf {self.word}"

    @workflow.query
    def started_by(self) -> str:
        return self.parent

    @workflow.signal
    def finish(self, word: str) -> None:
        self.word = word


@workflow.defn
class Middle:
    """Starts a leaf with the given close policy and returns as soon as it runs."""

    @workflow.run
    async def run(self, leaf_id: str, policy: str) -> str:
        handle = await workflow.start_child_workflow(
            Leaf.run, id=leaf_id, parent_close_policy=workflow.ParentClosePolicy[policy]
        )
        return f"middle started {handle.id} ({handle.first_execution_run_id})"


@workflow.defn
class Root:
    """Runs a middle child to completion."""

    @workflow.run
    async def run(self, middle_id: str, leaf_id: str, policy: str) -> str:
        return str(await workflow.execute_child_workflow(Middle.run, args=[leaf_id, policy], id=middle_id))


@workflow.defn
class Breaks:
    @workflow.run
    async def run(self) -> str:
        raise ApplicationError("boom", type="Broken", non_retryable=True)


@workflow.defn
class Guardian:
    """Runs a failing child and reports what the failure looked like."""

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_child_workflow(Breaks.run, id=f"{workflow.info().workflow_id}-child")
        except ChildWorkflowError as err:
            cause = err.cause
            assert isinstance(cause, ApplicationError)
            return f"{type(cause).__name__}:{cause.message}:{cause.type}"
        return "no error"


@workflow.defn
class Twins:
    """Starts two children with one id: the second start fails inside the workflow."""

    @workflow.run
    async def run(self, child_id: str) -> str:
        first = await workflow.start_child_workflow(Leaf.run, id=child_id)
        try:
            await workflow.start_child_workflow(Leaf.run, id=child_id)
        except WorkflowAlreadyStartedError:
            outcome = "second refused"
        else:
            outcome = "second started"
        await first.signal(Leaf.finish, "once")
        return f"{outcome}; {await first}"


@workflow.defn
class Canceller:
    """Starts a waiting child, then cancels the task awaiting it."""

    @workflow.run
    async def run(self, child_id: str) -> str:
        handle = await workflow.start_child_workflow(Leaf.run, id=child_id)
        handle.cancel()
        try:
            await handle
        except ChildWorkflowError as err:
            return f"child {type(err.cause).__name__}"
        return "child finished"


@workflow.defn
class Messenger:
    """Signals one workflow, cancels it, and tries to signal one that does not exist."""

    @workflow.run
    async def run(self, target_id: str) -> str:
        target = workflow.get_external_workflow_handle(target_id)
        await target.signal(Leaf.finish, "from afar")
        await target.cancel(reason="done with it")
        try:
            await workflow.get_external_workflow_handle(f"{target_id}-missing").signal("finish", "lost")
        except ApplicationError:
            return "signalled, cancelled, missing refused"
        return "missing accepted"


@workflow.defn
class Holdout:
    """Receives a signal, then waits until cancelled."""

    def __init__(self) -> None:
        self.word = ""

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: False)
        return "never"

    @workflow.signal
    def finish(self, word: str) -> None:
        self.word = word

    @workflow.query
    def heard(self) -> str:
        return self.word


@workflow.defn
class Waiter:
    """Awaits a child that only a signal (or a cancel) ends."""

    @workflow.run
    async def run(self, child_id: str) -> str:
        return str(await workflow.execute_child_workflow(Leaf.run, id=child_id))


@workflow.defn
class Countdown:
    """Continues as new until n reaches 0, then returns its total."""

    @workflow.run
    async def run(self, n: int, total: int) -> int:
        if n > 0:
            workflow.continue_as_new(args=[n - 1, total + n])
        return total


@workflow.defn
class Flaky:
    """Fails its first two attempts."""

    @workflow.run
    async def run(self) -> int:
        attempt = workflow.info().attempt
        if attempt < 3:
            raise ApplicationError(f"attempt {attempt} failed")
        return attempt


@workflow.defn
class Patient:
    """Runs children whose chains go on (continue-as-new, retries) and one that times out."""

    @workflow.run
    async def run(self, prefix: str) -> str:
        total = await workflow.execute_child_workflow(Countdown.run, args=[3, 0], id=f"{prefix}-countdown")
        attempts = await workflow.execute_child_workflow(
            Flaky.run,
            id=f"{prefix}-flaky",
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=5),
        )
        try:
            await workflow.execute_child_workflow(
                Leaf.run, id=f"{prefix}-slow", execution_timeout=timedelta(seconds=1)
            )
        except ChildWorkflowError as err:
            return f"total {total}, attempts {attempts}, slow {type(err.cause).__name__}"
        return f"total {total}, attempts {attempts}, slow finished"


WORKFLOWS = [
    Leaf,
    Middle,
    Root,
    Breaks,
    Guardian,
    Twins,
    Canceller,
    Messenger,
    Holdout,
    Waiter,
    Countdown,
    Flaky,
    Patient,
]


def _run(stack: Stack, tenant: Tenant, queue: str, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def scenario() -> Any:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        try:
            async with Worker(client, task_queue=queue, workflows=WORKFLOWS):
                return await asyncio.wait_for(body(client), 60)
        finally:
            await client.close()

    return asyncio.run(scenario())


def _event(api: Api, workflow_id: str, event_type: str) -> dict[str, Any]:
    return next(e for e in api.events(workflow_id) if e["event_type"] == event_type)


def _status(api: Api, workflow_id: str) -> str:
    return str(api.describe(workflow_id)["status"])


@pytest.mark.parametrize(
    ("policy", "leaf_status"),
    [("TERMINATE", "Terminated"), ("REQUEST_CANCEL", "Canceled"), ("ABANDON", "Running")],
)
def test_a_three_level_tree_applies_the_parent_close_policy(
    stack: Stack, tenant: Tenant, api: Api, queue: str, policy: str, leaf_status: str
) -> None:
    root_id, middle_id, leaf_id = _wid("root"), _wid("middle"), _wid("leaf")

    async def body(client: Client) -> str:
        result = str(
            await client.execute_workflow(
                Root.run, args=[middle_id, leaf_id, policy], id=root_id, task_queue=queue
            )
        )
        await asyncio.to_thread(wait_until, lambda: _status(api, leaf_id) == leaf_status, 20)
        if policy == "ABANDON":
            leaf = client.get_workflow_handle(leaf_id)
            described = await leaf.describe()
            assert await leaf.query(Leaf.started_by) == f"{described.parent_id}/{described.parent_run_id}"
            await leaf.signal(Leaf.finish, "alone")
            assert await leaf.result() == "leaf alone"
        return result

    result = _run(stack, tenant, queue, body)
    leaf = api.describe(leaf_id)
    middle = api.describe(middle_id)
    assert result == f"middle started {leaf_id} ({leaf['run_id']})"
    assert (leaf["parent_workflow_id"], leaf["parent_run_id"]) == (middle_id, middle["run_id"])
    assert (middle["parent_workflow_id"], middle["parent_run_id"]) == (
        root_id,
        api.describe(root_id)["run_id"],
    )
    initiated = _event(api, root_id, "StartChildWorkflowExecutionInitiated")
    started = _event(api, root_id, "ChildWorkflowExecutionStarted")
    completed = _event(api, root_id, "ChildWorkflowExecutionCompleted")
    assert initiated["attributes"]["parent_close_policy"] == "PARENT_CLOSE_POLICY_TERMINATE"
    assert started["attributes"]["initiated_event_id"] == initiated["event_id"]
    assert started["attributes"]["workflow_execution"] == {
        "workflow_id": middle_id,
        "run_id": middle["run_id"],
    }
    assert completed["attributes"]["initiated_event_id"] == initiated["event_id"]
    assert completed["attributes"]["started_event_id"] == started["event_id"]
    leaf_started = _event(api, leaf_id, "WorkflowExecutionStarted")["attributes"]
    assert leaf_started["parent_workflow_execution"] == {"workflow_id": middle_id, "run_id": middle["run_id"]}
    assert api.describe(middle_id)["pending_children"] == [] or policy == "ABANDON"


def test_a_child_failure_reaches_the_parent_with_its_cause(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Guardian.run, id=wid, task_queue=queue)

    assert _run(stack, tenant, queue, body) == "ApplicationError:boom:Broken"
    failed = _event(api, wid, "ChildWorkflowExecutionFailed")["attributes"]
    assert failed["failure"]["message"] == "boom"
    assert failed["retry_state"] == "RETRY_STATE_RETRY_POLICY_NOT_SET"


def test_a_child_chain_reports_its_last_run_and_a_timeout_reaches_the_parent(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Patient.run, wid, id=wid, task_queue=queue)

    assert _run(stack, tenant, queue, body) == "total 6, attempts 3, slow TimeoutError"
    events = api.event_types(wid)
    assert events.count("ChildWorkflowExecutionCompleted") == 2
    assert "ChildWorkflowExecutionTimedOut" in events
    last_countdown = api.describe(f"{wid}-countdown")
    assert last_countdown["parent_workflow_id"] == wid
    assert last_countdown["first_run_id"] != last_countdown["run_id"]
    # The last run of the chain still names its parent and the parent's Initiated event.
    countdown_initiated = _event(api, wid, "StartChildWorkflowExecutionInitiated")["event_id"]
    last_started = _event(api, f"{wid}-countdown", "WorkflowExecutionStarted")["attributes"]
    assert last_started["parent_workflow_execution"]["workflow_id"] == wid
    assert last_started["parent_initiated_event_id"] == countdown_initiated


def test_a_duplicate_child_id_fails_the_second_start(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid, child_id = _wid(), _wid("twin")

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Twins.run, child_id, id=wid, task_queue=queue)

    assert _run(stack, tenant, queue, body) == "second refused; leaf once"
    failed = _event(api, wid, "StartChildWorkflowExecutionFailed")["attributes"]
    assert failed["cause"] == "START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_WORKFLOW_ALREADY_EXISTS"
    assert failed["workflow_id"] == child_id
    signaled = _event(api, wid, "ExternalWorkflowExecutionSignaled")["attributes"]
    assert signaled["workflow_execution"]["workflow_id"] == child_id


def test_cancelling_the_child_task_cancels_the_child(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid, child_id = _wid(), _wid("child")

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Canceller.run, child_id, id=wid, task_queue=queue)

    assert _run(stack, tenant, queue, body) == "child CancelledError"
    assert _status(api, child_id) == "Canceled"
    events = api.event_types(wid)
    assert events.index("RequestCancelExternalWorkflowExecutionInitiated") < events.index(
        "ExternalWorkflowExecutionCancelRequested"
    )
    assert "ChildWorkflowExecutionCanceled" in events
    requested = _event(api, child_id, "WorkflowExecutionCancelRequested")["attributes"]
    assert requested["external_workflow_execution"]["workflow_id"] == wid


def test_cancelling_the_parent_cancels_its_child_and_waits_for_it(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid, child_id = _wid(), _wid("child")

    async def body(client: Client) -> BaseException:
        handle = await client.start_workflow(Waiter.run, child_id, id=wid, task_queue=queue)
        await asyncio.to_thread(
            wait_until, lambda: "ChildWorkflowExecutionStarted" in api.event_types(wid), 20
        )
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        return failure.value.cause

    assert isinstance(_run(stack, tenant, queue, body), CancelledError)
    assert _status(api, child_id) == "Canceled"
    events = api.event_types(wid)
    assert events.index("ChildWorkflowExecutionCanceled") < events.index("WorkflowExecutionCanceled")


def test_an_external_handle_signals_and_cancels_another_workflow(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    target_id, sender_id = _wid("target"), _wid("sender")

    async def body(client: Client) -> tuple[Any, str]:
        target = await client.start_workflow(Holdout.run, id=target_id, task_queue=queue)
        outcome = await client.execute_workflow(Messenger.run, target_id, id=sender_id, task_queue=queue)
        await asyncio.to_thread(wait_until, lambda: _status(api, target_id) == "Canceled", 20)
        return outcome, await target.query(Holdout.heard)

    assert _run(stack, tenant, queue, body) == ("signalled, cancelled, missing refused", "from afar")
    signal = _event(api, target_id, "WorkflowExecutionSignaled")["attributes"]
    assert signal["external_workflow_execution"]["workflow_id"] == sender_id
    sender = api.event_types(sender_id)
    for expected in (
        "SignalExternalWorkflowExecutionInitiated",
        "ExternalWorkflowExecutionSignaled",
        "RequestCancelExternalWorkflowExecutionInitiated",
        "ExternalWorkflowExecutionCancelRequested",
        "SignalExternalWorkflowExecutionFailed",
    ):
        assert expected in sender
    failed = _event(api, sender_id, "SignalExternalWorkflowExecutionFailed")["attributes"]
    assert (
        failed["cause"]
        == "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND"
    )
    initiated = {e["event_id"]: e for e in api.events(sender_id)}[failed["initiated_event_id"]]
    assert initiated["event_type"] == "SignalExternalWorkflowExecutionInitiated"
    wtc = initiated["attributes"]["workflow_task_completed_event_id"]
    assert failed["workflow_task_completed_event_id"] == wtc


@workflow.defn(name="Root")
class RootWithOtherChild:
    """Starts a different child type than the recorded run did."""

    @workflow.run
    async def run(self, middle_id: str, leaf_id: str, policy: str) -> str:
        return str(await workflow.execute_child_workflow(Leaf.run, id=middle_id))


def test_a_saved_parent_history_replays_and_refuses_a_changed_child(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    root_id = _wid("root")

    async def body(client: Client) -> WorkflowHistory:
        handle = await client.start_workflow(
            Root.run, args=[_wid("middle"), _wid("leaf"), "TERMINATE"], id=root_id, task_queue=queue
        )
        await handle.result()
        return await handle.fetch_history()

    saved = WorkflowHistory.from_json(_run(stack, tenant, queue, body).to_json())
    assert Replayer(workflows=[Root]).replay_workflow(saved).replay_failure is None
    with pytest.raises(NondeterminismError, match="child workflow"):
        Replayer(workflows=[RootWithOtherChild]).replay_workflow(saved)
