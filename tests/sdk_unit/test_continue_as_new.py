"""workflow.continue_as_new options and info()'s view of the history, without a server."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from sdk import workflow
from sdk.common import RetryPolicy
from tests.sdk_unit._history import HistoryBuilder, new_instance, payload

POLICY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_attempts=3)


@workflow.defn
class Carrier:
    @workflow.run
    async def run(self) -> None:
        workflow.upsert_search_attributes({"Stage": ["two"], "Gone": None})
        workflow.continue_as_new("next")


@workflow.defn(name="Elsewhere")
class Overrider:
    @workflow.run
    async def run(self) -> None:
        workflow.continue_as_new(
            args=[1, 2],
            workflow=Overrider,
            task_queue="other-q",
            run_timeout=timedelta(minutes=5),
            task_timeout=timedelta(seconds=20),
            backoff_start_interval=timedelta(seconds=3),
            retry_policy=RetryPolicy(maximum_attempts=9),
            memo={"owner": "ops"},
            search_attributes={"Stage": ["fresh"]},
        )


def _attributes(cls: type, **info: Any) -> dict[str, Any]:
    instance = new_instance(cls)
    instance.info = dataclasses.replace(instance.info, **info)
    history = HistoryBuilder(instance.info.workflow_type)
    history.task()
    activation = instance.activate(history.events)
    assert activation.completed
    command = activation.commands[-1]
    assert command["command_type"] == "ContinueAsNewWorkflowExecution"
    return dict(command["attributes"])


def test_unset_options_carry_memo_search_attributes_and_retry_policy() -> None:
    memo = {"owner": payload("billing")}
    attrs = _attributes(
        Carrier, memo=memo, search_attributes={"Stage": ["one"], "Gone": ["x"]}, retry_policy=POLICY
    )
    assert attrs["input"] == [payload("next")]
    assert attrs["workflow_type"] == {"name": "Carrier"}
    assert attrs["task_queue"] == {"name": "q"}
    assert attrs["memo"] == memo
    # The run's own upsert counts: Stage changed, Gone removed.
    assert attrs["search_attributes"] == {"Stage": ["two"]}
    assert attrs["retry_policy"] == POLICY.to_wire()
    assert attrs["workflow_run_timeout"] is None and attrs["backoff_start_interval"] is None


def test_options_override_the_current_run() -> None:
    attrs = _attributes(Overrider, memo={"owner": payload("billing")}, retry_policy=POLICY)
    assert attrs["workflow_type"] == {"name": "Elsewhere"}
    assert attrs["input"] == [payload(1), payload(2)]
    assert attrs["task_queue"] == {"name": "other-q"}
    assert attrs["workflow_run_timeout"] == 300.0
    assert attrs["workflow_task_timeout"] == 20.0
    assert attrs["backoff_start_interval"] == 3.0
    assert attrs["retry_policy"] == RetryPolicy(maximum_attempts=9).to_wire()
    assert attrs["memo"] == {"owner": payload("ops")}
    assert attrs["search_attributes"] == {"Stage": ["fresh"]}


@workflow.defn
class Watcher:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int, bool]] = []
        self.go = False

    @workflow.run
    async def run(self) -> list[tuple[int, int, bool]]:
        first = workflow.info()
        self.seen.append(_view(first))
        await workflow.wait_condition(lambda: self.go)
        # A copy taken in an earlier task still answers for the current one.
        self.seen.append(_view(first))
        return self.seen

    @workflow.signal
    def proceed(self) -> None:
        self.go = True


def _view(info: workflow.Info) -> tuple[int, int, bool]:
    return (
        info.get_current_history_length(),
        info.get_current_history_size(),
        info.is_continue_as_new_suggested(),
    )


def test_info_reports_history_length_size_and_the_servers_suggestion() -> None:
    history = HistoryBuilder("Watcher")
    scheduled = history.add("WorkflowTaskScheduled", task_queue={"name": "q"})
    history.add(
        "WorkflowTaskStarted",
        scheduled_event_id=scheduled,
        history_size_bytes=300,
        suggest_continue_as_new=False,
    )
    history.completed()
    history.add("WorkflowExecutionSignaled", signal_name="proceed", input=[])
    scheduled = history.add("WorkflowTaskScheduled", task_queue={"name": "q"})
    history.add(
        "WorkflowTaskStarted",
        scheduled_event_id=scheduled,
        history_size_bytes=900,
        suggest_continue_as_new=True,
    )
    activation = new_instance(Watcher).activate(history.events)
    [command] = activation.commands
    assert command["command_type"] == "CompleteWorkflowExecution"
    assert command["attributes"]["result"] == [payload([[3, 300, False], [7, 900, True]])]
