"""Finding a run by its workflow id, the run page's header card and its compact history,
through Django's test client on real PostgreSQL."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from history import kernel
from history.kernel.timers import ShardFence, fire_timers
from history.models import Shard, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import MemberRole, Namespace
from sdk._runtime.replayer import WorkflowHistory
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory, scope_of

pytestmark = pytest.mark.django_db

DECLINED = {"message": "card declined for ord-47", "application_failure_info": {"type": "CardDeclined"}}


def viewer_of(namespace: Namespace) -> Client:
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=MemberRole.VIEWER).user)
    return client


def page_of(run: WorkflowExecution, query: str = "") -> str:
    return f"/ns/{run.namespace.name}/workflows/{run.workflow_id}/runs/{run.run_id}/{query}"


def take(run: WorkflowExecution, kind: str = "workflow") -> dict[str, Any]:
    task = poll_once(run.namespace, run.task_queue, kind, "test-worker")
    assert task is not None
    return task


def complete_task(run: WorkflowExecution, *commands: dict[str, Any]) -> None:
    task = take(run)
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=list(commands)
    )


def charge(run: WorkflowExecution) -> None:
    """The run's workflow task schedules activity Charge (a1), with one attempt only."""
    attributes = {
        "activity_id": "a1",
        "activity_type": "Charge",
        "start_to_close_timeout": 5,
        "retry_policy": {"maximum_attempts": 1},
    }
    complete_task(run, {"command_type": "ScheduleActivityTask", "attributes": attributes})


def failed_by_activity(namespace: Namespace, workflow_id: str = "payment-ord-47") -> WorkflowExecution:
    """A run that failed the way the SDK fails it: "Activity task failed" around the card error."""
    run = ExecutionFactory(
        namespace=namespace, workflow_id=workflow_id, workflow_type="Payment", input=[{"order": 47}]
    )
    charge(run)
    task = take(run, "activity")
    kernel.respond_activity_task_failed(scope=scope_of(task), task_token=task["task_token"], failure=DECLINED)
    wrapper = {
        "message": "Activity task failed",
        "activity_failure_info": {
            "activity_type": "Charge",
            "activity_id": "a1",
            "scheduled_event_id": 5,
            "started_event_id": 6,
        },
        "cause": DECLINED,
    }
    complete_task(run, {"command_type": "FailWorkflowExecution", "attributes": {"failure": wrapper}})
    return WorkflowExecution.objects.get(run_id=run.run_id)


# ---------------------------------------------------------------- find by id


def test_a_workflow_id_url_opens_its_latest_run_which_lists_the_other_runs() -> None:
    namespace = NamespaceFactory(name="shop")
    first = ExecutionFactory(namespace=namespace, workflow_id="payment-ord-44")
    kernel.terminate_workflow_execution(namespace, workflow_id="payment-ord-44", run_id=None, reason="stuck")
    latest = ExecutionFactory(namespace=namespace, workflow_id="payment-ord-44")
    viewer = viewer_of(namespace)

    opened = viewer.get("/ns/shop/workflows/payment-ord-44/")
    assert opened.status_code == 302 and opened["Location"] == page_of(latest)
    body = viewer.get(page_of(latest)).content.decode()
    assert 'id="runs-of-id"' in body and f'href="{page_of(first)}"' in body and "(this run)" in body
    missing = viewer.get("/ns/shop/workflows/payment-ord-99/")
    assert missing.status_code == 404 and b"Workflows in shop" in missing.content


def test_a_single_run_lists_no_other_runs() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    assert 'id="runs-of-id"' not in viewer_of(namespace).get(page_of(run)).content.decode()


def test_a_bare_id_in_the_search_box_opens_the_run_or_lists_the_ids_it_starts() -> None:
    namespace = NamespaceFactory(name="shop")
    wanted = ExecutionFactory(namespace=namespace, workflow_id="payment-ord-44")
    ExecutionFactory(namespace=namespace, workflow_id="payment-ord-45")
    ExecutionFactory(namespace=namespace, workflow_id="refund-ord-44")
    viewer = viewer_of(namespace)

    exact = viewer.get("/ns/shop/", {"q": "payment-ord-44"})
    assert exact.status_code == 302 and exact["Location"] == "/ns/shop/workflows/payment-ord-44/"
    by_run_id = viewer.get("/ns/shop/", {"q": str(wanted.run_id)})
    assert by_run_id.status_code == 302 and by_run_id["Location"] == page_of(wanted)

    prefix = viewer.get("/ns/shop/", {"q": "payment-ord"})
    body = prefix.content.decode()
    assert prefix.status_code == 200 and "Read as an id" in body
    assert "payment-ord-45" in body and "refund-ord-44" not in body
    assert 'value="payment-ord"' in body  # the box keeps what was typed


def test_real_queries_and_real_query_errors_still_work_in_the_search_box() -> None:
    namespace = NamespaceFactory(name="shop")
    ExecutionFactory(namespace=namespace, workflow_id="o-1", workflow_type="Order")
    viewer = viewer_of(namespace)
    assert "o-1<" in viewer.get("/ns/shop/", {"q": 'WorkflowType = "Order"'}).content.decode()
    broken = viewer.get("/ns/shop/", {"q": "WorkflowType = "})
    assert broken.status_code == 400 and b"Read as an id" not in broken.content


# ---------------------------------------------------------------- the header card


def test_a_failed_run_shows_its_root_cause_the_activity_and_its_attempt() -> None:
    namespace = NamespaceFactory(name="shop")
    run = failed_by_activity(namespace)
    body = viewer_of(namespace).get(page_of(run)).content.decode()
    card = body[body.index('id="root-failure"') :]
    assert "card declined for ord-47" in card and "Application error: CardDeclined" in card
    assert "activity Charge (a1), attempt 1" in card and "Activity task failed" in card
    assert "&quot;order&quot;: 47" in body  # the input
    assert "Pending activities" not in body and "Pending timers" not in body and "None." not in body
    assert '<span class="ago">(' in body and " UTC</time>" in body and "0:00:00" not in body


def test_a_running_run_says_what_it_waits_on() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace, workflow_type="Payment")
    charge(run)
    body = viewer_of(namespace).get(page_of(run)).content.decode()
    waits = body[body.index('id="waiting-on"') :]
    assert "Activity Charge (a1), attempt 1, waiting for a worker to pick it up" in waits
    assert "Running for" in body


def test_a_failing_workflow_task_is_told_in_words() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    task = take(run)
    kernel.respond_workflow_task_failed(
        scope=scope_of(task),
        task_token=task["task_token"],
        cause="WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR",
        failure={"message": "step 3 changed"},
    )
    body = viewer_of(namespace).get(page_of(run)).content.decode()
    banner = body[body.index('id="task-failure"') :].split("</div>")[0]
    assert "no longer replays its history" in banner and "WORKFLOW_TASK_FAILED_CAUSE" not in banner


# ---------------------------------------------------------------- history


def test_history_lines_summarise_events_and_filter_by_category_either_way_round() -> None:
    namespace = NamespaceFactory(name="shop")
    run = failed_by_activity(namespace)
    viewer = viewer_of(namespace)

    body = viewer.get(page_of(run)).content.decode()
    assert (
        '<span class="ev-line">Charge (a1) on ' in body
        and '<span class="ev-line">Charge (a1) · card declined for ord-47</span>' in body
    )
    assert '<span class="ev-line">Charge (a1) · attempt 1 · by test-worker</span>' in body

    activities = viewer.get(page_of(run, "?category=activity")).content.decode()
    assert 'id="event-5"' in activities and 'id="event-1"' not in activities
    newest = viewer.get(page_of(run, "?order=newest")).content.decode()
    assert newest.index('id="event-11"') < newest.index('id="event-1"')
    assert 'data-tail="false"' in newest


def test_the_history_download_is_what_the_replayer_reads() -> None:
    namespace = NamespaceFactory(name="shop")
    run = failed_by_activity(namespace)
    response = viewer_of(namespace).get(page_of(run, "history.json"))
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    history = WorkflowHistory.from_json(response.content.decode())
    assert (history.workflow_id, history.run_id) == (run.workflow_id, str(run.run_id))
    assert [e["event_id"] for e in history.events] == list(range(1, run.next_event_id))
    assert history.events[0]["event_type"] == "WorkflowExecutionStarted"
    assert json.loads(response.content)["events"][-1]["event_type"] == "WorkflowExecutionFailed"


# ---------------------------------------------------------------- triage


def test_triage_groups_activity_failures_by_their_root_cause_and_links_their_runs() -> None:
    namespace = NamespaceFactory(name="shop")
    runs = {failed_by_activity(namespace, f"payment-ord-{n}").workflow_id for n in (47, 48)}
    viewer = viewer_of(namespace)
    body = viewer.get("/ns/shop/triage/").content.decode()
    by_cause = body[body.index('<table aria-labelledby="by-message">') :]
    assert "card declined for ord-&lt;n&gt;" in by_cause and "Activity task failed" not in by_cause
    link = re.search(r'<a href="(/ns/shop/\?q=[^"]+)"><code>card declined', by_cause)
    assert link is not None
    listed = viewer.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert set(re.findall(r"/workflows/([^/]+)/runs/", listed)) == runs


def test_grouped_history_shows_an_activity_as_one_line_with_its_outcome() -> None:
    namespace = NamespaceFactory(name="shop")
    run = failed_by_activity(namespace)
    body = viewer_of(namespace).get(page_of(run, "?group=1")).content.decode()
    line = body[body.index('id="event-5"') :].split("</tr>")[0]
    assert "<strong>Activity Charge (a1)</strong>" in line and "events 5, 6, 7" in line
    assert "failed on attempt 1: card declined for ord-47" in line
    assert 'id="event-6"' not in body and 'id="event-7"' not in body and 'id="event-8"' in body
    assert "Every event" in body  # the way back to one line per event


def test_grouped_history_tells_a_fired_timer_by_its_duration() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    timer = {"timer_id": "t1", "start_to_fire_timeout": 300}
    complete_task(run, {"command_type": "StartTimer", "attributes": timer})
    Shard.objects.update_or_create(shard_id=run.shard_id, defaults={"range_id": 1})
    due = TimerTask.objects.get(run_id=run.run_id, kind=TimerKind.USER_TIMER)
    assert fire_timers(ShardFence(run.shard_id, 1), [(due.id, str(run.run_id))]) == 1
    body = viewer_of(namespace).get(page_of(run, "?group=1&category=timer")).content.decode()
    assert "<strong>Timer t1</strong>" in body and "fired after 5 minutes" in body
