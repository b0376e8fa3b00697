"""Workflow Update over REST (the lean lane): the stage a caller waits for, the poll for an
outcome, update-with-start, and bad requests refused with nothing written."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection

from history import kernel
from history.models import WorkflowExecution, WorkflowUpdate
from matching.dispatch import poll_once
from tests.asgi_client import AsgiResponse, asgi_post, asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory, scope_of


def _path(execution: WorkflowExecution, tail: str) -> str:
    return f"/api/v1/namespaces/{execution.namespace.name}/workflows/{execution.workflow_id}/{tail}"


def _update(execution: WorkflowExecution, authorization: str, **body: Any) -> AsgiResponse:
    return asgi_post(_path(execution, "update"), {"name": "add", **body}, authorization=authorization)


def _answer_next_task(execution: WorkflowExecution, messages: list[dict[str, Any]]) -> None:
    task = poll_once(execution.namespace, execution.task_queue, "workflow", "w")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[], messages=messages
    )


@pytest.mark.django_db(transaction=True)
def test_the_caller_gets_the_stage_it_waits_for() -> None:
    execution = ExecutionFactory()
    key = ApiKeyFactory(namespace=execution.namespace)
    admitted = _update(execution, key.authorization, update_id="u-1", wait_stage="ADMITTED")
    assert admitted.status_code == 200, admitted.content
    assert admitted.json()["stage"] == "ADMITTED"
    # Nobody answers: the wait ends with the stage reached so far.
    began = time.monotonic()
    waited = _update(execution, key.authorization, update_id="u-1", timeout=0.5)
    assert waited.json()["stage"] == "ADMITTED"
    assert 0.4 < time.monotonic() - began < 5

    def worker() -> None:
        time.sleep(0.5)
        try:
            _answer_next_task(
                execution,
                [
                    {"type": "Acceptance", "update_id": "u-1"},
                    {"type": "Response", "update_id": "u-1", "success": {"metadata": {}, "data": 7}},
                ],
            )
        finally:
            connection.close()

    answering = threading.Thread(target=worker)
    answering.start()
    completed = _update(execution, key.authorization, update_id="u-1", wait_stage="COMPLETED", timeout=10)
    answering.join()
    assert completed.json() == {
        "update_id": "u-1",
        "workflow_id": execution.workflow_id,
        "run_id": str(execution.run_id),
        "stage": "COMPLETED",
        "outcome": {"success": {"metadata": {}, "data": 7}},
    }
    polled = asgi_request("GET", _path(execution, "updates/u-1"), authorization=key.authorization)
    assert polled.json()["outcome"] == {"success": {"metadata": {}, "data": 7}}
    assert WorkflowUpdate.objects.filter(run=execution).count() == 1


@pytest.mark.django_db(transaction=True)
def test_update_with_start_starts_the_run_and_sends_the_update_in_one_call() -> None:
    key = ApiKeyFactory()
    namespace = key.api_key.namespace
    body = {
        "start": {
            "workflow_id": "uws-1",
            "workflow_type": "Cart",
            "task_queue": "q",
            "id_conflict_policy": "USE_EXISTING",
        },
        "update": {"name": "add", "update_id": "first", "wait_stage": "ADMITTED"},
    }
    path = f"/api/v1/namespaces/{namespace.name}/update-with-start"
    first = asgi_post(path, body, authorization=key.authorization)
    assert first.status_code == 200, first.content
    assert first.json()["started"] is True
    assert first.json()["update"]["stage"] == "ADMITTED"
    again = asgi_post(
        path, {**body, "update": {**body["update"], "update_id": "second"}}, authorization=key.authorization
    )
    assert again.json()["started"] is False
    assert again.json()["run_id"] == first.json()["run_id"]
    run = WorkflowExecution.objects.get(run_id=first.json()["run_id"])
    task = poll_once(namespace, "q", "workflow", "w")
    assert task is not None and task["workflow_execution"]["run_id"] == str(run.run_id)
    assert [m["update_id"] for m in task["messages"]] == ["first", "second"]
    no_policy = {**body, "start": {**body["start"], "id_conflict_policy": ""}}
    assert asgi_post(path, no_policy, authorization=key.authorization).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_bad_update_requests_are_refused_and_write_nothing() -> None:
    execution = ExecutionFactory()
    key = ApiKeyFactory(namespace=execution.namespace)
    assert _update(execution, key.authorization, name="").status_code == 400
    assert _update(execution, key.authorization, wait_stage="SOON").status_code == 400
    assert _update(execution, "Bearer nope").status_code == 401
    reader = ApiKeyFactory(namespace=execution.namespace, roles=["worker"])
    assert _update(execution, reader.authorization).status_code == 403
    missing = asgi_request("GET", _path(execution, "updates/nope"), authorization=key.authorization)
    assert missing.status_code == 404
    assert not WorkflowUpdate.objects.filter(run=execution).exists()


@pytest.mark.django_db(transaction=True)
def test_updates_count_toward_the_namespace_request_rate() -> None:
    namespace = NamespaceFactory(request_rps=0.01, request_burst_ratio=100.0)  # a burst of one
    execution = ExecutionFactory(namespace=namespace)
    key = ApiKeyFactory(namespace=namespace)
    first = _update(execution, key.authorization, update_id="u-1", wait_stage="ADMITTED")
    assert first.status_code == 200, first.content
    refused = _update(execution, key.authorization, update_id="u-2", wait_stage="ADMITTED")
    assert refused.status_code == 429
    assert refused.json()["code"] == "resource_exhausted" and int(refused["Retry-After"]) >= 1
    assert list(WorkflowUpdate.objects.filter(run=execution).values_list("update_id", flat=True)) == ["u-1"]
