"""Ids minted in one namespace are unknown in every other one: the REST API.

Each id B minted (a run id, a schedule id, a batch job id, a payload digest, a page token
of the workflow list, a schedule-list cursor) is sent with A's key under A's URL. The
answer must be the one an unknown id gets: the same status, code and body as the same
call in C, a namespace that never saw the id (and, for tokens, as a token nobody minted).
B's rows are left exactly as they were, and the same call with B's key under B's URL
still works.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

import pytest

from history.models import WorkflowExecution
from tests.integration.minted_ids import JOB, SID, WID, World, answer, build_world, snapshot

# The history and signal calls are on the lean lane, on the API's pool: rows are committed.
pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/v1/namespaces/{ns}"
RUN = "/workflows/{wid}/runs/{run}"
UPDATE = {
    "schedule": {
        "spec": {"intervals": [{"every": 7200}]},
        "action": {"workflow_type": "Report", "workflow_id": "report", "task_queue": "reports"},
    }
}
BACKFILL = {"backfills": [{"start_at": "2026-01-01T00:00:00Z", "end_at": "2026-01-01T03:00:00Z"}]}
RESET = {"reason": "try", "reset_type": "FirstWorkflowTask"}

# (method, path under the namespace, body, the legitimate call's status under B's URL or
# None when it cannot be made here: a query waits for a worker that this test has not got)
CALLS: list[tuple[str, str, dict[str, Any] | None, int | None]] = [
    ("GET", RUN, None, 200),
    ("GET", RUN + "/history", None, 200),
    ("GET", "/workflows/{wid}/history?run_id={run}", None, 200),
    ("POST", RUN + "/signal", {"signal_name": "go"}, 200),
    ("POST", RUN + "/query", {"query_type": "state"}, None),
    ("POST", RUN + "/cancel", {"reason": "r"}, 200),
    ("POST", RUN + "/terminate", {"reason": "r"}, 200),
    ("POST", RUN + "/reset", RESET, 200),
    ("POST", "/workflows/{wid}/reset", {**RESET, "run_id": "{run}"}, 200),
    ("GET", RUN + "/reset-preview?reset_type=FirstWorkflowTask", None, 200),
    ("GET", "/schedules/{sid}", None, 200),
    ("POST", "/schedules/{sid}/update", UPDATE, 200),
    ("POST", "/schedules/{sid}/pause", {"note": "n"}, 200),
    ("POST", "/schedules/{sid}/unpause", {"note": "n"}, 200),
    ("POST", "/schedules/{sid}/trigger", {}, 200),
    ("POST", "/schedules/{sid}/backfill", BACKFILL, 200),
    ("DELETE", "/schedules/{sid}", None, 200),
    ("GET", "/batch-operations/{job}", None, 200),
    ("PATCH", "/batch-operations/{job}", {"rps": 9}, 200),
    ("POST", "/batch-operations/{job}/stop", {"reason": "r"}, 200),
    ("GET", "/payloads/{digest}", None, 200),
]


@pytest.fixture
def world() -> World:
    return build_world()


def _ids(world: World) -> dict[str, str]:
    return {"wid": WID, "run": str(world.run_b.run_id), "sid": SID, "job": JOB, "digest": world.digest_b}


def _filled(template: str, ids: dict[str, str]) -> str:
    return template.format(**ids)


def _body(body: dict[str, Any] | None, ids: dict[str, str]) -> dict[str, Any] | None:
    if body is None:
        return None
    return {k: _filled(v, ids) if isinstance(v, str) else v for k, v in body.items()}


def _call(world: World, label: str, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
    return answer(world.api(label), method, API.format(ns=world.ns(label).name) + path, body)


def _refused_as_unknown(foreign: tuple[int, Any], unknown: tuple[int, Any], world: World) -> None:
    assert foreign == unknown
    assert foreign[0] == 404 and foreign[1]["code"] == "not_found", foreign
    assert world.b.name not in str(foreign[1])


@pytest.mark.parametrize(
    ("method", "template", "body", "legit"), CALLS, ids=[f"{c[0]} {c[1]}" for c in CALLS]
)
def test_an_id_of_another_namespace_is_unknown_and_changes_nothing(
    world: World, method: str, template: str, body: dict[str, Any] | None, legit: int | None
) -> None:
    ids = _ids(world)
    path, filled = _filled(template, ids), _body(body, ids)
    before = snapshot(world.b)

    foreign = _call(world, "a", method, path, filled)
    unknown = _call(world, "c", method, path, filled)

    _refused_as_unknown(foreign, unknown, world)
    assert snapshot(world.b) == before
    if legit is not None:
        status, returned = _call(world, "b", method, path, filled)
        assert status == legit, returned


def test_a_run_id_that_is_nobodys_gets_the_same_answer_as_one_of_another_namespace(world: World) -> None:
    path = f"/workflows/{WID}/runs/{{}}"
    foreign = _call(world, "a", "GET", path.format(world.run_b.run_id), None)
    never_minted = _call(world, "a", "GET", path.format(uuid.uuid4()), None)
    assert foreign == never_minted and foreign[0] == 404


# ---------------------------------------------------------------- page tokens


def _list(world: World, label: str, **params: Any) -> tuple[int, Any]:
    return _call(world, label, "GET", f"/workflows?{urlencode(params)}", None)


@pytest.mark.parametrize("query", ["", "ExecutionStatus = 'Running' ORDER BY StartTime ASC"])
def test_a_workflow_list_token_of_another_namespace_is_malformed_here(world: World, query: str) -> None:
    status, first = _list(world, "b", page_size=1, query=query)
    token = first["next_page_token"]
    assert status == 200 and token
    before = snapshot(world.b)

    foreign = _list(world, "a", page_size=1, query=query, next_page_token=token)
    nobodys = _list(world, "a", page_size=1, query=query, next_page_token="bm9ib2R5")
    assert foreign == nobodys
    assert foreign[0] == 400
    assert foreign[1] == {"code": "invalid_argument", "message": "malformed next_page_token"}
    assert snapshot(world.b) == before

    status, second = _list(world, "b", page_size=1, query=query, next_page_token=token)
    assert status == 200 and second["executions"]
    seen = {first["executions"][0]["run_id"], second["executions"][0]["run_id"]}
    b_runs = {
        str(r) for r in WorkflowExecution.objects.filter(namespace=world.b).values_list("run_id", flat=True)
    }
    assert len(seen) == 2 and seen <= b_runs


def test_a_token_altered_by_hand_is_malformed(world: World) -> None:
    _, first = _list(world, "a", page_size=1)
    token = first["next_page_token"]
    body, _, signature = token.rpartition(":")
    forged = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + ":" + signature
    assert _list(world, "a", page_size=1, next_page_token=forged)[0] == 400


def test_a_schedule_cursor_of_another_namespace_is_malformed_here(world: World) -> None:
    status, first = _call(world, "b", "GET", "/schedules?page_size=1", None)
    assert status == 200 and [s["schedule_id"] for s in first["schedules"]] == [SID]
    cursor = first["next_cursor"]
    assert cursor
    before = snapshot(world.b)

    foreign = _call(world, "a", "GET", "/schedules?" + urlencode({"page_size": 1, "cursor": cursor}), None)
    nobodys = _call(world, "a", "GET", f"/schedules?page_size=1&cursor={SID}", None)
    assert foreign == nobodys
    assert foreign[0] == 400 and foreign[1]["code"] == "invalid_argument"
    assert foreign[1]["message"] == "malformed cursor" and world.b.name not in str(foreign[1])
    assert snapshot(world.b) == before

    status, second = _call(
        world, "b", "GET", "/schedules?" + urlencode({"page_size": 1, "cursor": cursor}), None
    )
    assert status == 200 and [s["schedule_id"] for s in second["schedules"]] == [SID + "-2"]
    assert second["next_cursor"] is None


def test_lists_and_counts_under_a_namespace_show_none_of_anothers(world: World) -> None:
    _, listed = _list(world, "a", page_size=100)
    assert str(world.run_b.run_id) not in str(listed)
    by_run_id = _list(world, "a", query=f"RunId = '{world.run_b.run_id}'")
    assert by_run_id == (200, {"executions": [], "next_page_token": None})
    status, counted = _call(world, "a", "GET", "/workflow-count", None)
    assert status == 200 and counted["count"] == 2
    _, schedules = _call(world, "a", "GET", "/schedules", None)
    _, jobs = _call(world, "a", "GET", "/batch-operations", None)
    assert schedules == {"schedules": [], "next_cursor": None} and jobs == {"jobs": []}
