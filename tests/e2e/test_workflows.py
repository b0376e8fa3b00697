"""Whole workflows driven by a scripted worker over HTTP against real processes."""

from __future__ import annotations

import threading
import time
import uuid

from tests.conftest import Api, ScriptedWorker, command


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


def test_activity_that_succeeds_completes_the_workflow(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue, input=["hello"])

    task = worker.poll_workflow_task()
    assert task["history"]["events"][0]["attributes"]["input"] == ["hello"]
    r = worker.complete_workflow_task(
        task,
        command(
            "ScheduleActivityTask",
            activity_id="a1",
            activity_type="Greet",
            input=["hello"],
            start_to_close_timeout=10,
        ),
    )
    assert r.status_code == 200, r.text
    activity = worker.poll_activity_task()
    assert activity["activity_type"]["name"] == "Greet" and activity["attempt"] == 1
    assert worker.activity("complete", activity, result="hi").status_code == 200
    task = worker.poll_workflow_task()
    types = [e["event_type"] for e in task["history"]["events"]]
    assert types[-4:] == [
        "ActivityTaskStarted",
        "ActivityTaskCompleted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
    ]
    worker.complete_workflow_task(task, command("CompleteWorkflowExecution", result="done"))

    described = api.describe(wid)
    assert described["status"] == "Completed" and described["result"] == "done"
    ids = [e["event_id"] for e in api.events(wid)]
    assert ids == list(range(1, len(ids) + 1))


def test_activity_failing_twice_succeeds_on_attempt_three_with_backoff(
    api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    worker.complete_workflow_task(
        task,
        command(
            "ScheduleActivityTask",
            activity_id="a1",
            activity_type="Flaky",
            start_to_close_timeout=10,
            retry_policy={"initial_interval": 0.5, "backoff_coefficient": 2.0},
        ),
    )

    failed_at = []
    for expected_attempt in (1, 2):
        activity = worker.poll_activity_task()
        assert activity["attempt"] == expected_attempt
        failed_at.append(time.monotonic())
        r = worker.activity("fail", activity, failure={"message": "boom", "type": "Transient"})
        assert r.status_code == 200, r.text
    activity = worker.poll_activity_task()
    received = time.monotonic()
    assert activity["attempt"] == 3
    assert received - failed_at[1] >= 0.95  # second backoff: 0.5 × 2^1
    worker.activity("complete", activity, result=3)

    task = worker.poll_workflow_task()
    started = [e for e in task["history"]["events"] if e["event_type"] == "ActivityTaskStarted"]
    assert len(started) == 1 and started[0]["attributes"]["attempt"] == 3
    assert started[0]["attributes"]["last_failure"]["message"] == "boom"


def test_non_retryable_failure_is_final(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    worker.complete_workflow_task(
        worker.poll_workflow_task(),
        command("ScheduleActivityTask", activity_id="a1", activity_type="Bad", start_to_close_timeout=10),
    )
    activity = worker.poll_activity_task()
    worker.activity(
        "fail",
        activity,
        failure={"message": "no", "application_failure_info": {"type": "Fatal", "non_retryable": True}},
    )

    task = worker.poll_workflow_task()
    failed = [e for e in task["history"]["events"] if e["event_type"] == "ActivityTaskFailed"]
    assert failed[0]["attributes"]["retry_state"] == "RETRY_STATE_NON_RETRYABLE_FAILURE"


def test_start_to_close_timeout_is_retried(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    worker.complete_workflow_task(
        worker.poll_workflow_task(),
        command(
            "ScheduleActivityTask",
            activity_id="a1",
            activity_type="Slow",
            start_to_close_timeout=1,
            retry_policy={"initial_interval": 0.2},
        ),
    )
    first = worker.poll_activity_task()
    assert first["attempt"] == 1
    second = worker.poll_activity_task(timeout=10)  # the first attempt timed out

    assert second["attempt"] == 2
    assert worker.activity("complete", first, result="late").status_code == 404
    assert worker.activity("complete", second, result="ok").status_code == 200


def test_heartbeat_timeout_is_retried_with_details(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    worker.complete_workflow_task(
        worker.poll_workflow_task(),
        command(
            "ScheduleActivityTask",
            activity_id="a1",
            activity_type="Beat",
            start_to_close_timeout=30,
            heartbeat_timeout=1,
            retry_policy={"initial_interval": 0.2},
        ),
    )
    first = worker.poll_activity_task()
    r = worker.activity("heartbeat", first, details={"progress": 7})
    assert r.status_code == 200 and r.json() == {"cancel_requested": False}
    second = worker.poll_activity_task(timeout=10)

    assert second["attempt"] == 2
    assert second["heartbeat_details"] == {"progress": 7}


def test_timer_fires_and_wakes_the_workflow(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    worker.complete_workflow_task(
        worker.poll_workflow_task(), command("StartTimer", timer_id="t1", start_to_fire_timeout=1)
    )
    started = time.monotonic()
    task = worker.poll_workflow_task()

    assert time.monotonic() - started >= 0.9
    fired = [e for e in task["history"]["events"] if e["event_type"] == "TimerFired"]
    assert fired and fired[0]["attributes"]["timer_id"] == "t1"


def test_signal_during_running_task_is_delivered_next(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    assert api.post(f"/workflows/{wid}/signal", {"signal_name": "go", "input": [1]}).status_code == 200
    assert "WorkflowExecutionSignaled" not in api.event_types(wid)  # buffered while the task runs

    r = worker.complete_workflow_task(task, command("CompleteWorkflowExecution", result=None))
    assert r.status_code == 200
    types = api.event_types(wid)
    assert "WorkflowTaskFailed" in types  # UNHANDLED_COMMAND: the close met a buffered signal
    task = worker.poll_workflow_task()
    signals = [e for e in task["history"]["events"] if e["event_type"] == "WorkflowExecutionSignaled"]
    assert signals[0]["attributes"]["signal_name"] == "go"
    worker.complete_workflow_task(task, command("CompleteWorkflowExecution", result="ok"))
    assert api.describe(wid)["status"] == "Completed"


def test_query_is_answered_by_a_polling_worker(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    worker.complete_workflow_task(worker.poll_workflow_task())
    answers: list[object] = []
    thread = threading.Thread(
        target=lambda: answers.append(api.post(f"/workflows/{wid}/query", {"query_type": "state"}))
    )
    thread.start()
    task = worker.poll_workflow_task()
    assert task["query"]["query_type"] == "state"
    r = api.post(
        f"/task-queues/{worker.queue}/query-tasks/respond",
        {"task_token": task["task_token"], "answer": {"n": 1}},
    )
    assert r.status_code == 200, r.text
    thread.join(10)

    assert answers[0].status_code == 200 and answers[0].json() == {"answer": {"n": 1}}  # type: ignore[attr-defined]
    assert not [t for t in api.event_types(wid) if "Query" in t]


def test_query_without_worker_times_out_clearly(api: Api, queue: str) -> None:
    wid = _wid()
    api.start(wid, queue)
    r = api.post(f"/workflows/{wid}/query", {"query_type": "state"})
    assert r.status_code == 504 and r.json()["code"] == "deadline_exceeded"


def test_cancel_and_terminate(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    worker.complete_workflow_task(worker.poll_workflow_task())
    assert api.post(f"/workflows/{wid}/cancel", {"reason": "stop"}).status_code == 200
    task = worker.poll_workflow_task()
    assert task["history"]["events"][-3]["event_type"] == "WorkflowExecutionCancelRequested"
    worker.complete_workflow_task(task, command("CancelWorkflowExecution"))
    assert api.describe(wid)["status"] == "Canceled"
    assert api.post(f"/workflows/{wid}/cancel").status_code == 200  # no-op on a closed run

    wid2 = _wid()
    api.start(wid2, worker.queue)
    assert api.post(f"/workflows/{wid2}/terminate", {"reason": "bye"}).status_code == 200
    assert api.describe(wid2)["status"] == "Terminated"
    assert api.post(f"/workflows/{wid2}/terminate").status_code == 404


def test_id_reuse_and_conflict_policies(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    first = api.start(wid, worker.queue, request_id="r1")
    assert api.start(wid, worker.queue, request_id="r1")["run_id"] == first["run_id"]
    r = api.post("/workflows", {"workflow_id": wid, "workflow_type": "T", "task_queue": worker.queue})
    assert r.status_code == 409 and r.json()["details"]["run_id"] == first["run_id"]
    existing = api.start(wid, worker.queue, id_conflict_policy="USE_EXISTING")
    assert existing == {"run_id": first["run_id"], "started": False}
    time.sleep(1.05)
    replaced = api.start(wid, worker.queue, id_conflict_policy="TERMINATE_EXISTING")
    assert replaced["run_id"] != first["run_id"]
    api.post(f"/workflows/{wid}/terminate", {"reason": "x"})

    assert (
        api.post(
            "/workflows",
            {
                "workflow_id": wid,
                "workflow_type": "T",
                "task_queue": worker.queue,
                "id_reuse_policy": "REJECT_DUPLICATE",
            },
        ).status_code
        == 409
    )
    assert api.start(wid, worker.queue, id_reuse_policy="ALLOW_DUPLICATE_FAILED_ONLY")["started"]
    api.post(f"/workflows/{wid}/terminate")
    assert api.start(wid, worker.queue, id_reuse_policy="ALLOW_DUPLICATE")["started"]
    api.post(f"/workflows/{wid}/terminate")
    assert api.start(wid, worker.queue, id_reuse_policy="TERMINATE_IF_RUNNING")["started"]


def test_signal_request_id_deduplicates(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    for _ in range(3):
        assert (
            api.post(f"/workflows/{wid}/signal", {"signal_name": "s", "request_id": "same"}).status_code
            == 200
        )

    assert api.event_types(wid).count("WorkflowExecutionSignaled") == 1


def test_stale_completion_gets_404_and_changes_nothing(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    assert worker.complete_workflow_task(task).status_code == 200
    before = api.event_types(wid)

    r = worker.complete_workflow_task(task, command("CompleteWorkflowExecution"))
    assert r.status_code == 404 and r.json()["code"] == "stale_task_token"
    assert api.event_types(wid) == before


def test_poll_with_nothing_returns_204_at_deadline(worker: ScriptedWorker) -> None:
    r = worker.api.post(f"/task-queues/{worker.queue}/activity-tasks/poll", {"timeout": 0.3})
    assert r.status_code == 204


def test_history_long_poll_wakes_on_new_event(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    last = api.events(wid)[-1]["event_id"]
    threading.Timer(0.5, lambda: api.post(f"/workflows/{wid}/signal", {"signal_name": "x"})).start()
    started = time.monotonic()
    r = api.get(f"/workflows/{wid}/history", after_event_id=last, wait_new_event="true")

    assert r.status_code == 200 and r.json()["events"][0]["event_type"] == "WorkflowExecutionSignaled"
    assert time.monotonic() - started < 5


def test_close_event_wait_answers_at_the_close_not_at_other_events(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    threading.Timer(0.3, lambda: api.post(f"/workflows/{wid}/signal", {"signal_name": "x"})).start()
    threading.Timer(0.8, lambda: api.post(f"/workflows/{wid}/terminate", {"reason": "done"})).start()
    started = time.monotonic()
    r = api.get(f"/workflows/{wid}/history", history_event_filter_type="CLOSE_EVENT", wait_new_event="true")

    assert r.status_code == 200
    assert [e["event_type"] for e in r.json()["events"]] == ["WorkflowExecutionTerminated"]
    assert r.json()["status"] == "Terminated"
    assert 0.7 < time.monotonic() - started < 5


def test_eager_start_returns_the_first_workflow_task(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    started = api.start(wid, worker.queue, request_eager_execution=True, identity="eager-worker")

    task = started["eager_workflow_task"]
    assert [e["event_type"] for e in task["history"]["events"]] == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
    ]
    assert worker.complete_workflow_task(task, command("CompleteWorkflowExecution")).status_code == 200
    assert api.describe(wid)["status"] == "Completed"
    r = worker.api.post(f"/task-queues/{worker.queue}/workflow-tasks/poll", {"timeout": 0.3})
    assert r.status_code == 204  # the scheduled row went stale and was dropped


def test_eager_activity_is_returned_by_the_completion(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    r = worker.complete_workflow_task(
        worker.poll_workflow_task(),
        command(
            "ScheduleActivityTask",
            activity_id="a1",
            activity_type="Fast",
            start_to_close_timeout=10,
            request_eager_execution=True,
        ),
    )

    tasks = r.json()["activity_tasks"]
    assert len(tasks) == 1 and tasks[0]["activity_id"] == "a1"
    assert worker.activity("complete", tasks[0], result=1).status_code == 200
    events = worker.poll_workflow_task()["history"]["events"]
    assert "ActivityTaskCompleted" in [e["event_type"] for e in events]


def test_sticky_queue_gets_new_events_and_falls_back_after_timeout(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    sticky = ScriptedWorker(api, f"{worker.queue}-sticky")
    api.start(wid, worker.queue)
    first = worker.poll_workflow_task()
    worker.complete_workflow_task(first, sticky_task_queue=sticky.queue, sticky_schedule_to_start_timeout=1)
    api.post(f"/workflows/{wid}/signal", {"signal_name": "one"})

    partial = sticky.poll_workflow_task()
    assert partial["history"]["events"][0]["event_id"] == first["started_event_id"] + 1
    sticky.complete_workflow_task(partial, sticky_task_queue=sticky.queue, sticky_schedule_to_start_timeout=1)
    api.post(f"/workflows/{wid}/signal", {"signal_name": "two"})
    # Nobody polls the sticky queue from now on. The task stays there while its worker
    # counts as polling (seen within the poller liveness window, 10 s); then the normal
    # queue gets it, by the fast fallback or the sticky timeout, whichever looks first.
    fallback = worker.poll_workflow_task(timeout=25)

    types = [e["event_type"] for e in fallback["history"]["events"]]
    assert types[0] == "WorkflowExecutionStarted"
    assert fallback["attempt"] == 1
    assert types.count("WorkflowTaskTimedOut") <= 1


def _fail(worker: ScriptedWorker, task: dict[str, object]) -> None:
    r = worker.api.post(
        f"/task-queues/{worker.queue}/workflow-tasks/fail",
        {
            "task_token": task["task_token"],
            "cause": "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR",
            "failure": {"message": "nondeterminism"},
        },
    )
    assert r.status_code == 200, r.text


def test_repeated_workflow_task_failures_are_transient_and_back_off(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    for attempt in (1, 2, 3):
        task = worker.poll_workflow_task()
        assert task["attempt"] == attempt
        _fail(worker, task)
        failed_at = time.monotonic()
    # The first retries go out at once; attempt 4 waits its backoff (5 s).
    r = worker.api.post(
        f"/task-queues/{worker.queue}/workflow-tasks/poll", {"identity": worker.identity, "timeout": 3}
    )
    assert r.status_code == 204, r.text
    task = worker.poll_workflow_task()
    assert time.monotonic() - failed_at >= 4.5
    assert task["attempt"] == 4
    assert task["history"]["events"][-2]["attributes"]["attempt"] == 4  # in-memory Scheduled
    worker.complete_workflow_task(task, command("CompleteWorkflowExecution"))

    types = api.event_types(wid)
    assert types.count("WorkflowTaskFailed") == 1  # retries after the first wrote nothing
    assert api.describe(wid)["status"] == "Completed"
    ids = [e["event_id"] for e in api.events(wid)]
    assert ids == list(range(1, len(ids) + 1))


def test_failure_on_a_sticky_queue_does_not_count_an_attempt(api: Api, worker: ScriptedWorker) -> None:
    """Temporal's rule: the sticky failure clears stickiness; the normal-queue retry is attempt 1."""
    wid = _wid()
    sticky = ScriptedWorker(api, f"{worker.queue}-sticky")
    api.start(wid, worker.queue)
    first = worker.poll_workflow_task()
    worker.complete_workflow_task(first, sticky_task_queue=sticky.queue, sticky_schedule_to_start_timeout=5)
    api.post(f"/workflows/{wid}/signal", {"signal_name": "go"})
    on_sticky = sticky.poll_workflow_task()
    assert on_sticky["attempt"] == 1
    _fail(sticky, on_sticky)

    retry = worker.poll_workflow_task()  # stickiness is cleared: the normal queue gets it
    assert retry["attempt"] == 1
    _fail(worker, retry)
    again = worker.poll_workflow_task()
    assert again["attempt"] == 2
    worker.complete_workflow_task(again, command("CompleteWorkflowExecution"))

    types = api.event_types(wid)
    assert types.count("WorkflowTaskFailed") == 2  # the sticky failure and the first normal one
    assert api.describe(wid)["status"] == "Completed"
    ids = [e["event_id"] for e in api.events(wid)]
    assert ids == list(range(1, len(ids) + 1))


def test_history_of_an_earlier_run_by_run_id_query(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    first = api.start(wid, worker.queue)["run_id"]
    api.post(f"/workflows/{wid}/terminate", {"reason": "replaced"})
    second = api.start(wid, worker.queue, id_reuse_policy="ALLOW_DUPLICATE")["run_id"]

    older = api.get(f"/workflows/{wid}/history", run_id=first)
    assert older.status_code == 200, older.text
    assert older.json()["run_id"] == first
    assert older.json()["events"][-1]["event_type"] == "WorkflowExecutionTerminated"
    latest = api.get(f"/workflows/{wid}/history")
    assert latest.json()["run_id"] == second
    bad = api.get(f"/workflows/{wid}/history", run_id="not-a-uuid")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"
    clash = api.get(f"/workflows/{wid}/runs/{first}/history", run_id=second)
    assert clash.status_code == 400
