"""A history page that says the run closed holds the close event.

The lane reads a page's events, and the run's status later (a long-poll waits between the
two). A run closing in between must not yield a page that says "closed" without its close
event: a follower of the history (``chronicle workflow show --follow``) stops on the status
and would never print the close.
"""

from __future__ import annotations

import json

import pytest

from executions.lane import HistoryRead
from executions.lane_bodies import HistoryParams
from history import kernel
from history.models import ExecutionStatus
from tests.factories import ExecutionFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_closed_between_the_events_and_the_status_is_read_with_its_close() -> None:
    run = ExecutionFactory()
    read = HistoryRead(run, HistoryParams(), [])
    assert read.look()
    assert read.execution.status == ExecutionStatus.RUNNING

    kernel.terminate_workflow_execution(
        run.namespace, workflow_id=run.workflow_id, run_id=None, reason="done"
    )
    page = json.loads(read._page().body)

    assert page["status"] == ExecutionStatus.TERMINATED
    assert page["events"][-1]["event_type"] == "WorkflowExecutionTerminated"


def test_a_run_still_open_keeps_the_events_it_read() -> None:
    run = ExecutionFactory()
    read = HistoryRead(run, HistoryParams(), [])
    read.look()
    page = json.loads(read._page().body)
    assert page["status"] == ExecutionStatus.RUNNING
    assert [e["event_type"] for e in page["events"]] == [e["event_type"] for e in read.events]
