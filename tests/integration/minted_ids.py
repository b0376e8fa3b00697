"""Shared by the minted-id tenancy tests: three namespaces and everything B has minted.

A and C each have a run of the same workflow id as B's (so a foreign run id meets a
workflow that exists under the URL's namespace), nothing else of B's. B has two runs of
that workflow's namespace, a stored payload, two schedules, a running batch job, a saved
view, audit entries and an API key. ``snapshot`` reads every row of B those tests could
touch, so a test can show a refused call left B exactly as it was.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Q
from django.test import Client

from chronicle.asgi import LANE_ROUTES
from executions import audit, batch
from executions.models import AuditAction, AuditEntry, BatchJob, SavedView
from history import kernel
from history.models import (
    HistoryEvent,
    Payload,
    Schedule,
    TimerTask,
    WorkflowExecution,
    WorkflowQuery,
    WorkflowUpdate,
)
from matching.dispatch import poll_once
from namespaces.models import ApiKey, MemberRole, Membership, Namespace
from namespaces.services import api_key_issue
from tests.asgi_client import asgi_request
from tests.factories import ExecutionFactory, NamespaceFactory, UserFactory, scope_of

WID = "order-1"
SID = "nightly"
JOB = "cleanup"
QUEUE = "q"
BIG_INPUT = {"metadata": {"encoding": "json/plain"}, "data": "x" * 5000}  # offloaded: > 2 KiB


@dataclass
class World:
    a: Namespace
    b: Namespace
    c: Namespace
    keys: dict[str, str]  # namespace label -> raw key with every role
    run_b: WorkflowExecution
    digest_b: str
    view_b: SavedView
    key_b: ApiKey
    user: User  # admin of A, B and C: B's ids must fail under A however much it may see

    def api(self, label: str) -> Client:
        return Client(HTTP_AUTHORIZATION=f"Bearer {self.keys[label]}")

    def ns(self, label: str) -> Namespace:
        return {"a": self.a, "b": self.b, "c": self.c}[label]

    def session(self) -> Client:
        client = Client()
        client.force_login(self.user)
        return client


def _run_with_completed_task(namespace: Namespace, **start: Any) -> WorkflowExecution:
    """A running run whose first workflow task completed (so it has a reset point)."""
    run = ExecutionFactory(namespace=namespace, workflow_id=WID, task_queue=QUEUE, **start)
    task = poll_once(namespace, QUEUE, "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(scope=scope_of(task), task_token=task["task_token"], commands=[])
    return WorkflowExecution.objects.get(run_id=run.run_id)


def schedule_definition(**state: Any) -> kernel.ScheduleDefinition:
    return kernel.ScheduleDefinition(
        spec={"intervals": [{"every": 3600}]},
        action={"workflow_type": "Report", "workflow_id": "report", "task_queue": "reports"},
        **state,
    )


def build_world() -> World:
    a, b, c = NamespaceFactory.create(), NamespaceFactory.create(), NamespaceFactory.create()
    keys = {}
    for label, namespace in (("a", a), ("b", b), ("c", c)):
        keys[label] = api_key_issue(namespace=namespace, name="all", roles=["client", "worker", "admin"])[1]
        ExecutionFactory(namespace=namespace, workflow_id=f"other-{label}", task_queue="elsewhere")
    for namespace in (a, c):
        _run_with_completed_task(namespace)
    run_b = _run_with_completed_task(b, input=[BIG_INPUT])
    payload = Payload.objects.filter(namespace=b).first()
    assert payload is not None, "the big input was not offloaded"
    kernel.create_schedule(b, SID, schedule_definition())
    kernel.create_schedule(b, SID + "-2", schedule_definition(paused=True))
    batch.create_job(
        b, operation="terminate", query="WorkflowId = 'nobody'", reason="r", params={}, rps=5, job_id=JOB
    )
    user: User = UserFactory.create()
    for namespace in (a, b, c):
        Membership.objects.create(user=user, namespace=namespace, role=MemberRole.ADMIN)
    view_b = SavedView.objects.create(namespace=b, owner=user, name="mine", query="", shared=True)
    key_b = api_key_issue(namespace=b, name="spare", roles=["client"])[0]
    for n in range(3):
        audit.record(b, actor="someone", action=AuditAction.QUERY, request_id=f"b-{n}", workflow_id=WID)
    return World(a, b, c, keys, run_b, payload.digest, view_b, key_b, user)


def snapshot(namespace: Namespace) -> dict[str, Any]:
    """Every row of ``namespace`` a refused call could have changed, in a comparable form."""
    runs = WorkflowExecution.objects.filter(namespace=namespace)
    return {
        "runs": sorted(
            (str(r.run_id), r.status, r.next_event_id, str(r.reset_run_id)) for r in runs.order_by()
        ),
        "events": HistoryEvent.objects.filter(run__namespace=namespace).count(),
        "queries": WorkflowQuery.objects.filter(run__namespace=namespace).count(),
        "updates": WorkflowUpdate.objects.filter(run__namespace=namespace).count(),
        "timers": TimerTask.objects.filter(
            Q(run__namespace=namespace) | Q(schedule__namespace=namespace)
        ).count(),
        "schedules": sorted(
            (s.schedule_id, s.paused, s.note, s.num_actions, s.conflict_token, json.dumps(s.spec))
            for s in Schedule.objects.filter(namespace=namespace)
        ),
        "jobs": sorted((j.job_id, j.state, j.rps) for j in BatchJob.objects.filter(namespace=namespace)),
        "payloads": Payload.objects.filter(namespace=namespace).count(),
        "audit": AuditEntry.objects.filter(namespace=namespace).count(),
        "views": SavedView.objects.filter(namespace=namespace).count(),
        "keys": sorted((k.pk, str(k.revoked_at)) for k in ApiKey.objects.filter(namespace=namespace)),
    }


def answer(client: Client, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """A REST call's status and JSON body (a lean-lane call through the ASGI application,
    which Django's test client cannot reach: the test's rows must be committed)."""
    data = json.dumps(body or {})
    path, _, query = url.partition("?")
    if any(route.match(method, path) for route in LANE_ROUTES):
        reply = asgi_request(
            method, path, data, authorization=client.defaults["HTTP_AUTHORIZATION"], query=query
        )
        return reply.status_code, reply.json()
    if method == "GET":
        response = client.get(url)
    elif method == "DELETE":
        response = client.delete(url)
    elif method == "PATCH":
        response = client.patch(url, data=data, content_type="application/json")
    else:
        response = client.post(url, data=data, content_type="application/json")
    return response.status_code, response.json()


_VOLATILE = re.compile(
    r'name="csrfmiddlewaretoken" value="[^"]*"'
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(-d\d+)?"
)


def page(client: Client, method: str, url: str, data: dict[str, str] | None = None) -> tuple[int, str]:
    """A UI page's status and body, with what differs on every render (the CSRF token and
    the fresh request ids of its forms) masked, so two answers can be compared whole."""
    response = client.post(url, data or {}) if method == "POST" else client.get(url, data or {})
    body = b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[attr-defined]
    return response.status_code, _VOLATILE.sub("<volatile>", body.decode())
