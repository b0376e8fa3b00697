"""The operator UI through Django's test client on real PostgreSQL: pages, roles, actions."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.test import Client

from executions.models import AuditEntry
from history import kernel
from history.models import ExecutionStatus, HistoryEvent, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import MemberRole, Namespace
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory, UserFactory, scope_of

pytestmark = pytest.mark.django_db


def signed_in(namespace: Namespace, role: str, **client_options: Any) -> Client:
    user = MembershipFactory(namespace=namespace, role=role).user
    client = Client(**client_options)
    client.force_login(user)
    return client


def detail_url(run: WorkflowExecution, suffix: str = "") -> str:
    return f"/ns/{run.namespace.name}/workflows/{run.workflow_id}/runs/{run.run_id}/{suffix}"


def with_completed_task(namespace: Namespace, workflow_id: str = "order-1") -> WorkflowExecution:
    """A running run whose first workflow task completed (event 4) after scheduling an activity."""
    run = ExecutionFactory(
        namespace=namespace, workflow_id=workflow_id, workflow_type="Order", task_queue="q"
    )
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[
            {
                "command_type": "ScheduleActivityTask",
                "attributes": {"activity_id": "a1", "activity_type": "Charge", "start_to_close_timeout": 5},
            }
        ],
    )
    return WorkflowExecution.objects.get(run_id=run.run_id)


# ---------------------------------------------------------------- sign-in and tenancy


def test_pages_need_sign_in_and_sign_in_lists_only_own_namespaces(client: Client) -> None:
    mine, theirs = NamespaceFactory(name="mine"), NamespaceFactory(name="theirs")
    user = UserFactory()
    MembershipFactory(user=user, namespace=mine, role=MemberRole.VIEWER)

    assert client.get("/ns/mine/")["Location"].startswith("/login/?next=")
    response = client.post("/login/", {"username": user.username, "password": "password"})
    assert response.status_code == 302 and response["Location"] == "/"

    home = client.get("/")  # one namespace: straight to its workflows
    assert home.status_code == 302 and home["Location"] == "/ns/mine/"
    assert theirs.name not in client.get("/", follow=True).content.decode()
    MembershipFactory(user=user, namespace=NamespaceFactory(name="second"), role=MemberRole.VIEWER)
    listed = client.get("/").content.decode()
    assert "/ns/mine/" in listed and "/ns/second/" in listed and theirs.name not in listed
    assert client.post("/logout/").status_code == 302
    assert client.get("/ns/mine/").status_code == 302


def test_a_bad_password_is_refused(client: Client) -> None:
    user = UserFactory()
    response = client.post("/login/", {"username": user.username, "password": "wrong"})
    assert response.status_code == 200 and b"did not match" in response.content


def test_non_members_get_404_for_namespaces_runs_and_actions() -> None:
    other = NamespaceFactory(name="other")
    run = ExecutionFactory(namespace=other)
    outsider = signed_in(NamespaceFactory(name="own"), MemberRole.ADMIN)

    assert outsider.get("/ns/other/").status_code == 404
    assert outsider.get("/ns/does-not-exist/").status_code == 404
    assert outsider.get(detail_url(run)).status_code == 404
    assert outsider.post(detail_url(run, "terminate/"), {"reason": "x"}).status_code == 404
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == ExecutionStatus.RUNNING


def test_a_run_of_another_namespace_is_404_even_under_a_namespace_one_belongs_to() -> None:
    own, other = NamespaceFactory(name="own"), NamespaceFactory(name="other")
    run = ExecutionFactory(namespace=other, workflow_id="secret")
    operator = signed_in(own, MemberRole.OPERATOR)
    url = f"/ns/own/workflows/secret/runs/{run.run_id}/"
    assert operator.get(url).status_code == 404
    assert operator.post(url + "terminate/", {"reason": "x"}).status_code == 404
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == ExecutionStatus.RUNNING


# ---------------------------------------------------------------- executions list


def test_list_shows_counts_filters_and_pages_by_keyset() -> None:
    namespace = NamespaceFactory(name="shop")
    runs = [ExecutionFactory(namespace=namespace, workflow_type="Order") for _ in range(55)]
    ExecutionFactory(namespace=namespace, workflow_type="Refund", workflow_id="refund-1")
    kernel.terminate_workflow_execution(namespace, workflow_id=runs[0].workflow_id, run_id=None, reason="r")
    viewer = signed_in(namespace, MemberRole.VIEWER)

    first = viewer.get("/ns/shop/", {"type": "Order"})
    body = first.content.decode()
    assert first.status_code == 200
    assert "Running: 54" in body and "Terminated: 1" in body and "refund-1" not in body
    next_link = re.search(r'href="\?([^"]+)" rel="next"', body)
    assert next_link is not None
    second = viewer.get("/ns/shop/?" + next_link.group(1).replace("&amp;", "&")).content.decode()
    shown = set(re.findall(r"wf-\d+", body)) | set(re.findall(r"wf-\d+", second))
    assert shown == {r.workflow_id for r in runs}
    assert 'rel="next"' not in second

    terminated = viewer.get("/ns/shop/", {"status": "Terminated"}).content.decode()
    assert runs[0].workflow_id + "<" in terminated and runs[1].workflow_id + "<" not in terminated


def test_list_sorts_by_close_time() -> None:
    namespace = NamespaceFactory(name="shop")
    early, late = ExecutionFactory(namespace=namespace), ExecutionFactory(namespace=namespace)
    for run in (late, early):
        kernel.terminate_workflow_execution(namespace, workflow_id=run.workflow_id, run_id=None, reason="r")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    body = viewer.get("/ns/shop/", {"sort": "CloseTime", "dir": "desc"}).content.decode()
    assert body.index(early.workflow_id + "<") < body.index(late.workflow_id + "<")
    body = viewer.get("/ns/shop/", {"sort": "CloseTime", "dir": "asc"}).content.decode()
    assert body.index(late.workflow_id + "<") < body.index(early.workflow_id + "<")


def test_a_bad_query_shows_the_message_and_a_caret_under_the_position() -> None:
    namespace = NamespaceFactory(name="shop")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    query = 'WorkflowType = "x" AND Nope = 1'
    response = viewer.get("/ns/shop/", {"q": query})
    body = response.content.decode()
    assert response.status_code == 400
    assert "Nope" in body and "position 23" in body
    assert "<pre>" + query.replace('"', "&quot;") + "\n" + " " * 23 + "^</pre>" in body


def test_a_query_with_its_own_order_by_is_kept_and_combined_with_quick_filters() -> None:
    namespace = NamespaceFactory(name="shop")
    ExecutionFactory(namespace=namespace, workflow_type="Order", workflow_id="o-1")
    viewer = signed_in(namespace, MemberRole.VIEWER)
    query = 'WorkflowId STARTS_WITH "o-" ORDER BY StartTime ASC'
    body = viewer.get("/ns/shop/", {"q": query, "status": "Running", "type": 'Or"der'}).content.decode()
    assert "No workflow executions match." in body
    assert "o-1<" in viewer.get("/ns/shop/", {"q": query, "type": "Order"}).content.decode()


# ---------------------------------------------------------------- execution page


def test_execution_page_shows_header_pending_work_and_events() -> None:
    namespace = NamespaceFactory(name="shop")
    run = with_completed_task(namespace)
    body = signed_in(namespace, MemberRole.VIEWER).get(detail_url(run)).content.decode()
    assert str(run.run_id) in body and "Order" in body and "Charge" in body
    assert "WorkflowExecutionStarted" in body and "WorkflowTaskCompleted" in body
    assert "Actions need the operator role" in body and "/terminate/" not in body


def test_the_event_table_pages_and_collapses_large_payloads() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    for n in range(60):
        kernel.signal_workflow_execution(
            namespace,
            workflow_id=run.workflow_id,
            run_id=None,
            signal_name=f"s{n}",
            input=["x" * (3000 if n == 0 else 1)],
        )
    viewer = signed_in(namespace, MemberRole.VIEWER)
    first = viewer.get(detail_url(run)).content.decode()
    assert 'id="event-50"' in first and 'id="event-51"' not in first
    assert '<details class="ev-json"><summary' in first  # every event's JSON waits behind its line
    second = viewer.get(detail_url(run), {"after": 50}).content.decode()
    assert 'id="event-51"' in second and 'id="event-50"' not in second


def test_a_failing_workflow_task_is_stated_at_the_top() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace, task_queue="q")
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_failed(
        scope=scope_of(task),
        task_token=task["task_token"],
        cause="WorkflowWorkerUnhandledFailure",
        failure={"message": "nondeterminism in step 3", "stack_trace": "at step3()"},
    )
    body = signed_in(namespace, MemberRole.VIEWER).get(detail_url(run)).content.decode()
    assert "The workflow task is failing" in body and "nondeterminism in step 3" in body


# ---------------------------------------------------------------- actions


@pytest.mark.parametrize("action", ["terminate", "cancel", "signal", "reset"])
def test_viewers_are_refused_every_action(action: str) -> None:
    namespace = NamespaceFactory(name="shop")
    run = with_completed_task(namespace)
    viewer = signed_in(namespace, MemberRole.VIEWER)
    assert viewer.get(detail_url(run, f"{action}/")).status_code == 403
    form = {"reason": "x", "signal_name": "go", "point": "last", "request_id": "r1"}
    assert viewer.post(detail_url(run, f"{action}/"), form).status_code == 403
    assert not AuditEntry.objects.exists()
    assert WorkflowExecution.objects.get(run_id=run.run_id).next_event_id == run.next_event_id


def test_terminate_needs_a_reason_then_terminates_and_is_audited() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    operator = signed_in(namespace, MemberRole.OPERATOR)
    page = operator.get(detail_url(run, "terminate/")).content.decode()
    request_id = re.search(r'name="request_id" value="([^"]+)"', page)
    assert request_id is not None

    refused = operator.post(detail_url(run, "terminate/"), {"request_id": request_id.group(1), "reason": " "})
    assert refused.status_code == 400 and b"a reason is required" in refused.content
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == ExecutionStatus.RUNNING

    done = operator.post(
        detail_url(run, "terminate/"), {"request_id": request_id.group(1), "reason": "stuck"}
    )
    assert done.status_code == 302 and done["Location"] == detail_url(run)
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == ExecutionStatus.TERMINATED
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.reason, entry.run_id) == ("terminate", "stuck", run.run_id)
    assert entry.actor.startswith("user-")
    terminated = HistoryEvent.objects.get(run=run, event_type="WorkflowExecutionTerminated")
    assert (
        terminated.attributes["reason"] == "stuck"
        and terminated.attributes["identity"] == f"ui:{entry.actor}"
    )


def test_a_double_submitted_form_acts_once() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    operator = signed_in(namespace, MemberRole.OPERATOR)
    form = {"request_id": "form-1", "reason": "nudge", "signal_name": "go", "signal_input": '{"n": 1}'}
    for _ in range(2):
        assert operator.post(detail_url(run, "signal/"), form).status_code == 302
    signals = HistoryEvent.objects.filter(run=run, event_type="WorkflowExecutionSignaled")
    # The UI sends what was typed as the json/plain payload an SDK worker decodes.
    assert [s.attributes["input"] for s in signals] == [
        [{"metadata": {"encoding": "json/plain"}, "data": {"n": 1}}]
    ]
    assert AuditEntry.objects.count() == 1


def test_signal_with_bad_json_is_refused_and_sends_nothing() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    operator = signed_in(namespace, MemberRole.OPERATOR)
    form = {"request_id": "form-1", "reason": "nudge", "signal_name": "go", "signal_input": "{nope"}
    response = operator.post(detail_url(run, "signal/"), form)
    assert response.status_code == 400 and b"signal input is not JSON" in response.content
    assert not HistoryEvent.objects.filter(run=run, event_type="WorkflowExecutionSignaled").exists()
    assert not AuditEntry.objects.exists()


def test_cancel_records_the_request() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    admin = signed_in(namespace, MemberRole.ADMIN)
    assert (
        admin.post(detail_url(run, "cancel/"), {"request_id": "c1", "reason": "customer left"}).status_code
        == 302
    )
    assert WorkflowExecution.objects.get(run_id=run.run_id).cancel_requested
    assert AuditEntry.objects.get().action == "cancel"


def test_terminating_a_closed_run_shows_the_kernels_error() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    kernel.terminate_workflow_execution(namespace, workflow_id=run.workflow_id, run_id=None, reason="r")
    operator = signed_in(namespace, MemberRole.OPERATOR)
    response = operator.post(detail_url(run, "terminate/"), {"request_id": "t2", "reason": "again"})
    assert response.status_code == 404 and b"already completed" in response.content
    assert not AuditEntry.objects.exists()


def test_reset_shows_the_preview_then_resets_once_and_opens_the_new_run() -> None:
    namespace = NamespaceFactory(name="shop")
    run = with_completed_task(namespace)
    operator = signed_in(namespace, MemberRole.OPERATOR)

    picker = operator.get(detail_url(run, "reset/")).content.decode()
    assert 'name="reason"' not in picker  # no confirmation before a preview
    preview = operator.get(detail_url(run, "reset/"), {"point": "last"}).content.decode()
    assert "Reset to event</dt><dd>4</dd>" in preview and "Events kept</dt><dd>3</dd>" in preview
    assert WorkflowExecution.objects.filter(workflow_id=run.workflow_id).count() == 1

    form = {"request_id": str(uuid.uuid4()), "reason": "bad deploy", "point": "4"}
    first = operator.post(detail_url(run, "reset/"), form)
    again = operator.post(detail_url(run, "reset/"), form)
    new_run = WorkflowExecution.objects.get(workflow_id=run.workflow_id, status=ExecutionStatus.RUNNING)
    assert first.status_code == again.status_code == 302
    assert first["Location"] == again["Location"] == detail_url(new_run)
    assert WorkflowExecution.objects.filter(workflow_id=run.workflow_id).count() == 2
    assert new_run.reset_base_run_id == run.run_id and new_run.reset_event_id == 4
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.details, entry.result) == (
        "reset",
        {"point": "4", "reapply_signals": True},
        str(new_run.run_id),
    )


def test_reset_to_an_event_that_is_no_reset_point_is_a_clear_error() -> None:
    namespace = NamespaceFactory(name="shop")
    run = with_completed_task(namespace)
    operator = signed_in(namespace, MemberRole.OPERATOR)
    response = operator.get(detail_url(run, "reset/"), {"point": "1"})
    assert response.status_code == 400 and b'class="error"' in response.content
    assert operator.get(detail_url(run, "reset/"), {"point": "soon"}).status_code == 400


def test_actions_enforce_csrf() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    operator = signed_in(namespace, MemberRole.OPERATOR, enforce_csrf_checks=True)
    refused = operator.post(detail_url(run, "terminate/"), {"request_id": "t1", "reason": "x"})
    assert refused.status_code == 403
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == ExecutionStatus.RUNNING

    page = operator.get(detail_url(run, "terminate/")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    form = {"request_id": "t1", "reason": "x", "csrfmiddlewaretoken": token.group(1)}
    assert operator.post(detail_url(run, "terminate/"), form).status_code == 302
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == ExecutionStatus.TERMINATED


def test_the_stylesheet_is_served_by_the_app(client: Client) -> None:
    response = client.get("/static/chronicle/ui.css")
    assert response.status_code == 200 and b"prefers-color-scheme: dark" in b"".join(
        response.streaming_content
    )
