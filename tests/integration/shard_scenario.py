"""A representative run of the kernel for the shard rule, each operation a labelled step.

Four workflows on four different shards: a parent that schedules activities and timers,
starts two children and signals and cancels a third workflow (the target); the children
close and continue as new; queries, an update, a reset, a cancel, a terminate, a
schedule's firing, retention and payload collection follow. Everything goes through the
kernel, matching and the shard owner as in production, on the real database; the test's
own setup writes (making timers due, leasing shards) are not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from chronicle import clock
from chronicle.conf import engine_settings
from executions import selectors
from history import kernel
from history.kernel.locks import shard_for
from history.kernel.payloads import collect_unreferenced
from history.kernel.tokens import TaskScope
from history.models import PendingActivity, Shard, TimerKind, TimerTask, WorkflowExecution
from history.shard_owner import ShardOwner
from matching.dispatch import poll_batch, poll_once
from namespaces.models import Namespace
from tests.factories import NamespaceFactory
from tests.integration.shard_sql import Recorder

NAMES = ("parent", "kid", "orphan", "target", "schedule", "batch-a", "batch-b")


@dataclass
class Scenario:
    """What a run of the scenario leaves to check against: the ids and their shards."""

    namespace: Namespace
    ids: dict[str, str]
    shards: dict[str, int] = field(default_factory=dict)


def ids_on_distinct_shards(namespace: Namespace) -> dict[str, str]:
    """A workflow (or schedule) id per name, each on a shard of its own."""
    taken: set[int] = set()
    ids: dict[str, str] = {}
    for name in NAMES:
        wid = next(
            f"{name}-{n}" for n in range(10_000) if shard_for(namespace.id, f"{name}-{n}") not in taken
        )
        taken.add(shard_for(namespace.id, wid))
        ids[name] = wid
    return ids


def _activity(activity_id: str) -> dict[str, Any]:
    return {
        "command_type": "ScheduleActivityTask",
        "attributes": {
            "activity_id": activity_id,
            "activity_type": "A",
            "start_to_close_timeout": 30,
            # Past the namespace's inline limit: stored apart, the run's write refers to it.
            "input": [{"metadata": {"encoding": "json/plain"}, "data": "x" * 4_000}],
        },
    }


def _timer(timer_id: str) -> dict[str, Any]:
    return {"command_type": "StartTimer", "attributes": {"timer_id": timer_id, "start_to_fire_timeout": 600}}


def _child(workflow_id: str, queue: str) -> dict[str, Any]:
    attributes = {"workflow_id": workflow_id, "workflow_type": {"name": "K"}, "task_queue": {"name": queue}}
    return {"command_type": "StartChildWorkflowExecution", "attributes": attributes}


def _complete(task: dict[str, Any], namespace: Namespace, queue: str, *commands: dict[str, Any]) -> Any:
    return kernel.respond_workflow_task_completed(
        scope=TaskScope(namespace.id, queue), task_token=task["task_token"], commands=list(commands)
    )


def _poll_and_complete(namespace: Namespace, queue: str, *commands: dict[str, Any], **more: Any) -> None:
    task = poll_once(namespace, queue, "workflow", "worker")
    assert task is not None, queue
    kernel.respond_workflow_task_completed(
        scope=TaskScope(namespace.id, queue), task_token=task["task_token"], commands=list(commands), **more
    )


class _Owner:
    """The shard owner, holding every shard, firing what is due."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        with rec.paused():
            for shard in range(engine_settings().shards):
                Shard.objects.get_or_create(shard_id=shard, defaults={"range_id": 1})
            self.owner = ShardOwner("shard-rule")
            self.owner.owned = {s.shard_id: s.range_id for s in Shard.objects.all()}

    def fire(self, *due_now: str) -> None:
        """Fire what is due, after making the rows of these kinds due (setup, unrecorded)."""
        if due_now:
            with self.rec.paused():
                past = clock.now() - timedelta(seconds=1)
                TimerTask.objects.filter(kind__in=due_now).update(fire_at=past)
        for _ in range(3):  # duties a firing leaves (a child's close) are due at once
            self.owner.refresh_next_fire()
            self.owner.fire_due_timers()


def run(rec: Recorder) -> Scenario:
    with rec.paused():
        namespace = NamespaceFactory()
        ids = ids_on_distinct_shards(namespace)
    scenario = Scenario(namespace, ids, {name: shard_for(namespace.id, wid) for name, wid in ids.items()})
    owner = _Owner(rec)
    _start_and_first_tasks(rec, scenario)
    _activities(rec, scenario)
    _signals_timers_and_transfers(rec, scenario, owner)
    _children_close(rec, scenario, owner)
    _queries_and_updates(rec, scenario)
    _reset_cancel_terminate(rec, scenario, owner)
    _schedule(rec, scenario, owner)
    with rec.at("retention"):
        owner.fire(TimerKind.RETENTION)
    with rec.at("payload collection"):
        collect_unreferenced(grace=timedelta(0))
    with rec.at("visibility list"):
        selectors.execution_list(namespace, query="")
    return scenario


def _start_and_first_tasks(rec: Recorder, s: Scenario) -> None:
    ns, ids = s.namespace, s.ids
    with rec.at("start"):
        for name, queue in (("parent", "q"), ("batch-a", "bq"), ("batch-b", "bq")):
            request = kernel.StartRequest(workflow_id=ids[name], workflow_type="P", task_queue=queue)
            kernel.start_workflow_execution(ns, request)
    with rec.at("signal-with-start"):
        request = kernel.StartRequest(workflow_id=ids["target"], workflow_type="T", task_queue="tq")
        kernel.start_workflow_execution(ns, request, signal=("go", [1], "sws-1"))
    with rec.at("workflow task batch poll"):
        batch = poll_batch(ns, "bq", "workflow", "w", max_tasks=4)
    with rec.at("workflow task complete"):
        for task in batch:
            _complete(task, ns, "bq", {"command_type": "CompleteWorkflowExecution", "attributes": {}})
        _poll_and_complete(
            ns,
            "q",
            _activity("a1"),
            _activity("a2"),
            _timer("t1"),
            _timer("t-cancel"),
            _child(ids["kid"], "kq"),
            _child(ids["orphan"], "oq"),
            {
                "command_type": "SignalExternalWorkflowExecution",
                "attributes": {"execution": {"workflow_id": ids["target"]}, "signal_name": "hi"},
            },
            {
                "command_type": "RequestCancelExternalWorkflowExecution",
                "attributes": {"execution": {"workflow_id": ids["target"]}},
            },
        )
        _poll_and_complete(ns, "tq", _timer("t2"))
    with rec.at("workflow task poll, empty queue"):
        assert poll_once(ns, "empty", "workflow", "w") is None


def _activities(rec: Recorder, s: Scenario) -> None:
    ns = s.namespace
    scope = TaskScope(ns.id, "q")
    with rec.at("activity poll"):
        first, second = poll_batch(ns, "q", "activity", "w", max_tasks=4)
    with rec.at("activity heartbeat"):
        kernel.record_activity_task_heartbeat(scope=scope, task_token=second["task_token"], details=[1])
    with rec.at("activity complete"):
        kernel.respond_activity_task_completed(scope=scope, task_token=first["task_token"], result=2)
    with rec.at("activity fail (retried)"):
        failure = {"message": "again", "application_failure_info": {"non_retryable": False}}
        kernel.respond_activity_task_failed(scope=scope, task_token=second["task_token"], failure=failure)


def _signals_timers_and_transfers(rec: Recorder, s: Scenario, owner: _Owner) -> None:
    ns, ids = s.namespace, s.ids
    with rec.at("signal"):
        kernel.signal_workflow_execution(
            ns, workflow_id=ids["parent"], run_id=None, signal_name="s", input=[], request_id="r1"
        )
    with rec.at("transfers: start children, signal and cancel the target"):
        owner.fire()
    with rec.at("timers due on two shards"):
        owner.fire(TimerKind.USER_TIMER, TimerKind.ACTIVITY_RETRY)
    with rec.paused():
        retried = PendingActivity.objects.get(activity_id="a2", run__workflow_id=ids["parent"])
    with rec.at("workflow task complete: cancel timer and activity"):
        _poll_and_complete(
            ns,
            "q",
            {"command_type": "CancelTimer", "attributes": {"timer_id": "t-cancel"}},
            {
                "command_type": "RequestCancelActivityTask",
                "attributes": {"scheduled_event_id": retried.scheduled_event_id},
            },
        )


def _children_close(rec: Recorder, s: Scenario, owner: _Owner) -> None:
    ns = s.namespace
    with rec.at("child completes, its parent is told"):
        _poll_and_complete(
            ns, "kq", {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}
        )
        owner.fire()
    with rec.at("child continues as new"):
        _poll_and_complete(
            ns, "oq", {"command_type": "ContinueAsNewWorkflowExecution", "attributes": {"input": [2]}}
        )


def _queries_and_updates(rec: Recorder, s: Scenario) -> None:
    ns, ids = s.namespace, s.ids
    with rec.at("query task (a closed run)"):
        query = kernel.create_query(ns, workflow_id=ids["kid"], run_id=None, query_type="q", query_args=[])
        task = poll_once(ns, "kq", "workflow", "w")
        assert task is not None and "query" in task
        scope = TaskScope(ns.id, "kq")
        kernel.respond_query_task_completed(scope=scope, task_token=task["task_token"], answer=1)
    with rec.at("update admitted"):
        request = kernel.UpdateRequest(update_id="u1", name="u")
        kernel.update_workflow_execution(ns, workflow_id=ids["parent"], run_id=None, request=request)
    with rec.at("buffered query"):
        buffered = kernel.create_query(
            ns, workflow_id=ids["parent"], run_id=None, query_type="q", query_args=[]
        )
    with rec.at("workflow task complete: update and query answered"):
        messages = [
            {"type": "Acceptance", "update_id": "u1"},
            {"type": "Response", "update_id": "u1", "success": 3},
        ]
        answers = {str(buffered.id): {"answer": 4}}
        _poll_and_complete(ns, "q", messages=messages, query_results=answers)
        kernel.find_update(ns, ids["parent"], None, "u1")
    del query


def _reset_cancel_terminate(rec: Recorder, s: Scenario, owner: _Owner) -> None:
    ns, ids = s.namespace, s.ids
    with rec.at("cancel requested"):
        kernel.request_cancel_workflow_execution(ns, workflow_id=ids["parent"], run_id=None)
    with rec.at("workflow task failed"):
        task = poll_once(ns, "q", "workflow", "w")
        assert task is not None
        kernel.respond_workflow_task_failed(
            scope=TaskScope(ns.id, "q"),
            task_token=task["task_token"],
            cause="UNHANDLED",
            failure={"message": "x"},
        )
    with rec.at("reset preview"):
        kernel.preview_reset(ns, workflow_id=ids["parent"], run_id=None, point="last")
    with rec.at("reset"):
        kernel.reset_workflow_execution(
            ns, workflow_id=ids["parent"], run_id=None, point="last", reason="again"
        )
    with rec.at("terminate, and the close policy terminates the child"):
        kernel.terminate_workflow_execution(ns, workflow_id=ids["parent"], run_id=None, reason="done")
        owner.fire()


def _schedule(rec: Recorder, s: Scenario, owner: _Owner) -> None:
    ns, schedule_id = s.namespace, s.ids["schedule"]
    with rec.at("schedule created"):
        definition = kernel.ScheduleDefinition(
            spec={"intervals": [{"every": 86_400}]},
            action={"workflow_type": "Report", "workflow_id": "report", "task_queue": "sq"},
        )
        kernel.create_schedule(ns, schedule_id, definition)
    with rec.at("schedule triggered, starting a run"):
        kernel.trigger_schedule(ns, schedule_id)
    with rec.paused():
        started = WorkflowExecution.objects.get(namespace=ns, task_queue="sq")
    s.ids["scheduled run"], s.shards["scheduled run"] = started.workflow_id, started.shard_id
    with rec.at("schedule fires, looking at its running run"):
        owner.fire(TimerKind.SCHEDULE)
    with rec.at("scheduled run closes, its schedule is woken"):
        kernel.terminate_workflow_execution(ns, workflow_id=started.workflow_id, run_id=None, reason="done")
    with rec.at("schedule deleted"):
        kernel.delete_schedule(ns, schedule_id)
