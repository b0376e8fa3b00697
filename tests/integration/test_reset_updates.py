"""A reset reapplies updates as Temporal does, on real PostgreSQL: an update accepted after the
point is asked again of the new run (same update id, an ``Admitted`` event with origin
``REAPPLY``), one before it is kept, and ``reset_reapply_type`` /
``reset_reapply_exclude_types`` leave updates or signals out; bad values are a 400."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from chronicle.errors import ChronicleError
from history import kernel
from history.kernel.reset import reapply_choice
from history.kernel.updates import status_of
from history.models import HistoryEvent, UpdateState, WorkflowExecution, WorkflowUpdate
from tests.factories import ApiKeyFactory
from tests.integration.test_updates_kernel import complete, event_types, idle_run, poll, send

pytestmark = pytest.mark.django_db

POINT = 13  # the third workflow task's WorkflowTaskCompleted: after "before", ahead of "after"


def _payload(n: int) -> dict[str, Any]:
    return {"metadata": {"encoding": "json/plain"}, "data": n}


def _accept_and_answer(execution: WorkflowExecution, update_id: str, n: int) -> None:
    task = poll(execution)
    assert [m["update_id"] for m in task["messages"]] == [update_id]
    complete(
        task,
        [
            {"type": "Acceptance", "update_id": update_id},
            {"type": "Response", "update_id": update_id, "success": _payload(n)},
        ],
    )


def run_with_updates_around_the_point() -> WorkflowExecution:
    """Update "before" completed by task 2, a signal and task 3 (its completion is event 13),
    then update "after" completed by task 4 and a signal "late" after it."""
    execution = idle_run()
    send(execution, "before")
    _accept_and_answer(execution, "before", 1)
    kernel.signal_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=None, signal_name="early", input=[]
    )
    complete(poll(execution), [])
    assert HistoryEvent.objects.get(run=execution, event_id=POINT).event_type == "WorkflowTaskCompleted"
    send(execution, "after")
    _accept_and_answer(execution, "after", 2)
    kernel.signal_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=None, signal_name="late", input=[]
    )
    return execution


def rest_reset(execution: WorkflowExecution, **body: Any) -> Any:
    key = ApiKeyFactory(namespace=execution.namespace)
    url = f"/api/v1/namespaces/{execution.namespace.name}/workflows/{execution.workflow_id}/reset"
    return Client().post(
        url,
        json.dumps({"reason": "redo", "event_id": POINT, **body}),
        content_type="application/json",
        HTTP_AUTHORIZATION=key.authorization,
    )


def new_run_of(response: Any) -> WorkflowExecution:
    assert response.status_code == 200, response.content
    return WorkflowExecution.objects.get(run_id=response.json()["run_id"])


def rows(run: WorkflowExecution) -> dict[str, str]:
    return dict(WorkflowUpdate.objects.filter(run=run).values_list("update_id", "state"))


def test_an_update_completed_after_the_point_is_asked_again_and_completes_in_the_new_run() -> None:
    base = run_with_updates_around_the_point()
    new = new_run_of(rest_reset(base))

    assert event_types(new)[POINT - 1 :] == [
        "WorkflowTaskFailed",
        "WorkflowExecutionSignaled",
        "WorkflowExecutionUpdateAdmitted",
        "WorkflowTaskScheduled",
    ]
    admitted = HistoryEvent.objects.get(run=new, event_type="WorkflowExecutionUpdateAdmitted")
    assert admitted.attributes["origin"] == "UPDATE_ADMITTED_EVENT_ORIGIN_REAPPLY"
    assert admitted.attributes["request"]["meta"]["update_id"] == "after"
    assert admitted.attributes["request"]["input"]["name"] == "add"
    # "before" is in the copied history: kept, completed, not asked again.
    assert rows(new) == {"before": UpdateState.COMPLETED, "after": UpdateState.ADMITTED}
    new.refresh_from_db()
    assert new.updates_in_flight == 1

    # The new run's first task carries the request; the worker validates and handles it again.
    _accept_and_answer(new, "after", 20)
    assert event_types(new)[-2:] == ["WorkflowExecutionUpdateAccepted", "WorkflowExecutionUpdateCompleted"]
    new.refresh_from_db()
    assert new.updates_in_flight == 0

    # Asked by id without a run, the update is the new run's, with the new outcome.
    found, run = kernel.find_update(base.namespace, base.workflow_id, None, "after")
    assert status_of(found, run).as_dict() == {
        "update_id": "after",
        "workflow_id": base.workflow_id,
        "run_id": str(new.run_id),
        "stage": "COMPLETED",
        "outcome": {"success": _payload(20)},
    }
    # The same id sent again is deduplicated on the new run; "before" keeps its first outcome.
    assert send(new, "after").outcome == {"success": _payload(20)}
    again = send(new, "before")
    assert (again.run_id, again.stage, again.outcome) == (
        str(new.run_id),
        "COMPLETED",
        {"success": _payload(1)},
    )
    # Naming the old run still reads the old run's outcome.
    old, old_run = kernel.find_update(base.namespace, base.workflow_id, str(base.run_id), "after")
    assert status_of(old, old_run).outcome == {"success": _payload(2)}


@pytest.mark.parametrize(
    ("body", "signals", "updates"),
    [
        ({"reset_reapply_exclude_types": ["RESET_REAPPLY_EXCLUDE_TYPE_UPDATE"]}, True, False),
        ({"reset_reapply_exclude_types": ["UPDATE"]}, True, False),
        ({"reset_reapply_type": "RESET_REAPPLY_TYPE_SIGNAL"}, True, False),
        ({"reset_reapply_exclude_types": ["RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL"]}, False, True),
        ({"reapply_signals": False}, False, True),
        ({"reset_reapply_type": "RESET_REAPPLY_TYPE_NONE"}, False, False),
        ({"reset_reapply_exclude_types": ["SIGNAL", "UPDATE", "NEXUS"]}, False, False),
        ({"reset_reapply_type": "RESET_REAPPLY_TYPE_ALL_ELIGIBLE"}, True, True),
    ],
)
def test_the_reapply_options_leave_signals_or_updates_out(
    body: dict[str, Any], signals: bool, updates: bool
) -> None:
    base = run_with_updates_around_the_point()
    new = new_run_of(rest_reset(base, **body))
    tail = event_types(new)[POINT - 1 :]
    assert ("WorkflowExecutionSignaled" in tail) is signals
    assert ("WorkflowExecutionUpdateAdmitted" in tail) is updates
    assert ("after" in rows(new)) is updates
    assert rows(new)["before"] == UpdateState.COMPLETED
    task = poll(new)
    assert [m["update_id"] for m in task["messages"]] == (["after"] if updates else [])


def test_the_preview_lists_the_updates_it_would_ask_again_or_leave_out() -> None:
    base = run_with_updates_around_the_point()
    kept = kernel.preview_reset(base.namespace, workflow_id=base.workflow_id, run_id=None, point=POINT)
    assert kept["reapply_updates"] is True and kept["updates_not_reapplied"] == []
    assert kept["updates_to_reapply"] == [{"run_id": str(base.run_id), "update_id": "after", "name": "add"}]
    left_out = kernel.preview_reset(
        base.namespace, workflow_id=base.workflow_id, run_id=None, point=POINT, reapply_updates=False
    )
    assert left_out["updates_to_reapply"] == [] and left_out["reapply_updates"] is False
    assert [u["update_id"] for u in left_out["updates_not_reapplied"]] == ["after"]
    key = ApiKeyFactory(namespace=base.namespace)
    url = f"/api/v1/namespaces/{base.namespace.name}/workflows/{base.workflow_id}/reset-preview"
    over_rest = Client(HTTP_AUTHORIZATION=key.authorization).get(
        url, {"event_id": POINT, "reset_reapply_exclude_types": ["UPDATE", "SIGNAL"]}
    )
    assert over_rest.status_code == 200, over_rest.content
    assert over_rest.json()["updates_to_reapply"] == [] and over_rest.json()["signals_to_reapply"] == []
    bad = Client(HTTP_AUTHORIZATION=key.authorization).get(
        url, {"event_id": POINT, "reset_reapply_type": "X"}
    )
    assert bad.status_code == 400 and "reset_reapply_type" in bad.content.decode()


def test_a_second_reset_asks_again_an_update_a_first_reset_reapplied() -> None:
    base = run_with_updates_around_the_point()
    first = new_run_of(rest_reset(base))
    # Reset the new run again before its worker saw the reapplied update: to the second task.
    second = new_run_of(rest_reset(first, event_id=7))
    admitted = HistoryEvent.objects.filter(run=second, event_type="WorkflowExecutionUpdateAdmitted")
    assert [e.attributes["request"]["meta"]["update_id"] for e in admitted.order_by("event_id")] == [
        "before",
        "after",
    ]
    assert rows(second) == {"before": UpdateState.ADMITTED, "after": UpdateState.ADMITTED}
    task = poll(second)
    assert [m["update_id"] for m in task["messages"]] == ["before", "after"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reset_reapply_type": "SIGNALS"}, "reset_reapply_type"),
        ({"reset_reapply_type": 3}, "reset_reapply_type"),
        (
            {"reset_reapply_exclude_types": ["RESET_REAPPLY_EXCLUDE_TYPE_UPDATES"]},
            "reset_reapply_exclude_types",
        ),
        ({"reset_reapply_exclude_types": "UPDATE"}, "reset_reapply_exclude_types"),
        ({"reset_reapply_exclude_types": [None]}, "reset_reapply_exclude_types"),
    ],
)
def test_a_bad_reapply_value_is_a_400_that_changes_nothing(body: dict[str, Any], field: str) -> None:
    base = run_with_updates_around_the_point()
    events = event_types(base)
    response = rest_reset(base, **body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_argument"
    assert field in response.content.decode()
    assert WorkflowExecution.objects.filter(workflow_id=base.workflow_id).count() == 1
    base.refresh_from_db()
    assert base.is_running and event_types(base) == events


def test_reapply_choice_reads_temporal_names_and_refuses_others() -> None:
    assert kernel_choice("", []) == (True, True)
    assert kernel_choice("SIGNAL", []) == (True, False)
    assert kernel_choice("RESET_REAPPLY_TYPE_NONE", []) == (False, False)
    assert kernel_choice("", ["RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL"]) == (False, True)
    with pytest.raises(ChronicleError, match="reset_reapply_exclude_types"):
        kernel_choice("", ["Updates"])
    with pytest.raises(ChronicleError, match="reset_reapply_type"):
        kernel_choice("ALL", [])


def kernel_choice(reapply_type: str, excludes: list[str]) -> tuple[bool, bool]:
    choice = reapply_choice(reapply_type, excludes)
    return choice.signals, choice.updates


def test_the_openapi_schema_describes_the_reapply_options() -> None:
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow_id}/reset"
    body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    properties = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]["properties"]
    assert "RESET_REAPPLY_TYPE_SIGNAL" in str(properties["reset_reapply_type"])
    item = properties["reset_reapply_exclude_types"]["items"]
    if "$ref" in item:
        item = schema["components"]["schemas"][item["$ref"].rsplit("/", 1)[1]]
    assert {"RESET_REAPPLY_EXCLUDE_TYPE_UPDATE", "UPDATE", "SIGNAL"} <= set(item["enum"])
    preview = schema["components"]["schemas"]["ResetPreview"]["properties"]
    assert {"reapply_updates", "updates_to_reapply", "updates_not_reapplied"} <= set(preview)
