"""Replaying Update: an accepted update's handler runs again from its accepted event, at the
activation of the task that accepted it, so the commands it leads to match history. Read from
Temporal's JSON export too, so a team replays its Temporal histories with Update in them."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from sdk import workflow
from sdk._runtime.replayer import Replayer, WorkflowHistory
from tests.sdk_unit.test_typed_history_temporal import RUN_ID, _Export, _payloads


@workflow.defn
class Cart:
    def __init__(self) -> None:
        self.items: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: bool(self.items))
        await workflow.sleep(timedelta(seconds=5))  # only an applied update gets here
        return self.items

    @workflow.update
    def add(self, item: str) -> int:
        workflow.logger.info("adding %s", item)
        self.items.append(item)
        return len(self.items)


@workflow.defn(name="Cart")
class CartThatIgnoresUpdates:
    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: False)
        return []

    @workflow.update
    def add(self, item: str) -> int:
        return 0


def cart_export() -> str:
    """Temporal's record of a cart: an update accepted and completed in the second task, whose
    commands then start the timer the run method reaches once the item is in."""
    h = _Export()
    h.add(
        "WORKFLOW_EXECUTION_STARTED",
        {
            "workflowType": {"name": "Cart"},
            "taskQueue": {"name": "carts", "kind": "TASK_QUEUE_KIND_NORMAL"},
            "workflowTaskTimeout": "10s",
            "originalExecutionRunId": RUN_ID,
            "firstExecutionRunId": RUN_ID,
            "attempt": 1,
        },
    )
    h.workflow_task()
    update_task = h.workflow_task(advance=1)
    accepted = h.add(
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
        {
            "protocolInstanceId": "add-apple",
            "acceptedRequestMessageId": "add-apple/request",
            "acceptedRequestSequencingEventId": str(int(update_task) - 1),
            "acceptedRequest": {
                "meta": {"updateId": "add-apple", "identity": "cli"},
                "input": {"name": "add", "args": _payloads("apple")},
            },
        },
    )
    h.add(
        "WORKFLOW_EXECUTION_UPDATE_COMPLETED",
        {
            "meta": {"updateId": "add-apple"},
            "acceptedEventId": accepted,
            "outcome": {"success": _payloads(1)},
        },
    )
    timer = h.add(
        "TIMER_STARTED",
        {"timerId": "1", "startToFireTimeout": "5s", "workflowTaskCompletedEventId": update_task},
    )
    h.add("TIMER_FIRED", {"timerId": "1", "startedEventId": timer}, advance=5)
    last = h.workflow_task()
    h.add(
        "WORKFLOW_EXECUTION_COMPLETED", {"result": _payloads(["apple"]), "workflowTaskCompletedEventId": last}
    )
    return h.json()


def test_a_temporal_history_with_an_update_replays_against_the_ported_code() -> None:
    history = WorkflowHistory.from_json("cart-1", cart_export())
    accepted = next(e for e in history.events if e["event_type"] == "WorkflowExecutionUpdateAccepted")
    assert accepted["attributes"]["accepted_request"]["input"]["args"] == [
        {"metadata": {"encoding": "json/plain"}, "data": "apple"}
    ]
    assert Replayer(workflows=[Cart]).replay_workflow(history).replay_failure is None


def test_code_that_no_longer_applies_the_update_does_not_replay() -> None:
    history = WorkflowHistory.from_json("cart-1", cart_export())
    result = Replayer(workflows=[CartThatIgnoresUpdates]).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert "TimerStarted" in str(result.replay_failure)


def test_the_workflow_logger_names_the_update_inside_its_handler(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow.logger, "log_during_replay", True)
    with caplog.at_level(logging.INFO, logger="sdk.workflow"):
        Replayer(workflows=[Cart]).replay_workflow(WorkflowHistory.from_json("cart-1", cart_export()))
    [record] = [r for r in caplog.records if r.getMessage().startswith("adding apple")]
    details = record.__dict__["temporal_workflow"]
    assert (details["update_id"], details["update_name"]) == ("add-apple", "add")
    assert "'update_name': 'add'" in record.getMessage()
