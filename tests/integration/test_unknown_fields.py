"""A body field the request does not have is refused on every route, and the schema says so.

A misspelt option silently dropped runs the call without it (``execution_timout`` starts a
run with no timeout, ``identty`` polls anonymously), so the API's one rule, on the lean
lane and the DRF views alike, is the provisioning API's: a field the request's schema does
not list is a 400 ``invalid_argument`` naming it (``details.fields``), nothing applied; and
every object of a request body in the served schema says ``additionalProperties: false``.
Query strings are not bodies: an unknown query parameter stays ignored, as in DRF.

The operations come from the served schema (``tests.integration.security_matrix``), so a
new endpoint is checked without being listed here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chronicle.errors import UNKNOWN_FIELD
from history.models import HistoryEvent, Schedule, Task, WorkflowExecution
from namespaces.models import Namespace, Role
from namespaces.operator_keys import operator_key_issue
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory, UserFactory
from tests.integration.security_matrix import (
    NAMED,
    Operation,
    example_body,
    operations,
    required_role,
    resolve,
    served_schema,
)

pytestmark = pytest.mark.django_db(transaction=True)

MISSPELT = "identty"


class Caller:
    """One namespace, a key with every namespace role and an operator key."""

    def __init__(self) -> None:
        self.namespace: Namespace = NamespaceFactory()
        roles = [Role.CLIENT, Role.WORKER, Role.ADMIN]
        self.key = ApiKeyFactory(namespace=self.namespace, roles=roles).authorization
        _, raw = operator_key_issue(username=UserFactory(is_superuser=True).username, name="ops")
        self.operator = f"Bearer {raw}"

    def send(self, op: Operation, body: Any) -> AsgiResponse:
        values = {name: NAMED.get(name, "p") for name in op.parameters} | {"namespace": self.namespace.name}
        key = self.operator if required_role(op) == "operator" else self.key
        return asgi_request(op.method, op.url(values), json.dumps(body), authorization=key)

    def post(self, path: str, body: dict[str, Any]) -> AsgiResponse:
        url = f"/api/v1/namespaces/{self.namespace.name}/{path}"
        return asgi_request("POST", url, json.dumps(body), authorization=self.key)

    def state(self) -> tuple[int, int, int, int]:
        ns = self.namespace
        return (
            WorkflowExecution.objects.filter(namespace=ns).count(),
            HistoryEvent.objects.filter(run__namespace=ns).count(),
            Schedule.objects.filter(namespace=ns).count(),
            Task.objects.filter(namespace=ns).count(),
        )


@pytest.fixture
def caller() -> Caller:
    return Caller()


def refused_fields(answer: AsgiResponse) -> list[str]:
    """The top-level fields the 400 calls unknown (it must be one, naming them)."""
    assert answer.status_code == 400, (answer.status_code, answer.content[:400])
    error = answer.json()
    assert error["code"] == "invalid_argument", error
    fields = error.get("details", {}).get("fields", {})
    unknown = sorted(name for name, problem in fields.items() if problem == [UNKNOWN_FIELD])
    assert unknown and all(name in error["message"] for name in unknown), error
    return unknown


def with_body(schema: dict[str, Any]) -> list[Operation]:
    found = [op for op in operations(schema) if op.body_schema is not None]
    assert len(found) > 30, [op.name for op in found]  # the inventory is the served schema's
    return found


def test_every_body_refuses_a_field_it_does_not_have_and_lists_what_it_has(caller: Caller) -> None:
    """Every operation with a body, sent a plausible body plus an unknown field, names that
    field alone; and every field its schema lists, sent at once, is known (the check and
    the description are one list)."""
    schema = served_schema()
    before = caller.state()
    for op in with_body(schema):
        body = example_body(schema, op.body_schema)
        assert refused_fields(caller.send(op, {**body, MISSPELT: "w"})) == [MISSPELT], op.name
        listed = resolve(schema, op.body_schema or {}).get("properties", {})
        everything = {name: body.get(name) for name in listed} | {"zz_unknown": 1}
        assert refused_fields(caller.send(op, everything)) == ["zz_unknown"], op.name
    assert caller.state() == before


def test_the_schema_closes_every_object_a_request_body_holds() -> None:
    schema = served_schema()
    components = schema["components"]["schemas"]
    open_objects = []
    for op in with_body(schema):
        pending, seen = [op.body_schema or {}], set()
        while pending:
            node = pending.pop()
            if isinstance(node, list):
                pending += node
                continue
            if not isinstance(node, dict):
                continue
            ref = node.get("$ref", "")
            if ref and ref not in seen:
                seen.add(ref)
                pending.append(components[ref.rsplit("/", 1)[-1]])
            if "properties" in node and node.get("additionalProperties") is not False:
                open_objects.append((op.name, sorted(node["properties"])))
            pending += [v for k, v in node.items() if k not in ("$ref", "default", "example")]
    assert not open_objects


START = {"workflow_id": "w-new", "workflow_type": "T", "task_queue": "q"}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("workflows", {**START, "execution_timout": 5}, "execution_timout"),
        ("signal-with-start", {**START, "signal_name": "s", "signal_inpt": [1]}, "signal_inpt"),
        ("workflows/running/signal", {"signal_name": "s", "inputs": [1]}, "inputs"),
        ("workflows/running/update", {"name": "u", "arg": [1]}, "arg"),
        ("workflows/running/terminate", {"reason": "r", "detail": "d"}, "detail"),
        ("workflows/running/cancel", {"reasn": "r"}, "reasn"),
        ("task-queues/q/workflow-tasks/poll", {"identty": "w", "timeout": 0}, "identty"),
        ("task-queues/q/activity-tasks/poll", {"max_task": 2, "timeout": 0}, "max_task"),
        ("task-queues/q/workflow-tasks/complete", {"task_token": "t", "command": []}, "command"),
        ("task-queues/q/activity-tasks/heartbeat", {"task_token": "t", "detail": 1}, "detail"),
    ],
)
def test_a_misspelt_field_changes_nothing(
    caller: Caller, path: str, body: dict[str, Any], field: str
) -> None:
    ExecutionFactory(namespace=caller.namespace, workflow_id="running", task_queue="q")
    before = caller.state()
    assert refused_fields(caller.post(path, body)) == [field]
    assert caller.state() == before


def test_nested_bodies_refuse_unknown_fields_too(caller: Caller) -> None:
    """A worker's version stamp (lean lane), a poll's capabilities and a schedule's spec
    (DRF) name the unknown field under its parent."""
    stamp = {"task_token": "t", "worker_version_stamp": {"build_id": "b", "use_versoning": True}}
    answer = caller.post("task-queues/q/workflow-tasks/complete", stamp)
    assert answer.status_code == 400
    assert answer.json()["details"]["fields"] == {"worker_version_stamp": {"use_versoning": [UNKNOWN_FIELD]}}
    assert "worker_version_stamp.use_versoning" in answer.json()["message"]

    poll = {"timeout": 0, "worker_version_capabilities": {"build": "b"}}
    answer = caller.post("task-queues/q/activity-tasks/poll", poll)
    assert answer.status_code == 400
    assert answer.json()["details"]["fields"] == {"worker_version_capabilities": {"build": [UNKNOWN_FIELD]}}

    spec = {"intervals": [{"every": 60, "ofset": 5}]}
    action = {"workflow_type": "T", "workflow_id": "w", "task_queue": "q"}
    body = {"schedule_id": "s", "schedule": {"spec": spec, "action": action}}
    answer = caller.post("schedules", body)
    assert answer.status_code == 400, answer.content
    assert answer.json()["details"]["fields"] == {
        "schedule": {"spec": {"intervals": {"0": {"ofset": [UNKNOWN_FIELD]}}}}
    }
    assert "schedule.spec.intervals.0.ofset" in answer.json()["message"]
    assert not Schedule.objects.filter(namespace=caller.namespace).exists()


def test_the_same_bodies_without_the_misspelling_are_taken(caller: Caller) -> None:
    """The refusals above are the unknown fields', not the bodies'."""
    ExecutionFactory(namespace=caller.namespace, workflow_id="running", task_queue="q")
    assert caller.post("workflows", {**START, "execution_timeout": 5}).status_code == 201
    assert caller.post("workflows/running/signal", {"signal_name": "s", "input": [1]}).status_code == 200
    assert (
        caller.post("task-queues/q/activity-tasks/poll", {"identity": "w", "timeout": 0.01}).status_code
        == 204
    )


def test_a_query_string_parameter_the_read_does_not_have_is_still_ignored(caller: Caller) -> None:
    ExecutionFactory(namespace=caller.namespace, workflow_id="running", task_queue="q")
    url = f"/api/v1/namespaces/{caller.namespace.name}/workflows/running/history"
    answer = asgi_request("GET", url, query="page_sise=3", authorization=caller.key)
    assert answer.status_code == 200, answer.content[:300]
