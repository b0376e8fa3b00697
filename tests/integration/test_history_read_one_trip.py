"""A history read that does not wait is one trip to the pool and one statement.

A worker whose cache lost a run reads its whole history; a storm of timers sends a
thousand such reads at once. The run's status and the page are read together (one
snapshot), so a last page that says the run closed holds its close event, and the page's
events are the stored events as the API always sent them. Requests go through the
frontend's ASGI application against the real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db.backends import utils as db_utils

from chronicle import lane_asgi
from executions import selectors
from history import kernel
from history.kernel.responses import serialize_event
from history.models import ExecutionStatus, HistoryEvent, WorkflowExecution
from namespaces.models import Namespace
from tests import asgi_client
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory
from tests.integration.test_kernel_query_plans import captured_sql, indexes_used

# The lane runs on the API's thread pool (its own database connections): rows are committed.
pytestmark = pytest.mark.django_db(transaction=True)


class Reader:
    """A client key of one namespace, reading histories through the lane."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self.authorization = ApiKeyFactory(namespace=namespace, roles=["client"]).authorization

    def url(self, workflow_id: str, run_id: str | None = None) -> str:
        run = f"/runs/{run_id}" if run_id else ""
        return f"/api/v1/namespaces/{self.namespace.name}/workflows/{workflow_id}{run}/history"

    def get(self, workflow_id: str, run_id: str | None = None, query: str = "") -> AsgiResponse:
        return asgi_request(
            "GET", self.url(workflow_id, run_id), authorization=self.authorization, query=query
        )


def _signalled_run(namespace: Namespace, signals: int) -> WorkflowExecution:
    run = ExecutionFactory(namespace=namespace)
    for n in range(signals):
        kernel.signal_workflow_execution(
            namespace, workflow_id=run.workflow_id, run_id=None, signal_name="s", input=[n]
        )
    return run


def _terminate(run: WorkflowExecution) -> None:
    kernel.terminate_workflow_execution(run.namespace, workflow_id=run.workflow_id, run_id=None, reason="r")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Statements sent by Django on any thread, and trips to the API's pool."""
    counts = {"statements": 0, "trips": 0}
    execute = db_utils.CursorWrapper.execute
    run = lane_asgi.Trips.run

    def counted_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["statements"] += 1
        return execute(self, *args, **kwargs)

    async def counted_run(self: lane_asgi.Trips, work: Any, *args: Any) -> Any:
        counts["trips"] += 1
        return await run(self, work, *args)

    monkeypatch.setattr(db_utils.CursorWrapper, "execute", counted_execute)
    monkeypatch.setattr(lane_asgi.Trips, "run", counted_run)
    yield counts


@pytest.mark.parametrize(
    "query", ["after_event_id=0", "page_size=2", "history_event_filter_type=CLOSE_EVENT"]
)
def test_a_read_that_does_not_wait_is_one_statement_in_one_trip(counted: dict[str, int], query: str) -> None:
    # Without a rate limit: the gate's rate bucket is a statement of every call, not the read's.
    run = _signalled_run(NamespaceFactory(request_rps=0), 3)
    reader = Reader(run.namespace)
    assert reader.get(run.workflow_id, str(run.run_id), query).status_code == 200  # the key, cached
    for run_id in (str(run.run_id), None):
        counted.update(statements=0, trips=0)
        answer = reader.get(run.workflow_id, run_id, query)
        assert answer.status_code == 200, answer.content
        assert answer.json()["run_id"] == str(run.run_id)
        assert counted == {"statements": 1, "trips": 1}


def test_head_is_the_same_read_without_a_body(counted: dict[str, int]) -> None:
    run = _signalled_run(NamespaceFactory(request_rps=0), 1)
    reader = Reader(run.namespace)
    assert reader.get(run.workflow_id).status_code == 200
    counted.update(statements=0, trips=0)
    head = asgi_request("HEAD", reader.url(run.workflow_id), authorization=reader.authorization)
    assert head.status_code == 200 and head.content == b""
    assert int(head["content-length"]) == len(reader.get(run.workflow_id).content)
    assert counted["trips"] == 2 and counted["statements"] == 2  # the HEAD's and the GET's


def test_pages_follow_the_cursor_and_hold_the_stored_events_as_before() -> None:
    namespace = NamespaceFactory(payload_inline_limit_bytes=1024)
    run = _signalled_run(namespace, 6)
    big = {"metadata": {"encoding": "json/plain"}, "data": "x" * 5000}
    kernel.signal_workflow_execution(
        namespace, workflow_id=run.workflow_id, run_id=None, signal_name="big", input=[big]
    )
    _terminate(run)
    stored = [
        serialize_event(e)
        for e in HistoryEvent.objects.filter(run_id=run.run_id, shard_id=run.shard_id).order_by("event_id")
    ]
    assert "payload_ref" in stored[-2]["attributes"]["input"][0]  # the big signal's, by reference
    reader = Reader(namespace)
    read: list[dict[str, Any]] = []
    after, pages = 0, []
    while True:
        page = reader.get(run.workflow_id, str(run.run_id), f"after_event_id={after}&page_size=3").json()
        pages.append(page)
        read.extend(page["events"])
        if page["next_after_event_id"] is None:
            break
        assert page["next_after_event_id"] == page["events"][-1]["event_id"]
        after = page["next_after_event_id"]
    assert read == stored  # the same JSON as the ORM's events, payload references as stored
    assert len(pages) == -(-len(stored) // 3) and all(len(p["events"]) == 3 for p in pages[:-1])
    assert {p["status"] for p in pages} == {ExecutionStatus.TERMINATED}
    assert pages[-1]["events"][-1]["event_type"] == "WorkflowExecutionTerminated"
    past_the_end = reader.get(run.workflow_id, None, f"after_event_id={len(stored)}").json()
    assert past_the_end["events"] == [] and past_the_end["next_after_event_id"] is None
    assert past_the_end["status"] == ExecutionStatus.TERMINATED


def test_a_read_after_the_close_says_closed_and_holds_the_close() -> None:
    run = _signalled_run(NamespaceFactory(), 2)
    reader = Reader(run.namespace)
    running = reader.get(run.workflow_id).json()
    assert running["status"] == ExecutionStatus.RUNNING and running["new_run_id"] is None
    _terminate(run)
    closed = reader.get(run.workflow_id, query=f"after_event_id={running['events'][-1]['event_id']}").json()
    assert closed["status"] == ExecutionStatus.TERMINATED and closed["next_after_event_id"] is None
    assert [e["event_type"] for e in closed["events"]] == ["WorkflowExecutionTerminated"]


def test_another_namespaces_run_is_not_found_and_nothing_leaks() -> None:
    run = _signalled_run(NamespaceFactory(), 2)
    other = Reader(NamespaceFactory())
    for run_id in (str(run.run_id), None):
        for query in ("", "history_event_filter_type=CLOSE_EVENT", "wait_new_event=true&timeout=0.2"):
            refused = other.get(run.workflow_id, run_id, query)
            assert refused.status_code == 404, refused.content
            assert refused.json() == {
                "code": "not_found",
                "message": f"workflow execution {run.workflow_id!r} not found",
            }
    foreign_key = asgi_request(
        "GET", Reader(run.namespace).url(run.workflow_id), authorization=other.authorization
    )
    assert foreign_key.status_code == 404 and str(run.run_id).encode() not in foreign_key.content


def test_a_run_id_that_is_no_uuid_is_refused() -> None:
    run = _signalled_run(NamespaceFactory(), 0)
    refused = Reader(run.namespace).get(run.workflow_id, "not-a-uuid")
    assert refused.status_code == 400 and refused.json()["message"] == "run_id must be a UUID"


def test_a_waiting_read_woken_by_the_close_answers_closed_with_the_close() -> None:
    run = _signalled_run(NamespaceFactory(), 1)
    reader = Reader(run.namespace)
    last = reader.get(run.workflow_id).json()["events"][-1]["event_id"]

    async def wait_then_close() -> AsgiResponse:
        waiting = asyncio.ensure_future(
            asgi_client.asgi_call(
                "GET",
                reader.url(run.workflow_id),
                authorization=reader.authorization,
                query=f"after_event_id={last}&wait_new_event=true&timeout=10",
            )
        )
        await asyncio.sleep(0.4)
        await asyncio.to_thread(_terminate_in_a_fresh_thread, run)
        return await waiting

    began = time.monotonic()
    page = async_to_sync(wait_then_close)().json()
    assert time.monotonic() - began < 5
    assert page["status"] == ExecutionStatus.TERMINATED and page["next_after_event_id"] is None
    assert [e["event_type"] for e in page["events"]] == ["WorkflowExecutionTerminated"]


def _terminate_in_a_fresh_thread(run: WorkflowExecution) -> None:
    from django.db import connection

    try:
        _terminate(run)
    finally:
        connection.close()


def test_a_page_read_while_runs_close_never_says_closed_without_the_close() -> None:
    """Reads race the closes of other threads: each last page either says running, or says
    closed and ends with the close (the status and the events are one snapshot)."""
    namespace = NamespaceFactory()
    runs = [_signalled_run(namespace, 2) for _ in range(6)]

    def close_all() -> None:
        for run in runs:
            time.sleep(0.02)
            _terminate_in_a_fresh_thread(run)

    closer = threading.Thread(target=close_all)
    closer.start()
    seen_closed = 0
    deadline = time.monotonic() + 10
    while seen_closed < len(runs) and time.monotonic() < deadline:
        seen_closed = 0
        for run in runs:
            page = selectors.history_read(
                namespace.pk, run.workflow_id, None, after_event_id=0, page_size=256
            )
            if page.run.status != ExecutionStatus.RUNNING:
                seen_closed += 1
                assert page.cursor is None and page.events[-1]["event_type"] == "WorkflowExecutionTerminated"
            else:
                assert page.events[-1]["event_type"] != "WorkflowExecutionTerminated"
    closer.join()
    assert seen_closed == len(runs)


def test_the_read_finds_its_run_and_events_by_their_indexes() -> None:
    run = _signalled_run(NamespaceFactory(), 2)
    for _ in range(40):  # other runs of the namespace: on a table of a few rows any plan goes
        ExecutionFactory(namespace=run.namespace)
    sql = captured_sql(
        lambda: selectors.history_read(
            run.namespace_id, run.workflow_id, None, after_event_id=1, page_size=50
        ),
        "history_historyevent",
    )
    assert {"exec_wid_start", "uniq_event_per_run"} <= indexes_used(sql)
