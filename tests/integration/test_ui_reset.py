"""The execution page's reset centre, query and panels through Django's test client."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.test import Client

from executions.models import AuditEntry
from history import kernel
from history.kernel.timers import ShardFence
from history.kernel.transfers import process_transfer
from history.models import (
    ExecutionStatus,
    HistoryEvent,
    Payload,
    Shard,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)
from matching.dispatch import poll_once
from namespaces.models import MemberRole
from tests.factories import ExecutionFactory, NamespaceFactory, scope_of
from tests.integration.test_reset_points import completed_ids, order_story
from tests.integration.test_ui import detail_url, signed_in

pytestmark = pytest.mark.django_db


def body_of(client: Client, url: str, **params: str) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.content.decode()[:500]
    return response.content.decode()


# ---------------------------------------------------------------- quick picks and the point picker


def test_each_quick_pick_previews_the_point_it_names() -> None:
    namespace = NamespaceFactory(name="shop")
    run = order_story(namespace)
    first, second, third = completed_ids(run)
    operator = signed_in(namespace, MemberRole.OPERATOR)
    url = detail_url(run, "reset/")

    page = body_of(operator, url)
    assert f'First workflow task</a> <span class="muted">(event {first})' in page
    assert f'Last workflow task</a> <span class="muted">(event {third})' in page
    assert f'before the first failure</a> <span class="muted">(event {second})' in page
    assert "?point=build:v1" in page and "?point=build:v2" in page
    for point, expected in [
        ("first", first),
        ("last", third),
        ("before_failure", second),
        ("build:v1", first),
        ("build:v2", second),
    ]:
        preview = body_of(operator, url, point=point)
        assert f"Reset to event</dt><dd>{expected}</dd>" in preview, point
        assert f"Reset to event {expected}</button>" in preview


def test_a_quick_pick_the_run_lacks_says_why() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    page = body_of(signed_in(namespace, MemberRole.OPERATOR), detail_url(run, "reset/"))
    assert "Last workflow task before the first failure: the run has no failure to reset before" in page
    response = signed_in(namespace, MemberRole.OPERATOR).get(detail_url(run, "reset/"), {"point": "build:x"})
    assert response.status_code == 400 and b"completed by build" in response.content


def test_the_point_picker_lists_points_with_what_happened_between_them() -> None:
    namespace = NamespaceFactory(name="shop")
    run = order_story(namespace)
    first, second, third = completed_ids(run)
    page = body_of(signed_in(namespace, MemberRole.OPERATOR), detail_url(run, "reset/"))
    rows = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r'<tr id="point-(\d+)"[^>]*>(.*?)</tr>', page, flags=re.S)
    }
    assert list(rows) == [first, second, third]
    assert "activities: Charge completed" in rows[first] and "signals: approve" in rows[first]
    assert "v1" in rows[first]
    assert "Ship failed" in rows[second] and "1 ActivityTaskFailed" in rows[second]
    assert "1 TimerStarted" in rows[third]
    assert "first failure at event" in page


# ---------------------------------------------------------------- the preview and the reset


def test_the_preview_shows_kept_dropped_signals_pending_work_and_side_effects() -> None:
    namespace = NamespaceFactory(name="shop")
    run = order_story(namespace)
    first = completed_ids(run)[0]
    operator = signed_in(namespace, MemberRole.OPERATOR)
    page = body_of(operator, detail_url(run, "reset/"), point="first")
    assert f"Events kept</dt><dd>{first - 1}</dd>" in page
    assert "<td>ActivityTaskFailed</td><td>1</td>" in page and "<td>TimerStarted</td><td>1</td>" in page
    assert "<li>approve — re-applied</li>" in page
    assert "Dropped with the current run: timer t1" in page
    assert 'id="side-effects"' in page and "Activity Charge (a1) completed at event" in page
    assert WorkflowExecution.objects.filter(workflow_id=run.workflow_id).count() == 1

    without = body_of(operator, detail_url(run, "reset/"), point="first", reapply_signals="0")
    assert "<strong>not re-applied</strong>" in without and "without re-applying signals</button>" in without
    assert 'name="reapply_signals" value="0">' in without


@pytest.mark.parametrize("reapply", [True, False])
def test_reset_with_and_without_reapplying_signals_and_both_runs_link(reapply: bool) -> None:
    namespace = NamespaceFactory(name="shop")
    base = order_story(namespace)
    first = completed_ids(base)[0]
    operator = signed_in(namespace, MemberRole.OPERATOR)
    form = {
        "request_id": str(uuid.uuid4()),
        "reason": "charge twice by mistake",
        "point": "first",
        "reapply_signals": "1" if reapply else "0",
    }
    done = operator.post(detail_url(base, "reset/"), form)
    new = WorkflowExecution.objects.get(workflow_id=base.workflow_id, status=ExecutionStatus.RUNNING)
    assert done.status_code == 302 and done["Location"] == detail_url(new)
    reapplied = HistoryEvent.objects.filter(
        run=new, event_type="WorkflowExecutionSignaled", event_id__gt=first
    )
    assert [e.attributes["signal_name"] for e in reapplied] == (["approve"] if reapply else [])
    assert AuditEntry.objects.get().details == {"point": "first", "reapply_signals": reapply}

    new_page = body_of(operator, detail_url(new))
    banner = re.search(r'<p class="lineage" id="reset-from">(.*?)</p>', new_page, flags=re.S)
    assert banner is not None
    assert detail_url(base) in banner.group(1) and f"at event {first}" in banner.group(1)
    assert "charge twice by mistake" in banner.group(1) and AuditEntry.objects.get().actor in banner.group(1)
    old_page = body_of(operator, detail_url(base))
    into = re.search(r'<p class="lineage" id="reset-into">(.*?)</p>', old_page, flags=re.S)
    assert into is not None and detail_url(new) in into.group(1)


def test_reset_needs_a_reason_and_changes_nothing_without_one() -> None:
    namespace = NamespaceFactory(name="shop")
    run = order_story(namespace)
    operator = signed_in(namespace, MemberRole.OPERATOR)
    response = operator.post(detail_url(run, "reset/"), {"request_id": "r1", "reason": "", "point": "first"})
    assert response.status_code == 400 and b"a reason is required" in response.content
    assert WorkflowExecution.objects.filter(workflow_id=run.workflow_id).count() == 1
    assert not AuditEntry.objects.exists()


# ---------------------------------------------------------------- roles


def test_viewers_may_open_nothing_of_reset_and_outsiders_see_nothing() -> None:
    namespace = NamespaceFactory(name="shop")
    run = order_story(namespace)
    viewer = signed_in(namespace, MemberRole.VIEWER)
    assert viewer.get(detail_url(run, "reset/"), {"point": "first"}).status_code == 403
    form = {"request_id": "r1", "reason": "x", "point": "first"}
    assert viewer.post(detail_url(run, "reset/"), form).status_code == 403

    outsider = signed_in(NamespaceFactory(name="elsewhere"), MemberRole.ADMIN)
    for suffix in ("reset/", "query/", "events/1.json"):
        assert outsider.get(detail_url(run, suffix)).status_code == 404, suffix
    assert outsider.post(detail_url(run, "reset/"), form).status_code == 404
    assert outsider.post(detail_url(run, "query/"), {"query_type": "state"}).status_code == 404
    assert WorkflowExecution.objects.filter(workflow_id=run.workflow_id).count() == 1
    assert not AuditEntry.objects.exists()


# ---------------------------------------------------------------- panels and downloads


def test_the_page_shows_pending_timers_and_activities_with_their_retry_state() -> None:
    namespace = NamespaceFactory(name="shop")
    run = order_story(namespace)
    page = body_of(signed_in(namespace, MemberRole.VIEWER), detail_url(run))
    timers = re.search(r'<table id="pending-timers">(.*?)</table>', page, flags=re.S)
    assert timers is not None and "<td>t1</td>" in timers.group(1) and " min)" in timers.group(1)
    assert '<tbody id="event-rows">' in page and 'id="event-1"' in page
    assert f'href="/ns/shop/workflows/order-1/runs/{run.run_id}/query/"' in page


@pytest.mark.django_db(transaction=True)
def test_children_show_as_a_tree_linking_each_run() -> None:
    namespace = NamespaceFactory(name="shop")
    parent = ExecutionFactory(namespace=namespace, workflow_id="parent", task_queue="parents")
    start_child(parent, "child", "Pack", queue="kids")
    child = WorkflowExecution.objects.get(namespace=namespace, workflow_id="child")
    start_child(child, "grandchild", "Label", queue="grandkids")
    grandchild = WorkflowExecution.objects.get(namespace=namespace, workflow_id="grandchild")

    page = body_of(signed_in(namespace, MemberRole.VIEWER), detail_url(parent))
    tree = re.search(r'<div id="children-tree">(.*)</div>', page, flags=re.S)
    assert tree is not None
    assert tree.group(1).index(detail_url(child)) < tree.group(1).index(detail_url(grandchild))
    assert "Pack" in tree.group(1) and "Label" in tree.group(1) and "Running" in tree.group(1)


def start_child(parent: WorkflowExecution, workflow_id: str, workflow_type: str, *, queue: str) -> None:
    """The parent's workflow task starts a child, and the transfer carrier starts it."""
    task = poll_once(parent.namespace, parent.task_queue, "workflow", "test-worker")
    assert task is not None
    attributes = {
        "workflow_id": workflow_id,
        "workflow_type": {"name": workflow_type},
        "task_queue": {"name": queue},
    }
    command = {"command_type": "StartChildWorkflowExecution", "attributes": attributes}
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[command]
    )
    shard, _ = Shard.objects.get_or_create(shard_id=parent.shard_id, defaults={"range_id": 1})
    for duty in TimerTask.objects.filter(run=parent, kind=TimerKind.START_CHILD):
        assert process_transfer(ShardFence(shard.shard_id, shard.range_id), duty.id)


def test_an_event_downloads_as_json_with_stored_payloads_in_full() -> None:
    namespace = NamespaceFactory(name="shop", payload_inline_limit_bytes=100)
    run = ExecutionFactory(namespace=namespace)
    big = {"metadata": {"encoding": "json/plain"}, "data": "x" * 5000}
    kernel.signal_workflow_execution(
        namespace, workflow_id=run.workflow_id, run_id=None, signal_name="load", input=[big]
    )
    signal = HistoryEvent.objects.get(run=run, event_type="WorkflowExecutionSignaled")
    assert "payload_ref" in signal.attributes["input"][0] and Payload.objects.exists()
    viewer = signed_in(namespace, MemberRole.VIEWER)
    response = viewer.get(detail_url(run, f"events/{signal.event_id}.json"))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    body = json.loads(response.content)
    assert body["event_type"] == "WorkflowExecutionSignaled" and body["attributes"]["input"] == [big]
    assert viewer.get(detail_url(run, "events/999.json")).status_code == 404


def test_a_query_with_bad_arguments_is_refused_before_any_worker_is_asked() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    viewer = signed_in(namespace, MemberRole.VIEWER)
    response = viewer.post(detail_url(run, "query/"), {"query_type": "state", "query_args": "{nope"})
    assert response.status_code == 400 and b"query arguments is not JSON" in response.content
    missing = viewer.post(detail_url(run, "query/"), {"query_type": " "})
    assert missing.status_code == 400 and b"a query name is required" in missing.content
    assert not AuditEntry.objects.exists()
