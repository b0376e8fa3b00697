"""The lean lane's input handling: the same 4xx answers the DRF views gave, for every
token endpoint, against the real PostgreSQL.

The expected field errors are the ones the DRF serializers produced for the same bodies,
word for word: callers see no difference. Requests go through the frontend's ASGI
application, as a server sends them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from tests.asgi_client import asgi_request
from tests.factories import ApiKeyFactory, NamespaceFactory

# The lane runs on the API's thread pool (its own database connections): rows are committed.
pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "orders"
ENDPOINTS = [
    "workflow-tasks/complete",
    "workflow-tasks/fail",
    "activity-tasks/complete",
    "activity-tasks/fail",
    "activity-tasks/canceled",
    "activity-tasks/heartbeat",
    "query-tasks/respond",
]
# The fields an endpoint requires besides the task token (a body holds only its own fields).
REQUIRED: dict[str, dict[str, Any]] = {
    "workflow-tasks/fail": {"cause": "c"},
    "activity-tasks/fail": {"failure": {}},
}

# endpoint -> (bad body, the DRF views' field errors for it)
BAD_BODIES: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {
    "workflow-tasks/complete": [
        (
            {"task_token": 5, "identity": 5, "commands": 5},
            {
                "task_token": ["Not a valid string."],
                "identity": ["Not a valid string."],
                "commands": ['Expected a list of items but got type "int".'],
            },
        ),
        (
            {"task_token": "t", "commands": [{}, 3]},
            {"commands": {"1": ['Expected a dictionary of items but got type "int".']}},
        ),
        (
            {"task_token": "t", "sticky_schedule_to_start_timeout": -1},
            {"sticky_schedule_to_start_timeout": ["Ensure this value is greater than or equal to 0."]},
        ),
        (
            {"task_token": "t", "sticky_task_queue": "s" * 1001},
            {"sticky_task_queue": ["Ensure this field has no more than 1000 characters."]},
        ),
        (
            {"task_token": "t", "query_results": {"q": 1}},
            {"query_results": {"q": ['Expected a dictionary of items but got type "int".']}},
        ),
        (
            {"task_token": "t", "worker_version_stamp": 5},
            {
                "worker_version_stamp": {
                    "non_field_errors": ["Invalid data. Expected a dictionary, but got int."]
                }
            },
        ),
        (
            {"task_token": "t", "worker_version_stamp": {"build_id": "b" * 300}},
            {"worker_version_stamp": {"build_id": ["Ensure this field has no more than 255 characters."]}},
        ),
        (
            {"task_token": "t", "worker_version_stamp": {"use_versioning": True}},
            {
                "worker_version_stamp": {
                    "non_field_errors": ["build_id is required when use_versioning is true"]
                }
            },
        ),
        (
            {"task_token": "t", "return_new_workflow_task": "x"},
            {"return_new_workflow_task": ["Must be a valid boolean."]},
        ),
    ],
    "workflow-tasks/fail": [
        ({"task_token": "t"}, {"cause": ["This field is required."]}),
        (
            {"task_token": "t", "cause": "c" * 201},
            {"cause": ["Ensure this field has no more than 200 characters."]},
        ),
        ({"task_token": "t", "cause": "c", "failure": None}, {"failure": ["This field may not be null."]}),
        (
            {"task_token": "t", "identity": "", "cause": ""},
            {"identity": ["This field may not be blank."], "cause": ["This field may not be blank."]},
        ),
    ],
    "activity-tasks/complete": [
        ({"task_token": "t", "result": None}, {"result": ["This field may not be null."]}),
        ({"task_token": "x" * 8001}, {"task_token": ["Ensure this field has no more than 8000 characters."]}),
        (
            {"task_token": "t", "identity": "i" * 1001},
            {"identity": ["Ensure this field has no more than 1000 characters."]},
        ),
    ],
    "activity-tasks/fail": [
        ({"task_token": "t"}, {"failure": ["This field is required."]}),
        (
            {"task_token": "t", "failure": []},
            {"failure": ['Expected a dictionary of items but got type "list".']},
        ),
        (
            {"task_token": "t", "failure": {}, "last_heartbeat_details": None},
            {"last_heartbeat_details": ["This field may not be null."]},
        ),
    ],
    "activity-tasks/canceled": [
        ({"task_token": None}, {"task_token": ["This field may not be null."]}),
        ({"task_token": "t", "details": None}, {"details": ["This field may not be null."]}),
    ],
    "activity-tasks/heartbeat": [
        ({}, {"task_token": ["This field is required."]}),
        ({"task_token": "  "}, {"task_token": ["This field may not be blank."]}),
        ({"task_token": True}, {"task_token": ["Not a valid string."]}),
    ],
    "query-tasks/respond": [
        ({"task_token": "t", "error_message": 3}, {"error_message": ["Not a valid string."]}),
        (
            {"task_token": "t", "error_message": "e" * 100_001},
            {"error_message": ["Ensure this field has no more than 100000 characters."]},
        ),
        ({"task_token": "t", "answer": None}, {"answer": ["This field may not be null."]}),
    ],
}


class Worker:
    def __init__(self) -> None:
        namespace = NamespaceFactory()
        self.namespace = namespace.name
        self.authorization = ApiKeyFactory(namespace=namespace).authorization

    def post(self, endpoint: str, content: bytes | str, *, queue: str = QUEUE) -> Any:
        url = f"/api/v1/namespaces/{self.namespace}/task-queues/{queue}/{endpoint}"
        return asgi_request("POST", url, content, authorization=self.authorization)


@pytest.fixture
def worker() -> Worker:
    return Worker()


def _error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = json.loads(response.content)
    assert body["code"] == code, body
    return body


@pytest.mark.parametrize(
    ("endpoint", "body", "fields"),
    [(endpoint, body, fields) for endpoint, cases in BAD_BODIES.items() for body, fields in cases],
)
def test_a_bad_body_gets_the_field_errors_it_always_got(
    worker: Worker, endpoint: str, body: dict[str, Any], fields: dict[str, Any]
) -> None:
    answer = _error(worker.post(endpoint, json.dumps(body)), 400, "invalid_argument")
    assert answer == {"code": "invalid_argument", "message": "invalid request", "details": {"fields": fields}}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_nul_anywhere_in_the_body_is_refused(worker: Worker, endpoint: str) -> None:
    for content in ('{"task_token": "a\\u0000b"}', '{"task_token": "t", "x": {"k\\u0000": 1}}'):
        answer = _error(worker.post(endpoint, content), 400, "malformed_request")
        assert answer["message"] == "strings may not contain NUL (\\u0000)"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(worker: Worker, endpoint: str) -> None:
    content = json.dumps({"task_token": "\\u0000", **REQUIRED.get(endpoint, {})})
    assert '"\\\\u0000"' in content  # the text \u0000, which the quick scan flags for the full walk
    answer = _error(worker.post(endpoint, content), 400, "invalid_argument")
    assert answer["message"] == "task token is not valid"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("content", ["[1, 2]", '"hello"', "null", "42"])
def test_a_body_that_is_not_an_object_is_refused(worker: Worker, endpoint: str, content: str) -> None:
    answer = _error(worker.post(endpoint, content), 400, "malformed_request")
    assert answer["message"] == "the body must be a JSON object"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_malformed_json_is_refused(worker: Worker, endpoint: str) -> None:
    _error(worker.post(endpoint, '{"task_token": "t", '), 400, "malformed_request")


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_nesting_past_the_limit_is_refused_and_up_to_it_accepted(worker: Worker, endpoint: str) -> None:
    deep = '{"task_token": "t", "x": ' + "[" * 65 + "]" * 65 + "}"
    answer = _error(worker.post(endpoint, deep), 400, "malformed_request")
    assert answer["message"] == "JSON nested deeper than 64"
    within = '{"task_token": "t", "x": ' + "[" * 64 + "]" * 64 + "}"
    answer = _error(worker.post(endpoint, within), 400, "invalid_argument")  # past the walk
    assert answer["message"] == "unknown field(s): x"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_oversized_body_is_413(worker: Worker, endpoint: str) -> None:
    content = json.dumps({"task_token": "t", "identity": "w", "pad": "x" * 2048})
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024):
        answer = _error(worker.post(endpoint, content), 413, "payload_too_large")
    assert answer["message"] == "request body too large"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_empty_body_lacks_the_token(worker: Worker, endpoint: str) -> None:
    answer = _error(worker.post(endpoint, ""), 400, "invalid_argument")
    assert answer["details"]["fields"]["task_token"] == ["This field is required."]


def test_other_verbs_are_405_and_a_nul_in_the_path_is_refused(worker: Worker) -> None:
    url = f"/api/v1/namespaces/{worker.namespace}/task-queues/{QUEUE}/activity-tasks/heartbeat"
    response = asgi_request("GET", url, authorization=worker.authorization)
    assert response.status_code == 405
    assert json.loads(response.content) == {
        "code": "method_not_allowed",
        "message": 'Method "GET" not allowed.',
    }
    _error(
        worker.post("activity-tasks/heartbeat", '{"task_token": "t"}', queue="q\x00"), 400, "invalid_argument"
    )


def test_a_missing_key_is_401_before_the_body_is_read(worker: Worker) -> None:
    url = f"/api/v1/namespaces/{worker.namespace}/task-queues/{QUEUE}/activity-tasks/heartbeat"
    _error(asgi_request("POST", url, "[not json"), 401, "unauthenticated")
