"""Hostile and malformed input: always a 4xx with a JSON error code, never a 500."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import Api, ScriptedWorker, command


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


def _raw(api: Api, path: str, content: bytes) -> httpx.Response:
    return api.http.post(api.base + path, content=content, headers={"Content-Type": "application/json"})


def _assert_4xx(r: httpx.Response) -> dict[str, Any]:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    body = r.json()
    assert isinstance(body, dict) and isinstance(body.get("code"), str) and body["code"], body
    return body


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _start_body(wid: str, q: str, **extra: Any) -> dict[str, Any]:
    return {"workflow_id": wid, "workflow_type": "T", "task_queue": q, **extra}


@pytest.mark.parametrize(
    "case",
    [
        "malformed",
        "not_object_list",
        "not_object_string",
        "wrong_type_id",
        "wrong_type_input",
        "nul_in_id",
        "nul_in_input",
        "deep_input",
        "deep_memo",
        "huge_body",
        "payload_too_large",
    ],
)
def test_bad_start_is_rejected_cleanly_and_creates_nothing(api: Api, queue: str, case: str) -> None:
    wid = _wid()
    good = _start_body(wid, queue)
    content: bytes
    if case == "malformed":
        content = b'{"workflow_id": "' + wid.encode() + b'", '
    elif case == "not_object_list":
        content = json.dumps([good]).encode()
    elif case == "not_object_string":
        content = b'"hello"'
    elif case == "wrong_type_id":
        content = json.dumps({**good, "workflow_id": 12345, "input": "notalist"}).encode()
        wid = "12345"
    elif case == "wrong_type_input":
        content = json.dumps({**good, "input": {"a": 1}, "memo": "x"}).encode()
    elif case == "nul_in_id":
        wid = wid + "\u0000x"
        content = json.dumps({**good, "workflow_id": wid}).encode()
    elif case == "nul_in_input":
        content = json.dumps({**good, "input": ["a\u0000b"]}).encode()
    elif case == "deep_input":
        content = (json.dumps(good)[:-1] + ', "input": [' + _nested(200) + "]}").encode()
    elif case == "deep_memo":
        content = (
            json.dumps(good)[:-1] + ', "memo": {"m": ' + '{"a":' * 200 + "1" + "}" * 200 + "}}"
        ).encode()
    elif case == "huge_body":
        content = (json.dumps(good)[:-1] + ', "input": ["' + "x" * (9 * 1024 * 1024) + '"]}').encode()
    else:  # payload_too_large: valid JSON within the body limit, payload over 2 MiB
        content = json.dumps({**good, "input": ["y" * (2 * 1024 * 1024 + 100)]}).encode()

    r = _raw(api, "/workflows", content)
    body = _assert_4xx(r)
    if case in ("huge_body", "payload_too_large"):
        assert r.status_code == 413 and body["code"] == "payload_too_large", body
    if case in ("malformed", "not_object_list", "not_object_string"):
        assert r.status_code == 400
    if "\u0000" not in wid:  # NUL in a path id is covered by test_nul_in_path_id_is_not_a_500
        assert api.http.get(api.base + f"/workflows/{wid}").status_code == 404
    listing = api.get("/workflows", page_size=100)
    assert listing.status_code == 200 and wid not in listing.text


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[1,2]",
        b"null",
        b"42",
        b'{"signal_name": 5}',
        b'{"signal_name": "a\\u0000b"}',
        ('{"signal_name": "s", "input": ' + _nested(200) + "}").encode(),
    ],
)
def test_bad_signal_is_rejected_and_history_unchanged(api: Api, queue: str, content: bytes) -> None:
    wid = _wid()
    api.start(wid, queue)
    before = api.event_types(wid)
    _assert_4xx(_raw(api, f"/workflows/{wid}/signal", content))
    assert api.event_types(wid) == before


@pytest.mark.parametrize(
    "cmd",
    [
        command("NoSuchCommand"),
        {"command_type": 7, "attributes": {}},
        {"attributes": {}},
        command("StartTimer", timer_id="t", start_to_fire_timeout="soon"),
        command("ScheduleActivityTask", activity_id=["x"], activity_type="A", start_to_close_timeout=5),
        command("ScheduleActivityTask", activity_id="a\u0000", activity_type="A", start_to_close_timeout=5),
        "notadict",
    ],
)
def test_bad_commands_never_500(api: Api, worker: ScriptedWorker, cmd: Any) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    r = worker.complete_workflow_task(task, cmd)
    if r.status_code == 200:  # accepted as a workflow-task failure rather than a request error
        assert "WorkflowTaskFailed" in api.event_types(wid)
        assert "TimerStarted" not in api.event_types(wid) and "ActivityTaskScheduled" not in api.event_types(
            wid
        )
    else:
        _assert_4xx(r)
        assert "WorkflowTaskCompleted" not in api.event_types(wid)


@pytest.mark.parametrize(
    "content",
    [b"{bad", b"[]", b'{"task_token": 5, "commands": "x"}', b'{"task_token": "a\\u0000", "commands": []}'],
)
def test_bad_worker_requests_never_500(api: Api, queue: str, content: bytes) -> None:
    for path in ("workflow-tasks/complete", "activity-tasks/complete", "activity-tasks/heartbeat"):
        _assert_4xx(_raw(api, f"/task-queues/{queue}/{path}", content))


def test_bad_query_params_never_500(api: Api, queue: str) -> None:
    wid = _wid()
    api.start(wid, queue)
    for params in (
        {"page_size": "abc"},
        {"page_size": "-1"},
        {"next_page_token": "%%%garbage"},
        {"query": "ExecutionStatus = 'NoSuchStatus'"},
        {"query": "WorkflowId = 'a' AND"},
    ):
        r = api.get("/workflows", **params)
        assert r.status_code != 500 and (r.status_code == 200 or _assert_4xx(r)), (params, r.text)
    for params in ({"after_event_id": "x"}, {"page_size": "0"}, {"wait_new_event": "maybe"}):
        r = api.get(f"/workflows/{wid}/history", **params)
        assert r.status_code != 500 and (r.status_code == 200 or _assert_4xx(r)), (params, r.text)


def test_nul_in_path_id_is_not_a_500(api: Api) -> None:
    r = api.http.get(api.base + f"/workflows/{quote('wf-a' + chr(0) + 'b', safe='')}")
    _assert_4xx(r)


def test_an_unknown_list_filter_is_refused_rather_than_ignored(api: Api, queue: str) -> None:
    api.start(f"listed-{uuid.uuid4()}", queue)
    response = api.get("/workflows", workflow_id="nobody")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_argument"
    assert "workflow_id" in response.json()["message"]
    assert api.get("/workflows", query="WorkflowId = 'nobody'").json()["executions"] == []
