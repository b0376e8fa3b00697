"""Reset over REST against real processes, driven by a scripted worker.

A reset copies the history up to a workflow task into a new run, fails that task with
cause RESET_WORKFLOW, re-applies later signals (unless asked not to), rebuilds the
pending activities and timers of that point, and terminates the open run.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.conftest import Api, ScriptedWorker, command, wait_until

RESET_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW"


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


def _run_events(api: Api, wid: str, run_id: str) -> list[dict[str, Any]]:
    r = api.get(f"/workflows/{wid}/runs/{run_id}/history", page_size=256)
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["event_type"] for e in events]


def _reset(api: Api, wid: str, **body: Any) -> str:
    r = api.post(f"/workflows/{wid}/reset", {"reason": "bad deploy", **body})
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def _signal(api: Api, wid: str, name: str, *payload: Any) -> None:
    r = api.post(f"/workflows/{wid}/signal", {"signal_name": name, "input": list(payload)})
    assert r.status_code == 200, r.text


def _two_tasks_with_signals(api: Api, worker: ScriptedWorker) -> tuple[str, str]:
    """Task 1 runs an activity; signal s1 wakes task 2, which starts a long timer; then s2.

    Events: 4 is the first WorkflowTaskCompleted, 14 the last; s1 is event 11, s2 event 16.
    """
    wid = _wid()
    run_id = api.start(wid, worker.queue)["run_id"]
    task = worker.poll_workflow_task()
    activity = command(
        "ScheduleActivityTask", activity_id="a1", activity_type="Ship", start_to_close_timeout=10
    )
    assert worker.complete_workflow_task(task, activity).status_code == 200
    assert worker.activity("complete", worker.poll_activity_task(), result="shipped").status_code == 200
    worker.complete_workflow_task(worker.poll_workflow_task())
    _signal(api, wid, "s1", "first")
    task = worker.poll_workflow_task()
    timer = command("StartTimer", timer_id="t1", start_to_fire_timeout=3600)
    assert worker.complete_workflow_task(task, timer).status_code == 200
    _signal(api, wid, "s2", "second")
    events = _run_events(api, wid, run_id)
    by_id = {e["event_id"]: e["event_type"] for e in events}
    assert by_id[4] == "WorkflowTaskCompleted" and by_id[14] == "WorkflowTaskCompleted", by_id
    return wid, run_id


def test_reset_to_the_first_task_reapplies_later_signals_and_terminates_the_open_run(
    api: Api, worker: ScriptedWorker
) -> None:
    wid, base = _two_tasks_with_signals(api, worker)
    new = _reset(api, wid, reset_type="FirstWorkflowTask")
    assert new != base

    old = _run_events(api, wid, base)
    assert old[-1]["event_type"] == "WorkflowExecutionTerminated"
    assert old[-1]["attributes"]["reason"] == "bad deploy"
    assert old[-1]["attributes"]["identity"] == "history-resetter"

    events = _run_events(api, wid, new)
    assert _types(events) == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskFailed",
        "WorkflowExecutionSignaled",
        "WorkflowExecutionSignaled",
        "WorkflowTaskScheduled",
    ]
    assert [e["event_id"] for e in events] == list(range(1, 8))
    assert events[:3] == old[:3]
    failed = events[3]["attributes"]
    assert failed["cause"] == RESET_CAUSE and failed["failure"]["message"] == "bad deploy"
    assert failed["base_run_id"] == base and failed["new_run_id"] == new
    assert [e["attributes"]["signal_name"] for e in events[4:6]] == ["s1", "s2"]
    assert events[4]["attributes"]["input"] == ["first"]

    described = api.describe(wid)
    assert described["run_id"] == new and described["status"] == "Running"
    assert described["reset_base_run_id"] == base and described["reset_event_id"] == 4
    assert described["pending_activities"] == []
    base_described = api.get(f"/workflows/{wid}/runs/{base}").json()
    assert base_described["status"] == "Terminated" and base_described["reset_run_id"] == new

    # The new run is an ordinary run: a worker picks it up with the full history and finishes it.
    task = worker.poll_workflow_task()
    assert task["workflow_execution"]["run_id"] == new
    assert _types(task["history"]["events"])[-1] == "WorkflowTaskStarted"
    assert (
        worker.complete_workflow_task(task, command("CompleteWorkflowExecution", result="ok")).status_code
        == 200
    )
    assert api.describe(wid)["status"] == "Completed"


def test_reset_without_signal_reapplication_keeps_only_the_signals_before_the_point(
    api: Api, worker: ScriptedWorker
) -> None:
    wid, base = _two_tasks_with_signals(api, worker)
    new = _reset(api, wid, event_id=14, reapply_signals=False)
    events = _run_events(api, wid, new)
    types = _types(events)
    assert len(events) == 15 and types[13:] == ["WorkflowTaskFailed", "WorkflowTaskScheduled"]
    assert [
        e["attributes"]["signal_name"] for e in events if e["event_type"] == "WorkflowExecutionSignaled"
    ] == ["s1"]
    # Reapplied by default: the same point with signals brings s2 back after the reset's failure.
    again = _reset(api, wid, run_id=base, event_id=14)
    signaled = [e for e in _run_events(api, wid, again) if e["event_type"] == "WorkflowExecutionSignaled"]
    assert [e["attributes"]["signal_name"] for e in signaled] == ["s1", "s2"]
    assert signaled[-1]["event_id"] == 15
    assert api.get(f"/workflows/{wid}/runs/{new}").json()["status"] == "Terminated"


def test_a_reset_rebuilds_pending_activities_and_timers_as_of_the_point(
    api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    base = api.start(wid, worker.queue)["run_id"]
    task = worker.poll_workflow_task()
    worker.complete_workflow_task(
        task,
        command("ScheduleActivityTask", activity_id="a1", activity_type="Charge", start_to_close_timeout=10),
        command("StartTimer", timer_id="t1", start_to_fire_timeout=3600),
    )
    _signal(api, wid, "go")
    worker.complete_workflow_task(worker.poll_workflow_task())  # WorkflowTaskCompleted is event 10
    assert worker.activity("complete", worker.poll_activity_task(), result="charged").status_code == 200
    assert _types(_run_events(api, wid, base))[9] == "WorkflowTaskCompleted"

    r = api.get(f"/workflows/{wid}/reset-preview", event_id=10)
    assert r.status_code == 200, r.text
    preview = r.json()
    assert preview["base_run_id"] == base and preview["terminates_current_run"] is True
    assert preview["events_kept"] == 9
    assert preview["events_dropped_by_type"]["ActivityTaskCompleted"] == 1
    assert [a["activity_id"] for a in preview["activities_rescheduled"]] == ["a1"]
    assert [t["timer_id"] for t in preview["timers_restored"]] == ["t1"]
    assert [a["activity_type"] for a in preview["activities_completed_after_point"]] == ["Charge"]
    assert preview["signals_to_reapply"] == []
    assert [t["timer_id"] for t in preview["pending_dropped"]["timers"]] == ["t1"]
    assert len(_run_events(api, wid, base)) == preview["events_kept"] + preview["events_dropped"]

    new = _reset(api, wid, event_id=10)
    [pending] = api.describe(wid)["pending_activities"]
    assert pending["activity_id"] == "a1" and pending["attempt"] == 1 and pending["state"] == "SCHEDULED"
    # The activity runs again on the new run (its side effect already happened once).
    again = worker.poll_activity_task()
    assert again["workflow_execution"]["run_id"] == new and again["activity_id"] == "a1"
    assert worker.activity("complete", again, result="charged twice").status_code == 200
    task = worker.poll_workflow_task()
    assert task["workflow_execution"]["run_id"] == new
    assert _types(task["history"]["events"])[9:] == [
        "WorkflowTaskFailed",
        "WorkflowTaskScheduled",
        "ActivityTaskStarted",
        "ActivityTaskCompleted",
        "WorkflowTaskStarted",
    ]
    worker.complete_workflow_task(
        task, command("CancelTimer", timer_id="t1"), command("CompleteWorkflowExecution")
    )
    assert api.describe(wid)["status"] == "Completed"


def test_a_closed_run_can_be_reset_and_a_repeated_request_resets_once(
    api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    base = api.start(wid, worker.queue)["run_id"]
    worker.complete_workflow_task(worker.poll_workflow_task(), command("CompleteWorkflowExecution", result=1))
    before = _run_events(api, wid, base)

    body = {"reset_type": "LastWorkflowTask", "request_id": "reset-once"}
    new = _reset(api, wid, **body)
    assert _reset(api, wid, **body) == new
    assert _run_events(api, wid, base) == before  # a closed base is not written to
    runs = api.get("/workflows", query=f"WorkflowId = '{wid}'").json()["executions"]
    assert sorted(r["run_id"] for r in runs) == sorted([base, new])
    assert api.get(f"/workflows/{wid}/runs/{base}").json()["reset_run_id"] == new

    task = worker.poll_workflow_task()
    assert task["workflow_execution"]["run_id"] == new
    worker.complete_workflow_task(task, command("CompleteWorkflowExecution", result=2))
    assert wait_until(lambda: api.describe(wid)["result"] == 2)


def test_bad_reset_requests_get_a_clear_400_and_change_nothing(api: Api, worker: ScriptedWorker) -> None:
    wid, base = _two_tasks_with_signals(api, worker)
    events = _run_events(api, wid, base)
    not_a_task = {e["event_type"]: e["event_id"] for e in events}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"reason": "x", "event_id": not_a_task["ActivityTaskScheduled"]}, "ActivityTaskScheduled"),
        ({"reason": "x", "event_id": 2}, "WorkflowTaskScheduled"),
        ({"reason": "x", "event_id": 999}, "not in the run's history"),
        ({"reason": "x"}, "exactly one of"),
        ({"reason": "x", "event_id": 4, "reset_type": "FirstWorkflowTask"}, "exactly one of"),
        ({"event_id": 4}, "reason"),
        ({"reason": "x", "reset_type": "LastContinuedAsNew"}, "reset_type"),
        ({"reason": "x", "event_id": "four"}, "event_id"),
    ]
    for body, mentions in cases:
        r = api.post(f"/workflows/{wid}/reset", body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["code"] == "invalid_argument"
        assert mentions in r.text, (body, r.text)
    r = api.get(f"/workflows/{wid}/reset-preview", event_id=5)
    assert r.status_code == 400 and "ActivityTaskScheduled" in r.text
    assert api.post(f"/workflows/{_wid()}/reset", {"reason": "x", "event_id": 4}).status_code == 404
    assert _run_events(api, wid, base) == events
    assert api.describe(wid)["run_id"] == base


def test_a_started_event_as_the_point_gets_a_synthetic_started_and_buffered_signals_are_reapplied(
    api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    base = api.start(wid, worker.queue)["run_id"]
    worker.complete_workflow_task(worker.poll_workflow_task())
    _signal(api, wid, "wake")
    in_flight = worker.poll_workflow_task()  # the task started by "wake" is running...
    _signal(api, wid, "late")  # ...so this signal waits in the run's buffer, not in its history
    assert "late" not in str(_run_events(api, wid, base))

    new = _reset(api, wid, event_id=3)  # the first WorkflowTaskStarted: Temporal's range starts here
    events = _run_events(api, wid, new)
    assert _types(events) == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskFailed",
        "WorkflowExecutionSignaled",
        "WorkflowExecutionSignaled",
        "WorkflowTaskScheduled",
    ]
    assert events[2]["attributes"]["identity"] == "history-service"
    assert [e["attributes"]["signal_name"] for e in events[4:6]] == ["wake", "late"]
    # The worker holding the old run's task is refused: that run is closed.
    r = worker.complete_workflow_task(in_flight, command("CompleteWorkflowExecution"))
    assert r.status_code == 404 and r.json()["code"] == "stale_task_token"


def test_signals_of_later_runs_in_a_continue_as_new_chain_are_reapplied(
    api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    first = api.start(wid, worker.queue)["run_id"]
    _signal(api, wid, "before-continue")
    worker.complete_workflow_task(
        worker.poll_workflow_task(),
        command(
            "ContinueAsNewWorkflowExecution",
            workflow_type={"name": "Test"},
            task_queue={"name": worker.queue},
        ),
    )
    second = api.describe(wid)["run_id"]
    assert second != first
    _signal(api, wid, "on-second-run")

    new = _reset(api, wid, run_id=first, reset_type="FirstWorkflowTask")
    signaled = [
        e["attributes"]["signal_name"] for e in _run_events(api, wid, new) if "Signaled" in e["event_type"]
    ]
    assert signaled == ["before-continue", "on-second-run"]
    assert api.get(f"/workflows/{wid}/runs/{second}").json()["status"] == "Terminated"
    assert api.get(f"/workflows/{wid}/runs/{first}").json()["status"] == "ContinuedAsNew"
