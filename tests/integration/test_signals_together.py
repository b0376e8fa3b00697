"""Signals of several clients written in one transaction, each answered and written as it
would be alone (``history.kernel.signal_batches``)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from chronicle.errors import ErrorCode
from history import kernel
from history.kernel import signal_batches
from history.models import HistoryEvent, SignalRequest, WorkflowExecution
from namespaces.models import Namespace
from tests.factories import ExecutionFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _signal(namespace: Namespace, run: WorkflowExecution, value: Any, **fields: Any) -> kernel.SignalCall:
    return kernel.SignalCall(namespace, run.workflow_id, None, "poke", [value], **fields)


def _signals_of(run: WorkflowExecution) -> list[Any]:
    events = HistoryEvent.objects.filter(run=run, event_type="WorkflowExecutionSignaled").order_by("event_id")
    return [event.attributes["input"][0] for event in events]


def _gapless(run: WorkflowExecution) -> bool:
    ids = list(HistoryEvent.objects.filter(run=run).order_by("event_id").values_list("event_id", flat=True))
    return ids == list(range(1, len(ids) + 1))


def test_signals_to_several_runs_are_one_lock_one_write_and_one_commit() -> None:
    namespace = NamespaceFactory()
    runs = [ExecutionFactory(namespace=namespace) for _ in range(3)]
    with CaptureQueriesContext(connection) as captured:
        outcomes = kernel.signal_workflow_executions([_signal(namespace, r, i) for i, r in enumerate(runs)])
    assert outcomes == [None, None, None]
    assert [_signals_of(run) for run in runs] == [[0], [1], [2]]
    assert all(_gapless(run) for run in runs)
    locks = [q["sql"] for q in captured.captured_queries if "FOR UPDATE" in q["sql"]]
    assert len(locks) == 1, locks


def test_a_refused_signal_is_refused_alone_and_writes_nothing() -> None:
    namespace = NamespaceFactory(max_signals_per_execution=1)
    full, fine = ExecutionFactory(namespace=namespace), ExecutionFactory(namespace=namespace)
    kernel.signal_workflow_execution(
        namespace, workflow_id=full.workflow_id, run_id=None, signal_name="poke", input=["first"]
    )
    outcomes = kernel.signal_workflow_executions(
        [
            _signal(namespace, full, "over", request_id="r-over"),
            _signal(namespace, fine, "ok"),
            kernel.SignalCall(namespace, fine.workflow_id, None, "", ["no name"]),
        ]
    )
    assert outcomes[0] is not None and outcomes[0].code == ErrorCode.LIMIT_EXCEEDED
    assert outcomes[1] is None
    assert outcomes[2] is not None and outcomes[2].code == ErrorCode.INVALID_ARGUMENT
    assert _signals_of(full) == ["first"] and _signals_of(fine) == ["ok"]
    assert not SignalRequest.objects.filter(request_id="r-over").exists()


def test_missing_and_closed_runs_are_answered_as_alone() -> None:
    namespace = NamespaceFactory()
    open_run, closed = ExecutionFactory(namespace=namespace), ExecutionFactory(namespace=namespace)
    kernel.terminate_workflow_execution(namespace, workflow_id=closed.workflow_id, run_id=None, reason="done")
    outcomes = kernel.signal_workflow_executions(
        [
            kernel.SignalCall(namespace, "no-such-workflow", None, "poke", [1]),
            _signal(namespace, closed, 2),
            _signal(namespace, open_run, 3),
            kernel.SignalCall(namespace, open_run.workflow_id, "not-a-uuid", "poke", [4]),
        ]
    )
    codes = [outcome.code if outcome is not None else None for outcome in outcomes]
    assert codes == [ErrorCode.NOT_FOUND, ErrorCode.WORKFLOW_NOT_RUNNING, None, ErrorCode.INVALID_ARGUMENT]
    assert _signals_of(open_run) == [3] and _signals_of(closed) == []


def test_one_runs_signals_apply_in_order_and_a_repeated_request_id_once() -> None:
    namespace = NamespaceFactory()
    run = ExecutionFactory(namespace=namespace)
    outcomes = kernel.signal_workflow_executions(
        [
            _signal(namespace, run, "a", request_id="r1"),
            _signal(namespace, run, "b"),
            _signal(namespace, run, "a again", request_id="r1"),
            kernel.SignalCall(namespace, run.workflow_id, str(run.run_id), "poke", ["c"]),
        ]
    )
    assert outcomes == [None, None, None, None]
    assert _signals_of(run) == ["a", "b", "c"] and _gapless(run)
    run.refresh_from_db()
    assert run.signal_count == 3


def test_signals_of_other_namespaces_go_together_each_to_its_own_run() -> None:
    first, second = NamespaceFactory(), NamespaceFactory()
    mine = ExecutionFactory(namespace=first, workflow_id="same-id")
    theirs = ExecutionFactory(namespace=second, workflow_id="same-id")
    calls = [_signal(first, mine, "mine"), _signal(second, theirs, "theirs")]
    outcomes = kernel.signal_workflow_executions(calls)
    assert outcomes == [None, None]
    assert (_signals_of(mine), _signals_of(theirs)) == (["mine"], ["theirs"])


def test_a_batch_whose_write_fails_sends_each_signal_alone() -> None:
    namespace = NamespaceFactory()
    runs = [ExecutionFactory(namespace=namespace) for _ in range(2)]
    failing = mock.patch.object(signal_batches, "save_all", side_effect=DatabaseError("conflict"))
    with failing as save_all:
        outcomes = kernel.signal_workflow_executions([_signal(namespace, r, i) for i, r in enumerate(runs)])
    assert save_all.call_count == 1 and outcomes == [None, None]
    assert [_signals_of(run) for run in runs] == [[0], [1]]
    assert all(_gapless(run) for run in runs)
