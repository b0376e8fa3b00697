"""The executions list's views, export, batch pages and failure triage, through Django's
test client on real PostgreSQL."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import AsyncClient, Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.visibility_data import bulk_insert_runs
from executions import visibility
from executions.batch_runner import BatchRunner
from executions.models import AuditAction, AuditEntry, BatchJob, BatchState, SavedView
from executions.ui import lists
from history import kernel
from history.kernel.timers import ShardFence, fire_timers
from history.models import ExecutionStatus, Shard, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import MemberRole, Namespace
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory, scope_of
from tests.integration.test_kernel_query_plans import captured_sql, indexes_used, plan_without_seqscans

pytestmark = pytest.mark.django_db


def member(namespace: Namespace, role: str) -> tuple[Client, Any]:
    user = MembershipFactory(namespace=namespace, role=role).user
    client = Client()
    client.force_login(user)
    return client, user


def signed_in(namespace: Namespace, role: str) -> Client:
    return member(namespace, role)[0]


def workflow_ids(body: str) -> set[str]:
    return set(re.findall(r'/workflows/([^/"]+)/runs/', body))


def take_task(run: WorkflowExecution, kind: str = "workflow") -> dict[str, Any]:
    task = poll_once(run.namespace, run.task_queue, kind, "test-worker")
    assert task is not None
    return task


def failed(
    namespace: Namespace, workflow_type: str, message: str, workflow_id: str = ""
) -> WorkflowExecution:
    """A run its worker failed with ``message``."""
    options = {"workflow_id": workflow_id} if workflow_id else {}
    run = ExecutionFactory(
        namespace=namespace, workflow_type=workflow_type, task_queue=f"q-{workflow_type}", **options
    )
    kernel.respond_workflow_task_completed(
        scope=kernel.TaskScope(namespace.id, run.task_queue),
        task_token=take_task(run)["task_token"],
        commands=[{"command_type": "FailWorkflowExecution", "attributes": {"failure": {"message": message}}}],
    )
    return WorkflowExecution.objects.get(run_id=run.run_id)


def with_failing_workflow_task(namespace: Namespace, workflow_id: str) -> WorkflowExecution:
    run = ExecutionFactory(namespace=namespace, workflow_id=workflow_id, task_queue=f"q-{workflow_id}")
    kernel.respond_workflow_task_failed(
        scope=kernel.TaskScope(namespace.id, run.task_queue),
        task_token=take_task(run)["task_token"],
        cause="WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR",
        failure={"message": "nondeterminism"},
    )
    return run


def with_retrying_activity(namespace: Namespace, workflow_id: str, failures: int) -> WorkflowExecution:
    """A run whose one activity failed ``failures`` times (each retry's timer fired at once)."""
    run = ExecutionFactory(namespace=namespace, workflow_id=workflow_id, task_queue=f"q-{workflow_id}")
    kernel.respond_workflow_task_completed(
        scope=kernel.TaskScope(namespace.id, run.task_queue),
        task_token=take_task(run)["task_token"],
        commands=[
            {
                "command_type": "ScheduleActivityTask",
                "attributes": {"activity_id": "a1", "activity_type": "Charge", "start_to_close_timeout": 5},
            }
        ],
    )
    Shard.objects.update_or_create(shard_id=run.shard_id, defaults={"range_id": 1})
    for failure in range(failures):
        if failure:
            retry = TimerTask.objects.get(run_id=run.run_id, kind=TimerKind.ACTIVITY_RETRY)
            assert fire_timers(ShardFence(run.shard_id, 1), [(retry.id, str(run.run_id))]) == 1
        task = take_task(run, "activity")
        kernel.respond_activity_task_failed(
            scope=scope_of(task), task_token=task["task_token"], failure={"message": "card declined"}
        )
    return run


# ---------------------------------------------------------------- the list moved, with its hooks


def test_the_list_keeps_its_query_box_and_links_each_row() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace, workflow_id="order-7")
    body = signed_in(namespace, MemberRole.VIEWER).get("/ns/shop/").content.decode()
    assert (
        '<input id="q" type="search" name="q"' in body and '<label for="q">Visibility query</label>' in body
    )
    assert ">Search</button>" in body
    assert f'href="/ns/shop/workflows/order-7/runs/{run.run_id}/"' in body


def test_a_viewer_sees_no_batch_actions_and_an_operator_does() -> None:
    namespace = NamespaceFactory(name="shop")
    assert "Batch reset" not in signed_in(namespace, MemberRole.VIEWER).get("/ns/shop/").content.decode()
    body = signed_in(namespace, MemberRole.OPERATOR).get("/ns/shop/", {"type": "Order"}).content.decode()
    assert "/ns/shop/batch/new/?q=%28WorkflowType+%3D+%22Order%22%29&amp;operation=reset" in body


# ---------------------------------------------------------------- built-in views


def test_builtin_views_running_failed_in_24h_and_stuck() -> None:
    namespace = NamespaceFactory(name="shop")
    healthy = ExecutionFactory(namespace=namespace, workflow_id="healthy")
    failing_task = with_failing_workflow_task(namespace, "failing-task")
    retried_twice = with_retrying_activity(namespace, "retried-twice", failures=2)
    retried_once = with_retrying_activity(namespace, "retried-once", failures=1)
    failed(namespace, "Order", "boom", workflow_id="failed-now")
    viewer = signed_in(namespace, MemberRole.VIEWER)

    running = workflow_ids(viewer.get("/ns/shop/", {"view": "running"}).content.decode())
    assert running == {"healthy", "failing-task", "retried-twice", "retried-once"}
    assert workflow_ids(viewer.get("/ns/shop/", {"view": "failed-24h"}).content.decode()) == {"failed-now"}
    stuck = viewer.get("/ns/shop/", {"view": "stuck"})
    assert stuck.status_code == 200
    assert workflow_ids(stuck.content.decode()) == {failing_task.workflow_id, retried_twice.workflow_id}
    assert retried_once.workflow_id != healthy.workflow_id  # both are running and not stuck
    assert 'aria-current="page">Stuck' in stuck.content.decode()


def test_stuck_attributes_compose_with_the_query_language() -> None:
    namespace = NamespaceFactory(name="shop")
    with_failing_workflow_task(namespace, "failing-task")
    with_retrying_activity(namespace, "retried-twice", failures=2)
    ExecutionFactory(namespace=namespace, workflow_id="plain")

    def ids(query: str) -> set[str]:
        return set(visibility.search(namespace, query).values_list("workflow_id", flat=True))

    assert ids("WorkflowTaskAttempt >= 2") == {"failing-task"}
    assert ids("PendingActivityAttempt = 3") == {"retried-twice"}
    assert ids("PendingActivityAttempt IS NULL") == {"failing-task", "plain"}
    assert ids("NOT PendingActivityAttempt >= 3") == set()  # no pending activity: neither X nor NOT X
    with pytest.raises(visibility.VisibilityQueryError, match="cannot ORDER BY computed"):
        visibility.search(namespace, "ORDER BY PendingActivityAttempt")


def test_the_stuck_query_reads_indexes_only() -> None:
    namespace = NamespaceFactory(name="shop")
    bulk_insert_runs(namespace, 10_000)  # on a few rows any plan goes
    with_retrying_activity(namespace, "retried-twice", failures=2)
    query = lists.ListRequest("", "", "", "StartTime", True, "", "stuck")
    query.query = lists.saved_views.BUILTIN_VIEWS[2].query()
    listing, _ = query.queries(namespace)
    sql = captured_sql(lambda: visibility.page(namespace, listing, page_size=50), "history_pendingactivity")
    nodes = plan_without_seqscans(sql)  # the running runs by their index, each one's activities by run
    assert "exec_ns_status" in {n.get("Index Name") for n in nodes}
    assert {n.get("Relation Name") for n in nodes} >= {"history_workflowexecution", "history_pendingactivity"}


# ---------------------------------------------------------------- saved views


def test_a_viewer_saves_a_personal_view_that_only_they_see() -> None:
    namespace = NamespaceFactory(name="shop")
    viewer, user = member(namespace, MemberRole.VIEWER)
    other = signed_in(namespace, MemberRole.VIEWER)
    response = viewer.post(
        "/ns/shop/views/",
        {"name": "Orders", "q": 'WorkflowType = "Order"', "sort": "StartTime", "dir": "desc"},
    )
    assert response.status_code == 302 and response["Location"].startswith("/ns/shop/?q=")
    view = SavedView.objects.get(namespace=namespace, name="Orders")
    assert (view.owner_id, view.shared, view.query) == (user.pk, False, 'WorkflowType = "Order"')
    assert (
        "?q=WorkflowType+%3D+%22Order%22&amp;sort=StartTime&amp;dir=desc"
        in viewer.get("/ns/shop/").content.decode()
    )
    assert "Orders" not in other.get("/ns/shop/").content.decode()
    entry = AuditEntry.objects.get(namespace=namespace, action=AuditAction.VIEW_SAVE)
    assert entry.new == {"query": 'WorkflowType = "Order"', "shared": False} and entry.target == "view:Orders"


def test_sharing_needs_the_operator_role_and_shared_views_show_to_every_member() -> None:
    namespace = NamespaceFactory(name="shop")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    assert viewer.post("/ns/shop/views/", {"name": "All", "q": "", "shared": "on"}).status_code == 403
    assert not SavedView.objects.exists()
    operator = signed_in(namespace, MemberRole.OPERATOR)
    operator.post(
        "/ns/shop/views/", {"name": "Team failures", "q": 'ExecutionStatus = "Failed"', "shared": "on"}
    )
    body = viewer.get("/ns/shop/").content.decode()
    assert "Team failures" in body and "shared by" in body
    assert 'aria-label="Delete view Team failures"' not in body


def test_deleting_views_own_ones_and_admins_delete_shared_ones() -> None:
    namespace = NamespaceFactory(name="shop")
    operator, _ = member(namespace, MemberRole.OPERATOR)
    operator.post("/ns/shop/views/", {"name": "Shared", "q": "", "shared": "on"})
    operator.post("/ns/shop/views/", {"name": "Mine", "q": ""})
    shared, mine = SavedView.objects.get(name="Shared"), SavedView.objects.get(name="Mine")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    assert viewer.post(f"/ns/shop/views/{shared.pk}/delete/").status_code == 403
    assert viewer.post(f"/ns/shop/views/{mine.pk}/delete/").status_code == 404  # not theirs to see
    admin = signed_in(namespace, MemberRole.ADMIN)
    assert admin.post(f"/ns/shop/views/{shared.pk}/delete/").status_code == 302
    assert operator.post(f"/ns/shop/views/{mine.pk}/delete/").status_code == 302
    assert not SavedView.objects.exists()
    assert AuditEntry.objects.filter(action=AuditAction.VIEW_DELETE).count() == 2


def test_a_view_with_a_bad_query_or_a_taken_name_is_refused() -> None:
    namespace = NamespaceFactory(name="shop")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    bad = viewer.post("/ns/shop/views/", {"name": "Bad", "q": "Nope = 1"})
    assert bad.status_code == 400 and b"Nope" in bad.content
    assert viewer.post("/ns/shop/views/", {"name": "", "q": ""}).status_code == 400
    assert viewer.post("/ns/shop/views/", {"name": "Twice", "q": ""}).status_code == 302
    assert viewer.post("/ns/shop/views/", {"name": "Twice", "q": "", "request_id": "r2"}).status_code == 409
    assert SavedView.objects.count() == 1


def test_views_of_another_namespace_are_404() -> None:
    other = NamespaceFactory(name="other")
    owner = signed_in(other, MemberRole.ADMIN)
    owner.post("/ns/other/views/", {"name": "Secret", "q": "", "shared": "on"})
    view = SavedView.objects.get()
    outsider = signed_in(NamespaceFactory(name="own"), MemberRole.ADMIN)
    assert outsider.post("/ns/other/views/", {"name": "x", "q": ""}).status_code == 404
    assert outsider.post(f"/ns/other/views/{view.pk}/delete/").status_code == 404
    assert outsider.post(f"/ns/own/views/{view.pk}/delete/").status_code == 404
    assert SavedView.objects.count() == 1


# ---------------------------------------------------------------- export


def exported(client_user: Any, url: str, params: dict[str, str]) -> tuple[int, str, str]:
    """The export through the ASGI path the frontend serves, streamed chunk by chunk."""
    client = AsyncClient()
    async_to_sync(client.aforce_login)(client_user)
    response = async_to_sync(client.get)(url, params)
    if not response.streaming:
        return response.status_code, response["Content-Type"], response.content.decode()

    async def body() -> str:
        return "".join([chunk.decode() async for chunk in response.streaming_content])

    return response.status_code, response["Content-Disposition"], async_to_sync(body)()


def test_export_streams_every_match_in_keyset_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lists, "EXPORT_PAGE_SIZE", 3)
    namespace = NamespaceFactory(name="shop")
    runs = [ExecutionFactory(namespace=namespace, workflow_type="Order") for _ in range(7)]
    ExecutionFactory(namespace=namespace, workflow_type="Refund")
    kernel.terminate_workflow_execution(namespace, workflow_id=runs[0].workflow_id, run_id=None, reason="r")
    _, user = member(namespace, MemberRole.VIEWER)
    with CaptureQueriesContext(connection) as queries:
        status, disposition, text = exported(user, "/ns/shop/export.csv", {"type": "Order"})
    assert status == 200 and disposition == 'attachment; filename="shop-executions.csv"'
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["workflow_id", "run_id", "workflow_type", "status", "start_time", "close_time"]
    assert {(r[0], r[1]) for r in rows[1:]} == {(r.workflow_id, str(r.run_id)) for r in runs}
    terminated = next(r for r in rows[1:] if r[0] == runs[0].workflow_id)
    assert terminated[3] == "Terminated" and terminated[5] != ""
    assert all(r[2] == "Order" for r in rows[1:])
    pages = [
        q
        for q in queries.captured_queries
        if "history_workflowexecution" in q["sql"] and "LIMIT 4" in q["sql"]
    ]
    assert len(pages) == 3  # 7 rows, 3 a page: one page of rows in memory at a time


def test_export_of_a_bad_query_is_400_and_of_another_namespace_404() -> None:
    namespace = NamespaceFactory(name="shop")
    _, user = member(namespace, MemberRole.VIEWER)
    status, _, text = exported(user, "/ns/shop/export.csv", {"q": "Nope = 1"})
    assert status == 400 and "Nope" in text
    NamespaceFactory(name="other")
    assert exported(user, "/ns/other/export.csv", {})[0] == 404


# ---------------------------------------------------------------- batch


def start_batch(client: Client, **fields: str) -> Any:
    data = {
        "operation": "terminate",
        "q": 'WorkflowType = "Order"',
        "reason": "cleanup",
        "confirmed_count": "1",
    }
    return client.post("/ns/shop/batch/new/", {**data, **fields})


def test_a_viewer_cannot_open_or_start_a_batch() -> None:
    namespace = NamespaceFactory(name="shop")
    ExecutionFactory(namespace=namespace, workflow_type="Order")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    assert viewer.get("/ns/shop/batch/new/", {"q": ""}).status_code == 403
    assert start_batch(viewer).status_code == 403
    assert not BatchJob.objects.exists()
    assert viewer.get("/ns/shop/batch/").status_code == 200


def test_the_dry_run_counts_and_lists_the_first_matches_before_any_start() -> None:
    namespace = NamespaceFactory(name="shop")
    runs = [ExecutionFactory(namespace=namespace, workflow_type="Order") for _ in range(3)]
    ExecutionFactory(namespace=namespace, workflow_type="Refund")
    operator = signed_in(namespace, MemberRole.OPERATOR)
    page = operator.get(
        "/ns/shop/batch/new/",
        {"q": 'WorkflowType = "Order"', "operation": "terminate", "reason": "x", "dry_run": "1"},
    )
    body = page.content.decode()
    assert page.status_code == 200 and '<span id="dry-run-count">3</span>' in body
    assert workflow_ids(body) == {r.workflow_id for r in runs}
    assert ">Terminate 3 runs</button>" in body and '<label for="reason">Reason</label>' in body
    assert not BatchJob.objects.exists()
    refused = start_batch(operator, confirmed_count="")
    assert refused.status_code == 400 and b"dry run first" in refused.content
    bad = operator.get("/ns/shop/batch/new/", {"q": "Nope = 1", "dry_run": "1"})
    assert bad.status_code == 400 and b"Nope" in bad.content


def test_a_batch_terminate_runs_end_to_end_with_progress_and_audit() -> None:
    namespace = NamespaceFactory(name="shop")
    runs = [ExecutionFactory(namespace=namespace, workflow_type="Order") for _ in range(4)]
    other = ExecutionFactory(namespace=namespace, workflow_type="Refund")
    operator = signed_in(namespace, MemberRole.OPERATOR)
    started = start_batch(operator, job_id="cleanup-1", rps="500", request_id="start-1")
    assert started.status_code == 302 and started["Location"] == "/ns/shop/batch/cleanup-1/"
    assert start_batch(operator, job_id="cleanup-1", request_id="start-1").status_code == 302  # resubmitted
    job = BatchJob.objects.get()
    assert (job.total, job.state, job.rps, job.created_by) == (
        4,
        BatchState.RUNNING,
        500.0,
        f"ui:{job.created_by[3:]}",
    )

    page = operator.get("/ns/shop/batch/cleanup-1/").content.decode()
    assert "chronicle/batch.js" in page and 'id="batch-total" class="stat">4<' in page

    runner = BatchRunner("test-runner", chunk_seconds=5.0)
    claimed = runner.claim()
    assert claimed is not None
    runner.process(claimed)
    runner.release(claimed)

    state = operator.get("/ns/shop/batch/cleanup-1/progress.json").json()
    assert (state["state"], state["done"], state["failed"], state["total"]) == ("Completed", 4, 0, 4)
    assert state["progress"] == 1.0 and state["rate"] > 0
    statuses = set(
        WorkflowExecution.objects.filter(run_id__in=[r.run_id for r in runs]).values_list("status", flat=True)
    )
    assert statuses == {ExecutionStatus.TERMINATED}
    assert WorkflowExecution.objects.get(run_id=other.run_id).status == ExecutionStatus.RUNNING
    entry = AuditEntry.objects.get(action=AuditAction.BATCH_START)
    assert entry.target == "batch:cleanup-1" and entry.details["total"] == 4 and entry.reason == "cleanup"
    listing = operator.get("/ns/shop/batch/").content.decode()
    assert 'href="/ns/shop/batch/cleanup-1/"' in listing and "Completed" in listing


def test_a_batch_reset_records_per_item_failures_and_a_signal_batch_takes_json() -> None:
    namespace = NamespaceFactory(name="shop")
    ExecutionFactory(namespace=namespace, workflow_type="Order")  # no completed workflow task: reset fails
    operator = signed_in(namespace, MemberRole.OPERATOR)
    start_batch(
        operator, operation="reset", job_id="reset-1", reset_type="LastWorkflowTask", reapply_signals="on"
    )
    job = BatchJob.objects.get()
    assert job.params == {"reset_type": "LastWorkflowTask", "reapply_signals": True}
    runner = BatchRunner("test-runner")
    claimed = runner.claim()
    assert claimed is not None
    runner.process(claimed)
    page = operator.get("/ns/shop/batch/reset-1/").content.decode()
    assert 'id="batch-failed" class="stat">1<' in page and "No failures." not in page
    bad = start_batch(operator, operation="signal", job_id="sig-1", signal_name="go", signal_input="{nope")
    assert bad.status_code == 400 and b"not JSON" in bad.content
    start_batch(operator, operation="signal", job_id="sig-2", signal_name="go", signal_input='{"a": 1}')
    # Sent as the payloads SDK workers decode, as the run's own Signal form sends them.
    encoded = [{"metadata": {"encoding": "json/plain"}, "data": {"a": 1}}]
    assert BatchJob.objects.get(job_id="sig-2").params == {"signal_name": "go", "input": encoded}


def test_the_rate_changes_while_it_runs_and_stop_ends_it_both_audited() -> None:
    namespace = NamespaceFactory(name="shop")
    ExecutionFactory(namespace=namespace, workflow_type="Order")
    operator = signed_in(namespace, MemberRole.OPERATOR)
    start_batch(operator, job_id="slow", rps="1")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    assert viewer.post("/ns/shop/batch/slow/rate/", {"rps": "5"}).status_code == 403
    assert viewer.post("/ns/shop/batch/slow/stop/", {"reason": "x"}).status_code == 403
    assert operator.post("/ns/shop/batch/slow/rate/", {"rps": "0"}).status_code == 400
    assert operator.post("/ns/shop/batch/slow/rate/", {"rps": "12.5"}).status_code == 302
    assert BatchJob.objects.get().rps == 12.5
    rate = AuditEntry.objects.get(action=AuditAction.BATCH_RATE)
    assert (rate.old, rate.new) == ({"rps": 1.0}, {"rps": 12.5})
    assert operator.post("/ns/shop/batch/slow/stop/", {"reason": ""}).status_code == 400
    assert operator.post("/ns/shop/batch/slow/stop/", {"reason": "wrong query"}).status_code == 302
    job = BatchJob.objects.get()
    assert (job.state, job.stop_reason) == (BatchState.STOPPED, "wrong query")
    page = operator.get("/ns/shop/batch/slow/").content.decode()
    assert "Stop the job" not in page and "batch.js" not in page


def test_batch_pages_of_another_namespace_are_404() -> None:
    other = NamespaceFactory(name="other")
    ExecutionFactory(namespace=other, workflow_type="Order")
    owner = signed_in(other, MemberRole.OPERATOR)
    owner.post(
        "/ns/other/batch/new/",
        {"operation": "cancel", "q": "", "reason": "r", "confirmed_count": "1", "job_id": "j"},
    )
    outsider = signed_in(NamespaceFactory(name="shop"), MemberRole.ADMIN)
    for url in (
        "/ns/other/batch/",
        "/ns/other/batch/j/",
        "/ns/other/batch/j/progress.json",
        "/ns/shop/batch/j/",
    ):
        assert outsider.get(url).status_code == 404, url
    assert outsider.post("/ns/other/batch/j/stop/", {"reason": "x"}).status_code == 404
    assert outsider.post("/ns/shop/batch/j/stop/", {"reason": "x"}).status_code == 404
    assert BatchJob.objects.get().state == BatchState.RUNNING


# ---------------------------------------------------------------- triage


def test_triage_groups_by_type_and_by_masked_message_and_links_to_the_same_runs() -> None:
    namespace = NamespaceFactory(name="shop")
    declined = [
        failed(namespace, "Order", f"card {n} declined for order-{n}7\nat line 3") for n in (41, 42, 43)
    ]
    failed(namespace, "Refund", "card 9 declined for order-1")
    failed(namespace, "Refund", "ledger 2f1b1d2e-8f1c-4c5e-9a57-6c1e0b1f0a11 locked")
    terminated = ExecutionFactory(namespace=namespace, workflow_type="Order")
    kernel.terminate_workflow_execution(
        namespace, workflow_id=terminated.workflow_id, run_id=None, reason="r"
    )
    ExecutionFactory(namespace=namespace, workflow_type="Order")  # still running: not counted
    viewer = signed_in(namespace, MemberRole.VIEWER)

    page = viewer.get("/ns/shop/triage/", {"window": "1h"})
    assert page.status_code == 200
    groups = visibility.failure_groups(namespace, timezone.now() - timedelta(hours=1))
    by_type = {(g["status"], g["workflow_type"]): g["count"] for g in groups["by_type"]}
    assert by_type == {("Failed", "Order"): 3, ("Failed", "Refund"): 2, ("Terminated", "Order"): 1}
    by_message = {(g["status"], g["message"]): g["count"] for g in groups["by_message"]}
    assert by_message == {
        ("Failed", "card <n> declined for order-<n>"): 4,
        ("Failed", "ledger <id> locked"): 1,
        ("Terminated", None): 1,
    }
    body = page.content.decode()
    assert "card &lt;n&gt; declined for order-&lt;n&gt;" in body and "(no failure message)" in body
    link = re.search(r'<a href="(/ns/shop/\?q=[^"]+)"><code>card', body)
    assert link is not None
    listed = viewer.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert {r.workflow_id for r in declined} <= workflow_ids(listed) and len(workflow_ids(listed)) == 4
    assert "Batch reset" not in listed  # a viewer; an operator gets the batch links from there


def test_triage_windows_roles_and_tenancy() -> None:
    namespace = NamespaceFactory(name="shop")
    failed(namespace, "Order", "boom")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    for window in ("1h", "24h", "7d", "bogus"):
        assert viewer.get("/ns/shop/triage/", {"window": window}).status_code == 200
    assert (
        'aria-current="page">Last 24h' in viewer.get("/ns/shop/triage/", {"window": "bogus"}).content.decode()
    )
    NamespaceFactory(name="other")
    assert viewer.get("/ns/other/triage/").status_code == 404


def test_the_triage_counts_read_the_failed_runs_index() -> None:
    namespace = NamespaceFactory(name="shop")
    bulk_insert_runs(namespace, 10_000)  # on a few rows any plan goes
    since = timezone.now() - timedelta(hours=1)
    sql = captured_sql(lambda: visibility.failure_groups(namespace, since), "regexp_replace")
    assert "exec_ns_failed_close" in indexes_used(sql)


def test_a_deep_export_page_seeks_to_its_keyset_position() -> None:
    """The token's sort key bounds the index scan, so page 9 does not filter pages 1-8 away."""
    namespace = NamespaceFactory(name="shop")
    bulk_insert_runs(namespace, 10_000)
    token = ""
    for _ in range(8):
        _, next_token = visibility.page(
            namespace, "", page_size=1000, next_page_token=token, only=("workflow_id",)
        )
        assert next_token is not None
        token = next_token
    sql = captured_sql(
        lambda: visibility.page(namespace, "", page_size=1000, next_page_token=token, only=("workflow_id",)),
        "LIMIT 1001",
    )
    # With sorting off the planner must walk the ordered index; the bound is its seek key.
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")
        try:
            nodes = plan_without_seqscans(sql)
        finally:
            cursor.execute("RESET enable_sort")
    walks = [n for n in nodes if n.get("Index Name") == "exec_ns_start"]
    assert walks and "start_time <=" in walks[0]["Index Cond"], nodes
