"""Request bodies built to break a write get a 400 at decode and change nothing.

``NaN``, ``Infinity`` and numbers that overflow to infinity are not JSON: PostgreSQL's
JSONB refuses them, so a body holding one used to pass every check and fail the write
with a 500. Durations past what a datetime holds did the same at the kernel's date
arithmetic. Each is sent to every kind of route that reads a body (the lean lane's
client and worker calls, the batch of worker calls, the long-poll, DRF views), through
the frontend's ASGI application as a server sends it.

A worker's ``worker_version_stamp`` is checked with the rest of the body, before the
task token: an empty stamp is no stamp (Temporal's reading), a malformed one a field error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from history.models import HistoryEvent, Schedule, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "q"
NOT_JSON = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]
START = '{"workflow_id": "w-new", "workflow_type": "T", "task_queue": "q", %s}'
# (path under the namespace, body with the bad literal as @)
BODIES = [
    ("workflows", START % '"input": [@]'),
    ("workflows", START % '"memo": {"a": @}'),
    ("workflows/running/signal", '{"signal_name": "s", "input": [@]}'),
    ("signal-with-start", START % '"signal_name": "s", "signal_input": [@]'),
    ("workflows/running/terminate", '{"reason": "r", "details": @}'),
    ("workflows/running/query", '{"query_type": "q", "args": [@]}'),
    ("batch-operations", '{"operation": "signal", "query": "", "reason": "r", "signal_input": [@]}'),
    (f"task-queues/{QUEUE}/workflow-tasks/complete", '{"task_token": "t", "commands": [{"a": @}]}'),
    (f"task-queues/{QUEUE}/activity-tasks/complete", '{"task_token": "t", "result": @}'),
    (f"task-queues/{QUEUE}/activity-tasks/heartbeat", '{"task_token": "t", "details": [@]}'),
    (f"task-queues/{QUEUE}/workflow-tasks/poll", '{"timeout": @}'),
    (f"task-queues/{QUEUE}/activity-tasks/poll", '{"timeout": @}'),
]


class Tenant:
    def __init__(self) -> None:
        self.namespace: Namespace = NamespaceFactory()
        self.authorization = ApiKeyFactory(namespace=self.namespace).authorization
        self.run = ExecutionFactory(namespace=self.namespace, workflow_id="running", task_queue=QUEUE)

    def post(self, path: str, body: str | bytes) -> AsgiResponse:
        url = f"/api/v1/namespaces/{self.namespace.name}/{path}"
        return asgi_request("POST", url, body, authorization=self.authorization)

    def state(self) -> tuple[int, int]:
        runs = WorkflowExecution.objects.filter(namespace=self.namespace)
        return runs.count(), HistoryEvent.objects.filter(run__namespace=self.namespace).count()


@pytest.fixture
def tenant() -> Tenant:
    return Tenant()


@pytest.mark.parametrize("literal", NOT_JSON)
def test_a_number_json_cannot_hold_is_refused_at_decode_on_every_route(tenant: Tenant, literal: str) -> None:
    before = tenant.state()
    for path, body in BODIES:
        answer = tenant.post(path, body.replace("@", literal))
        assert answer.status_code == 400, (path, answer.status_code, answer.content[:300])
        assert answer.json()["code"] == "malformed_request", (path, answer.content[:300])
    assert tenant.state() == before


def test_each_call_of_a_worker_batch_is_refused_alone(tenant: Tenant) -> None:
    calls = [{"kind": "activity-tasks/heartbeat", "body": {"task_token": "t", "details": [1]}}]
    raw = json.dumps({"responses": calls}).replace("[1]", "[NaN]")
    answer = tenant.post(f"task-queues/{QUEUE}/responses", raw)
    assert answer.status_code in (200, 400), answer.content[:300]
    if answer.status_code == 200:  # the envelope held: the call itself was refused
        (refused,) = answer.json()["responses"]
        assert refused["status"] == 400 and refused["body"]["code"] == "malformed_request"


DURATIONS: list[tuple[str, Any]] = [
    ("execution_timeout", 1e300),
    ("execution_timeout", "inf"),
    ("run_timeout", "Infinity"),
    ("task_timeout", 1e300),
    ("start_delay", 1e300),
    ("execution_timeout", "NaN"),
]


@pytest.mark.parametrize(("field", "value"), DURATIONS)
def test_a_duration_past_a_hundred_years_is_a_field_error(tenant: Tenant, field: str, value: Any) -> None:
    before = tenant.state()
    body = {"workflow_id": "w-new", "workflow_type": "T", "task_queue": QUEUE, field: value}
    answer = tenant.post("workflows", json.dumps(body))
    assert answer.status_code == 400, answer.content[:300]
    assert list(answer.json()["details"]["fields"]) == [field]
    assert tenant.state() == before


BAD_STAMPS: list[Any] = [
    "",
    [],
    {"use_versioning": True},
    {"build_id": "", "use_versioning": True},
    {"build_id": "   ", "use_versioning": True},
    {"build_id": 5},
]


@pytest.mark.parametrize("stamp", BAD_STAMPS)
def test_a_malformed_version_stamp_is_a_field_error_before_the_token_is_read(
    tenant: Tenant, stamp: Any
) -> None:
    for path in ("workflow-tasks/complete", "activity-tasks/complete"):
        body = {"task_token": "not a token", "worker_version_stamp": stamp, "return_new_workflow_task": True}
        answer = tenant.post(f"task-queues/{QUEUE}/{path}", json.dumps(body))
        assert answer.status_code == 400, answer.content[:300]
        assert list(answer.json()["details"]["fields"]) == ["worker_version_stamp"], answer.content


@pytest.mark.parametrize("stamp", [{}, {"build_id": ""}, {"build_id": "  "}, None])
def test_an_empty_version_stamp_is_no_stamp(tenant: Tenant, stamp: Any) -> None:
    task = poll_once(tenant.namespace, QUEUE, "workflow", "worker")
    assert task is not None
    body = {"task_token": task["task_token"], "commands": [], "worker_version_stamp": stamp}
    answer = tenant.post(f"task-queues/{QUEUE}/workflow-tasks/complete", json.dumps(body))
    assert answer.status_code == 200, answer.content[:300]
    completed = HistoryEvent.objects.get(run=tenant.run, event_type="WorkflowTaskCompleted")
    assert not completed.attributes.get("worker_version", {}).get("build_id")


SCHEDULE_ACTION = {"workflow_type": "T", "workflow_id": "r", "task_queue": QUEUE}
SCHEDULE_DURATIONS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"intervals": [{"every": "inf"}]}, {}),
    ({"intervals": [{"every": 1e300}]}, {}),
    ({"intervals": [{"every": "nan"}]}, {}),
    ({"intervals": [{"every": 3600, "offset": "Infinity"}]}, {}),
    ({"intervals": [{"every": 3600}], "jitter": 1e300}, {}),
    ({"intervals": [{"every": 3600}]}, {"execution_timeout": "inf"}),
    ({"intervals": [{"every": 3600}]}, {"task_timeout": 1e300}),
]


@pytest.mark.parametrize(("spec", "action"), SCHEDULE_DURATIONS)
def test_a_schedule_duration_that_is_not_finite_or_past_a_hundred_years_is_refused(
    tenant: Tenant, spec: dict[str, Any], action: dict[str, Any]
) -> None:
    body = {"schedule_id": "s", "schedule": {"spec": spec, "action": {**SCHEDULE_ACTION, **action}}}
    answer = tenant.post("schedules", json.dumps(body))
    assert answer.status_code == 400, answer.content[:300]
    assert not Schedule.objects.filter(namespace=tenant.namespace).exists()


@pytest.mark.parametrize("policy", [{"initial_interval": "inf"}, {"maximum_interval": 1e300}])
def test_a_retry_policy_past_a_hundred_years_is_refused_at_start(
    tenant: Tenant, policy: dict[str, Any]
) -> None:
    before = tenant.state()
    body = {"workflow_id": "w-new", "workflow_type": "T", "task_queue": QUEUE, "retry_policy": policy}
    answer = tenant.post("workflows", json.dumps(body))
    assert answer.status_code == 400, answer.content[:300]
    assert "finite" in answer.json()["message"]
    assert tenant.state() == before
