"""Replayer over recorded JSON histories."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest

from sdk import workflow
from sdk._runtime.replayer import Replayer, WorkflowHistory
from sdk.exceptions import NondeterminismError
from tests.sdk_unit.test_instance import Greet, GreetChanged

FIXTURE = Path(__file__).parent / "histories" / "greet_completed_timer.json"


def _closed_history() -> WorkflowHistory:
    data = json.loads(FIXTURE.read_text())
    events = data["events"]
    events.append(
        {
            "event_id": len(events) + 1,
            "event_type": "WorkflowTaskCompleted",
            "event_time": events[-1]["event_time"],
            "attributes": {"started_event_id": len(events)},
        }
    )
    events.append(
        {
            "event_id": len(events) + 1,
            "event_type": "WorkflowExecutionCompleted",
            "event_time": events[-1]["event_time"],
            "attributes": {
                "result": [{"metadata": {"encoding": "json/plain"}, "data": "hello ada!"}],
                "workflow_task_completed_event_id": len(events),
            },
        }
    )
    return WorkflowHistory.from_json({"workflow_id": "wf-1", "events": events})


def test_same_code_replays_cleanly_and_round_trips_json() -> None:
    history = _closed_history()
    assert WorkflowHistory.from_json(history.to_json()) == history
    result = Replayer(workflows=[Greet]).replay_workflow(history)
    assert result.replay_failure is None


def test_changed_code_fails_replay_with_nondeterminism() -> None:
    replayer = Replayer(workflows=[GreetChanged])
    with pytest.raises(NondeterminismError, match="'shout'"):
        replayer.replay_workflow(_closed_history())
    history = _closed_history()
    results = asyncio.run(replayer.replay_workflows([history], raise_on_replay_failure=False))
    assert isinstance(results.replay_failures[history.workflow_id], NondeterminismError)


RECORDED = Path(__file__).parent / "histories" / "approval_recorded.json"


@workflow.defn(name="Approval")
class RecordedApproval:
    """The code that produced approval_recorded.json (a run on the real server)."""

    def __init__(self) -> None:
        self.approver = ""

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(
            "Greet", name, start_to_close_timeout=timedelta(seconds=10)
        )
        await workflow.wait_condition(lambda: bool(self.approver))
        return f"{greeting}; approved by {self.approver}"

    @workflow.signal
    def approve(self, who: str) -> None:
        self.approver = who


@workflow.defn(name="Approval")
class ApprovalWithExtraTimer(RecordedApproval):
    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(1)
        return await super().run(name)


def test_history_recorded_on_the_server_replays_and_catches_changes() -> None:
    history = WorkflowHistory.from_json(RECORDED.read_text())
    assert Replayer(workflows=[RecordedApproval]).replay_workflow(history).replay_failure is None
    with pytest.raises(NondeterminismError, match="StartTimer"):
        Replayer(workflows=[ApprovalWithExtraTimer]).replay_workflow(history)
