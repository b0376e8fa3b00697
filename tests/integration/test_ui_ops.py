"""Schedules, task-queue and audit-log pages through Django's test client on real PostgreSQL."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from executions.models import AuditAction, AuditEntry
from history import kernel
from history.models import ExecutionStatus, Schedule, Task, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import MemberRole, Namespace, TaskQueueLimit
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory

pytestmark = pytest.mark.django_db


def signed_in(namespace: Namespace, role: str) -> Client:
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=role).user)
    return client


def make_schedule(namespace: Namespace, schedule_id: str = "nightly", **spec: Any) -> Schedule:
    definition = kernel.ScheduleDefinition(
        spec=spec or {"cron_expressions": ["0 9 * * 1-5"]},
        action={"workflow_type": "Report", "workflow_id": "report", "task_queue": "reports"},
        policy={"overlap": "ALLOW_ALL", "catchup_window": 3600},
    )
    return kernel.create_schedule(namespace, schedule_id, definition)


def schedule_url(namespace: Namespace, schedule_id: str, action: str = "") -> str:
    return f"/ns/{namespace.name}/schedules/{schedule_id}/" + (f"-/{action}/" if action else "")


def entries(namespace: Namespace, action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(namespace=namespace, action=action))


# ---------------------------------------------------------------- schedules


def test_schedule_list_and_page_say_the_spec_in_words_with_recent_and_upcoming_actions() -> None:
    ns = NamespaceFactory(name="ops")
    make_schedule(ns)
    kernel.trigger_schedule(ns, "nightly")
    viewer = signed_in(ns, MemberRole.VIEWER)

    listing = viewer.get("/ns/ops/schedules/").content.decode()
    assert "At 09:00 on Monday to Friday" in listing and 'href="/ns/ops/schedules/nightly/"' in listing
    started = WorkflowExecution.objects.get(namespace=ns)
    assert f"/runs/{started.run_id}/" in listing and "Running" in listing

    page = viewer.get("/ns/ops/schedules/nightly/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "At 09:00 on Monday to Friday" in body and "Times in UTC" in body
    assert "ALLOW_ALL" in body and "1 hour" in body  # overlap policy and catch-up window
    assert f"/runs/{started.run_id}/" in body
    upcoming = re.findall(r"<li><time datetime=\"([^\"]+)\"", body)
    assert len(upcoming) == 10 and all("T09:00:00" in t for t in upcoming)
    assert "Actions need the operator role" in body and "-/pause/" not in body


def test_viewer_cannot_open_or_post_schedule_actions() -> None:
    ns = NamespaceFactory()
    make_schedule(ns)
    viewer = signed_in(ns, MemberRole.VIEWER)
    for action in ("pause", "unpause", "trigger", "backfill", "delete"):
        assert viewer.get(schedule_url(ns, "nightly", action)).status_code == 403
        assert viewer.post(schedule_url(ns, "nightly", action), {"reason": "x"}).status_code == 403
    assert Schedule.objects.get(namespace=ns).paused is False
    assert not AuditEntry.objects.filter(namespace=ns).exists()


def test_pause_and_unpause_with_a_note_are_audited_old_to_new() -> None:
    ns = NamespaceFactory()
    make_schedule(ns)
    operator = signed_in(ns, MemberRole.OPERATOR)
    form = operator.get(schedule_url(ns, "nightly", "pause")).content.decode()
    assert "Pause schedule</button>" in form and 'name="reason"' in form

    response = operator.post(
        schedule_url(ns, "nightly", "pause"),
        {"reason": "db migration", "note": "back at 10", "request_id": "p1"},
    )
    assert response.status_code == 302 and response["Location"] == schedule_url(ns, "nightly")
    schedule = Schedule.objects.get(namespace=ns)
    assert schedule.paused and schedule.note == "back at 10"
    (entry,) = entries(ns, AuditAction.SCHEDULE_PAUSE)
    assert entry.target == "nightly" and entry.reason == "db migration"
    assert entry.old == {"paused": False, "note": ""} and entry.new == {"paused": True, "note": "back at 10"}
    assert "Paused:</strong> back at 10" in operator.get(schedule_url(ns, "nightly")).content.decode()

    operator.post(schedule_url(ns, "nightly", "unpause"), {"reason": "done", "request_id": "u1"})
    assert not Schedule.objects.get(namespace=ns).paused
    (unpaused,) = entries(ns, AuditAction.SCHEDULE_UNPAUSE)
    assert unpaused.new == {"paused": False, "note": "done"}


def test_a_reason_is_required_and_a_resubmitted_form_acts_once() -> None:
    ns = NamespaceFactory()
    make_schedule(ns)
    operator = signed_in(ns, MemberRole.OPERATOR)
    refused = operator.post(schedule_url(ns, "nightly", "trigger"), {"reason": "", "request_id": "t1"})
    assert refused.status_code == 400 and b"a reason is required" in refused.content
    assert not WorkflowExecution.objects.filter(namespace=ns).exists()

    for _ in range(2):
        done = operator.post(schedule_url(ns, "nightly", "trigger"), {"reason": "rerun", "request_id": "t1"})
        assert done.status_code == 302
    assert WorkflowExecution.objects.filter(namespace=ns).count() == 1
    (entry,) = entries(ns, AuditAction.SCHEDULE_TRIGGER)
    assert entry.result == "1 workflow started" and len(entry.details["started"]) == 1


def test_trigger_with_an_overlap_override_skips_while_a_run_is_open() -> None:
    ns = NamespaceFactory()
    make_schedule(ns)
    operator = signed_in(ns, MemberRole.OPERATOR)
    operator.post(schedule_url(ns, "nightly", "trigger"), {"reason": "first", "request_id": "a"})
    operator.post(
        schedule_url(ns, "nightly", "trigger"), {"reason": "again", "overlap": "SKIP", "request_id": "b"}
    )
    assert WorkflowExecution.objects.filter(namespace=ns).count() == 1
    skipped = AuditEntry.objects.get(namespace=ns, request_id="b")
    assert skipped.details["overlap"] == "SKIP" and skipped.result.startswith("no workflow started")

    bad = operator.post(schedule_url(ns, "nightly", "trigger"), {"reason": "x", "overlap": "NOPE"})
    assert bad.status_code == 400 and b"unknown overlap policy" in bad.content


def test_backfill_starts_one_run_per_spec_time_in_the_range() -> None:
    ns = NamespaceFactory()
    make_schedule(ns, intervals=[{"every": 3600}])
    operator = signed_in(ns, MemberRole.OPERATOR)
    form = {
        "reason": "outage",
        "start_at": "2026-11-01T00:00",
        "end_at": "2026-11-01T03:00",
        "request_id": "bf",
    }
    assert operator.post(schedule_url(ns, "nightly", "backfill"), form).status_code == 302
    ids = sorted(WorkflowExecution.objects.filter(namespace=ns).values_list("workflow_id", flat=True))
    assert ids == [f"report-2026-11-01T0{h}:00:00Z" for h in range(3)]
    (entry,) = entries(ns, AuditAction.SCHEDULE_BACKFILL)
    assert entry.details["start_at"] == "2026-11-01T00:00:00+00:00" and entry.result == "3 workflows started"

    bad = operator.post(
        schedule_url(ns, "nightly", "backfill"), {**form, "end_at": "yesterday", "request_id": "x"}
    )
    assert bad.status_code == 400 and WorkflowExecution.objects.filter(namespace=ns).count() == 3


def test_delete_removes_the_schedule_keeps_its_runs_and_audits_the_definition() -> None:
    ns = NamespaceFactory()
    make_schedule(ns)
    kernel.trigger_schedule(ns, "nightly")
    admin = signed_in(ns, MemberRole.ADMIN)
    for _ in range(2):
        response = admin.post(schedule_url(ns, "nightly", "delete"), {"reason": "retired", "request_id": "d"})
        assert response.status_code == 302 and response["Location"] == f"/ns/{ns.name}/schedules/"
    assert not Schedule.objects.filter(namespace=ns).exists()
    assert WorkflowExecution.objects.get(namespace=ns).status == ExecutionStatus.RUNNING
    (entry,) = entries(ns, AuditAction.SCHEDULE_DELETE)
    assert entry.old["spec"] == {"cron_expressions": ["0 9 * * 1-5"]} and entry.new is None
    assert admin.get(schedule_url(ns, "nightly")).status_code == 404


def test_schedules_of_another_namespace_are_404() -> None:
    other = NamespaceFactory(name="other")
    make_schedule(other)
    outsider = signed_in(NamespaceFactory(name="own"), MemberRole.ADMIN)
    assert outsider.get("/ns/other/schedules/").status_code == 404
    assert outsider.get("/ns/other/schedules/nightly/").status_code == 404
    assert outsider.post("/ns/other/schedules/nightly/-/delete/", {"reason": "x"}).status_code == 404
    assert outsider.get("/ns/own/schedules/nightly/").status_code == 404
    assert outsider.post("/ns/own/schedules/nightly/-/pause/", {"reason": "x"}).status_code == 404
    assert not Schedule.objects.get(namespace=other).paused


# ---------------------------------------------------------------- task queues


def test_task_queue_pages_show_pollers_backlog_health_and_limits() -> None:
    ns = NamespaceFactory(name="tq", dispatch_rps=50)
    TaskQueueLimit.objects.create(namespace=ns, task_queue="orders", dispatch_rps=5)
    ExecutionFactory(namespace=ns, task_queue="orders")
    ExecutionFactory(namespace=ns, task_queue="orders")
    assert poll_once(ns, "orders", "workflow", "worker-1@host") is not None
    # The other task has waited a minute: the queue is backlogged.
    Task.objects.filter(namespace=ns, task_queue="orders").update(
        visible_at=timezone.now() - timedelta(minutes=1)
    )
    ExecutionFactory(namespace=ns, task_queue="idle-q")
    viewer = signed_in(ns, MemberRole.VIEWER)

    listing = viewer.get("/ns/tq/task-queues/").content.decode()
    assert 'href="/ns/tq/task-queues/orders/"' in listing and 'href="/ns/tq/task-queues/idle-q/"' in listing
    assert "Backlogged" in listing and "No pollers" in listing

    page = viewer.get("/ns/tq/task-queues/orders/").content.decode()
    assert "worker-1@host" in page and "Backlogged" in page
    backlog = re.search(r'<tr id="backlog-workflow">(.*?)</tr>', page, re.S)
    assert backlog is not None and "<td>1</td>" in backlog.group(1)
    effective = re.search(r'id="effective-dispatch-rps">(.*?)</dd>', page, re.S)
    assert effective is not None and "5 tasks per second" in effective.group(1)
    assert "task queue limit" in effective.group(1)


def test_a_queue_without_its_own_limit_shows_the_namespace_limit_in_force() -> None:
    ns = NamespaceFactory(name="tq2", dispatch_rps=20)
    page = signed_in(ns, MemberRole.VIEWER).get("/ns/tq2/task-queues/empty/").content.decode()
    effective = re.search(r'id="effective-dispatch-rps">(.*?)</dd>', page, re.S)
    assert effective is not None and "20 tasks per second" in effective.group(1)
    assert "namespace limit" in effective.group(1) and "Idle" in page


def test_task_queues_of_another_namespace_are_404() -> None:
    other = NamespaceFactory(name="other")
    ExecutionFactory(namespace=other, task_queue="secret-q")
    outsider = signed_in(NamespaceFactory(name="own"), MemberRole.ADMIN)
    assert outsider.get("/ns/other/task-queues/").status_code == 404
    assert outsider.get("/ns/other/task-queues/secret-q/").status_code == 404
    assert "secret-q" not in outsider.get("/ns/own/task-queues/").content.decode()


# ---------------------------------------------------------------- audit log


def test_audit_log_filters_links_and_pages_by_keyset() -> None:
    ns = NamespaceFactory(name="au")
    run = ExecutionFactory(namespace=ns, workflow_id="order-9")
    make_schedule(ns)
    operator = signed_in(ns, MemberRole.OPERATOR)
    operator.post(
        f"/ns/au/workflows/order-9/runs/{run.run_id}/terminate/", {"reason": "stuck", "request_id": "term"}
    )
    for n in range(55):
        operator.post(schedule_url(ns, "nightly", "pause"), {"reason": f"pause {n}", "request_id": f"p{n}"})
    viewer = signed_in(ns, MemberRole.VIEWER)

    first = viewer.get("/ns/au/audit/").content.decode()
    assert first.count('<tr id="audit-') == 50 and "pause 54" in first and "stuck" not in first
    assert 'href="/ns/au/schedules/nightly/"' in first and "old → new" in first
    next_link = re.search(r'href="\?([^"]+)" rel="next"', first)
    assert next_link is not None
    second = viewer.get("/ns/au/audit/?" + next_link.group(1).replace("&amp;", "&")).content.decode()
    assert second.count('<tr id="audit-') == 6 and "stuck" in second and 'rel="next"' not in second
    assert f"/ns/au/workflows/order-9/runs/{run.run_id}/" in second

    by_workflow = viewer.get("/ns/au/audit/", {"workflow_id": "order-9"}).content.decode()
    assert by_workflow.count('<tr id="audit-') == 1 and "stuck" in by_workflow
    by_action = viewer.get("/ns/au/audit/", {"action": "terminate"}).content.decode()
    assert by_action.count('<tr id="audit-') == 1
    actor = AuditEntry.objects.filter(namespace=ns).first()
    assert actor is not None
    by_actor = viewer.get("/ns/au/audit/", {"actor": actor.actor}).content.decode()
    assert by_actor.count('<tr id="audit-') == 50
    assert viewer.get("/ns/au/audit/", {"actor": "nobody"}).content.decode().count('<tr id="audit-') == 0


def test_audit_log_of_another_namespace_is_404_and_nav_links_every_section() -> None:
    other = NamespaceFactory(name="other")
    member = signed_in(NamespaceFactory(name="own"), MemberRole.VIEWER)
    assert member.get("/ns/other/audit/").status_code == 404
    page = member.get("/ns/own/audit/").content.decode()
    for href in ("/ns/own/", "/ns/own/schedules/", "/ns/own/task-queues/", "/ns/own/audit/"):
        assert f'href="{href}"' in page
    assert other.name not in page
