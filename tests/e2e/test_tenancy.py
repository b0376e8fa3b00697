"""Namespace isolation, roles, authentication, rate limits and fairness."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import Api, ScriptedWorker, Stack, Tenant, command, wait_until


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


# (method, path template) for every endpoint; {wid} and {q} are filled per test.
ENDPOINTS = [
    ("POST", "/workflows"),
    ("GET", "/workflows"),
    ("GET", "/workflows/{wid}"),
    ("POST", "/workflows/{wid}/signal"),
    ("POST", "/workflows/{wid}/query"),
    ("POST", "/workflows/{wid}/cancel"),
    ("POST", "/workflows/{wid}/terminate"),
    ("GET", "/workflows/{wid}/history"),
    ("POST", "/signal-with-start"),
    ("POST", "/task-queues/{q}/workflow-tasks/poll"),
    ("POST", "/task-queues/{q}/workflow-tasks/complete"),
    ("POST", "/task-queues/{q}/workflow-tasks/fail"),
    ("POST", "/task-queues/{q}/activity-tasks/poll"),
    ("POST", "/task-queues/{q}/activity-tasks/complete"),
    ("POST", "/task-queues/{q}/activity-tasks/fail"),
    ("POST", "/task-queues/{q}/activity-tasks/heartbeat"),
    ("POST", "/task-queues/{q}/query-tasks/respond"),
]


# The fields each endpoint's body has: a body with fields it lacks is refused as such (400)
# whoever sends it, so each call here sends a body its endpoint takes, and the refusal seen
# is the one for the key.
_FIELDS = {
    "/workflows": ("workflow_id", "workflow_type", "task_queue"),
    "/workflows/{wid}/signal": ("signal_name",),
    "/workflows/{wid}/query": ("query_type",),
    "/signal-with-start": ("workflow_id", "workflow_type", "task_queue", "signal_name"),
    "/task-queues/{q}/workflow-tasks/poll": ("identity", "timeout"),
    "/task-queues/{q}/activity-tasks/poll": ("identity", "timeout"),
    "/task-queues/{q}/workflow-tasks/complete": ("task_token", "identity", "commands"),
    "/task-queues/{q}/workflow-tasks/fail": ("task_token", "identity"),
    "/task-queues/{q}/activity-tasks/complete": ("task_token", "identity"),
    "/task-queues/{q}/activity-tasks/fail": ("task_token", "identity"),
    "/task-queues/{q}/activity-tasks/heartbeat": ("task_token",),
    "/task-queues/{q}/query-tasks/respond": ("task_token",),
}


def _body(path: str, wid: str, q: str) -> dict[str, Any]:
    values = {
        "workflow_id": wid,
        "workflow_type": "T",
        "task_queue": q,
        "signal_name": "s",
        "query_type": "x",
        "task_token": "AAAA",
        "timeout": 0.2,
        "identity": "x",
        "commands": [],
    }
    return {name: values[name] for name in _FIELDS.get(path, ())}


@pytest.fixture(scope="module")
def victim(stack: Stack, make_tenant: Any) -> tuple[Tenant, str, str]:
    tenant = make_tenant()
    wid, q = _wid(), f"q-{uuid.uuid4().hex[:8]}"
    Api(stack, tenant).start(wid, q)
    return tenant, wid, q


@pytest.mark.parametrize(("method", "template"), ENDPOINTS, ids=[f"{m} {p}" for m, p in ENDPOINTS])
def test_other_namespaces_key_gets_404_everywhere(
    stack: Stack, make_tenant: Any, victim: Any, method: str, template: str
) -> None:
    b, wid, q = victim
    a = make_tenant()
    url = f"{stack.url}/api/v1/namespaces/{b.namespace}" + template.format(wid=wid, q=q)
    headers = {"Authorization": f"Bearer {a.keys['all']}"}
    if method == "GET":
        r = httpx.get(url, headers=headers, timeout=30)
    else:
        r = httpx.post(url, headers=headers, json=_body(template, wid, q), timeout=30)

    assert r.status_code == 404, r.text
    assert r.json()["code"] == "not_found"
    # B's run is untouched by A's attempts
    assert Api(stack, b).describe(wid)["status"] == "Running"


WORKER_FORBIDDEN = [
    ("POST", "/workflows"),
    ("POST", "/workflows/{wid}/terminate"),
    ("POST", "/workflows/{wid}/signal"),
]
CLIENT_FORBIDDEN = [
    ("POST", "/task-queues/{q}/workflow-tasks/poll"),
    ("POST", "/task-queues/{q}/activity-tasks/poll"),
    ("POST", "/task-queues/{q}/workflow-tasks/complete"),
    ("POST", "/task-queues/{q}/activity-tasks/complete"),
]


@pytest.mark.parametrize(
    ("role", "template"),
    [("worker", p) for _, p in WORKER_FORBIDDEN] + [("client", p) for _, p in CLIENT_FORBIDDEN],
)
def test_wrong_role_gets_403(stack: Stack, victim: Any, role: str, template: str) -> None:
    b, wid, q = victim
    api = Api(stack, b, key=role)
    r = api.post(
        template.format(wid=wid, q=q), _body(template, _wid() if template == "/workflows" else wid, q)
    )

    assert r.status_code == 403, r.text
    assert r.json()["code"] == "permission_denied"
    described = Api(stack, b).describe(wid)
    assert described["status"] == "Running"
    assert "WorkflowExecutionSignaled" not in Api(stack, b).event_types(wid)


@pytest.mark.parametrize("header", [None, "Bearer garbage-key", "Bearer", "Basic Zm9vOmJhcg==", "garbage"])
def test_missing_or_garbage_key_gets_401(stack: Stack, victim: Any, header: str | None) -> None:
    b, wid, q = victim
    headers = {"Authorization": header} if header is not None else {}
    base = f"{stack.url}/api/v1/namespaces/{b.namespace}"
    r1 = httpx.get(f"{base}/workflows/{wid}", headers=headers, timeout=10)
    r2 = httpx.post(
        f"{base}/task-queues/{q}/workflow-tasks/poll", headers=headers, json={"timeout": 0.2}, timeout=10
    )
    for r in (r1, r2):
        assert r.status_code == 401, r.text
        assert r.json()["code"] == "unauthenticated"


def test_rate_limit_gives_429_with_retry_after(stack: Stack, make_tenant: Any) -> None:
    tenant = make_tenant(request_rps=2, request_burst_ratio=1)
    api = Api(stack, tenant)
    responses = [api.get("/workflows") for _ in range(10)]
    limited = [r for r in responses if r.status_code == 429]

    assert limited, [r.status_code for r in responses]
    assert all(r.status_code in (200, 429) for r in responses)
    r = limited[0]
    assert r.json()["code"] == "resource_exhausted"
    assert float(r.headers["Retry-After"]) > 0
    # another namespace is not limited by A's exhaustion
    other = Api(stack, make_tenant())
    assert other.get("/workflows").status_code == 200
    # and A recovers after waiting
    wait_until(lambda: api.get("/workflows").status_code == 200, timeout=5, interval=0.6)


def test_busy_namespace_does_not_starve_another(stack: Stack, make_tenant: Any) -> None:
    a, b = make_tenant(), make_tenant()
    api_a, api_b = Api(stack, a), Api(stack, b)
    qa, qb = f"qa-{uuid.uuid4().hex[:6]}", f"qb-{uuid.uuid4().hex[:6]}"
    wa = ScriptedWorker(api_a, qa)
    for _ in range(10):
        api_a.start(_wid(), qa)

    def flood() -> None:
        w = ScriptedWorker(Api(stack, a), qa)
        for _ in range(1):
            task = w.poll_workflow_task()
            cmds = [
                command(
                    "ScheduleActivityTask",
                    activity_id=f"a{i}",
                    activity_type="Bulk",
                    start_to_close_timeout=60,
                )
                for i in range(1000)
            ]
            r = w.complete_workflow_task(task, *cmds)
            assert r.status_code == 200, r.text

    threads = [threading.Thread(target=flood) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # A has 10,000 activity tasks backlogged on its queue
    assert wa.api.post(f"/task-queues/{qa}/activity-tasks/poll", {"timeout": 2}).status_code == 200

    started = time.monotonic()
    wid = _wid()
    wb = ScriptedWorker(api_b, qb)
    api_b.start(wid, qb)
    wb.complete_workflow_task(
        wb.poll_workflow_task(timeout=5),
        command("ScheduleActivityTask", activity_id="only", activity_type="One", start_to_close_timeout=10),
    )
    act = wb.poll_activity_task(timeout=5)
    assert wb.activity("complete", act, result="ok").status_code == 200
    wb.complete_workflow_task(
        wb.poll_workflow_task(timeout=5), command("CompleteWorkflowExecution", result="b")
    )
    elapsed = time.monotonic() - started

    assert api_b.describe(wid)["status"] == "Completed"
    assert elapsed < 5, elapsed


def test_a_worker_of_another_namespace_cannot_move_a_run_with_its_leaked_tokens(
    stack: Stack, make_tenant: Any
) -> None:
    """A's worker holds B's genuine tokens (a leaked log line) and tries them on A's URLs:
    every call is refused as an unknown task and B's run does not move; B's own worker
    then finishes the run with the same tokens."""
    a, b = make_tenant(), make_tenant()
    b_api, wid, q = Api(stack, b), _wid(), f"q-{uuid.uuid4().hex[:8]}"
    b_worker, thief = (
        ScriptedWorker(b_api, q, "b-worker"),
        ScriptedWorker(Api(stack, a, "worker"), q, "a-worker"),
    )
    b_api.start(wid, q)

    def refused(r: httpx.Response) -> None:
        assert (r.status_code, r.json()) == (404, {"code": "not_found", "message": "task not found"}), r.text

    wft = b_worker.poll_workflow_task()
    before = b_api.events(wid)
    refused(thief.complete_workflow_task(wft, command("CompleteWorkflowExecution", result="stolen")))
    refused(
        thief.api.post(
            f"/task-queues/{q}/workflow-tasks/fail", {"task_token": wft["task_token"], "cause": "x"}
        )
    )
    assert b_api.events(wid) == before
    schedule = command(
        "ScheduleActivityTask", activity_id="a1", activity_type="Charge", start_to_close_timeout=30
    )
    assert b_worker.complete_workflow_task(wft, schedule).status_code == 200

    act = b_worker.poll_activity_task()
    before = b_api.events(wid)
    refused(thief.activity("complete", act, result="stolen"))
    refused(thief.activity("fail", act, failure={"message": "stolen", "non_retryable": True}))
    refused(thief.activity("heartbeat", act, details="stolen"))
    assert b_api.events(wid) == before
    assert b_api.describe(wid)["status"] == "Running"

    assert b_worker.activity("complete", act, result="charged").status_code == 200
    final = b_worker.poll_workflow_task()
    assert (
        b_worker.complete_workflow_task(
            final, command("CompleteWorkflowExecution", result="done")
        ).status_code
        == 200
    )
    events = b_api.events(wid)
    assert [e["attributes"].get("result") for e in events if e["event_type"] == "ActivityTaskCompleted"] == [
        "charged"
    ]
    assert events[-1]["event_type"] == "WorkflowExecutionCompleted"
    assert "stolen" not in str(events)
