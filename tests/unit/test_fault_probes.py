"""The fault harness's newer checks and probe figures, each fed a small made-up case.

The checker must report a signal recorded before one acknowledged earlier, an event time
going back, and a nondeterminism failure outside the deploy's own runs; the payload probe's
sizes must land just under and just over the limit as the server counts it; the LISTEN
probe must read pickup and timer lateness from a history's times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.faults.checker import Run, Totals, check_ledger, check_shape, order_violations
from bench.faults.faults_data import fit, payload_size
from bench.faults.faults_db import wakeups
from bench.faults.load import Ledger, Op
from sdk._runtime.replayer import WorkflowHistory
from sdk.converter import DataConverter

CONVERTER = DataConverter()
NONDETERMINISM = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"


def event(event_id: int, event_type: str, at: str = "", **attributes: Any) -> dict[str, Any]:
    stamp = f"2030-01-01T00:00:{at}+00:00" if at else ""
    return {"event_id": event_id, "event_type": event_type, "event_time": stamp, "attributes": attributes}


def signalled(event_id: int, token: str) -> dict[str, Any]:
    payloads = CONVERTER.to_payloads([token])
    return event(event_id, "WorkflowExecutionSignaled", signal_name="token", input=payloads)


def shape(events: list[dict[str, Any]], workflow_id: str = "w") -> Totals:
    totals = Totals()
    check_shape(Run(workflow_id, "r1", "COMPLETED", events, WorkflowHistory(workflow_id)), totals)
    return totals


def test_concurrent_signals_may_land_in_any_order() -> None:
    # (event id, sent, acknowledged): the second was sent before the first was answered.
    assert order_violations([(5, 1.0, 3.0), (4, 2.0, 4.0)]) == 0


def test_a_signal_recorded_before_one_acknowledged_earlier_is_out_of_order(tmp_path: Path) -> None:
    book = Ledger(tmp_path / "ledger.jsonl")
    book.record(Op("start", "w", "req-w", "ok", "r1"))
    book.record(Op("signal", "w", "tok-a", "ok", at=2.0, sent=1.0))
    book.record(Op("signal", "w", "tok-b", "ok", at=4.0, sent=3.0))  # sent after tok-a's answer
    events = [
        event(1, "WorkflowExecutionStarted", request_id="req-w"),
        signalled(2, "tok-b"),
        signalled(3, "tok-a"),
        event(4, "WorkflowExecutionCompleted"),
    ]
    totals = Totals()
    check_ledger(book, [Run("w", "r1", "COMPLETED", events, WorkflowHistory("w"))], CONVERTER, totals)

    assert totals.order_errors == 1 and not totals.passed
    assert order_violations([(3, 1.0, 2.0), (2, 3.0, 4.0)]) == 1


def test_an_event_time_going_back_is_reported() -> None:
    events = [
        event(1, "WorkflowExecutionStarted", "01"),
        event(2, "TimerStarted", "05", timer_id="1"),
        event(3, "TimerFired", "03", timer_id="1"),
        event(4, "WorkflowExecutionCompleted", "06"),
    ]

    assert shape(events).time_regressions == 1


def test_a_nondeterminism_failure_counts_only_in_the_deploy_runs() -> None:
    events = [
        event(1, "WorkflowExecutionStarted", "01"),
        event(2, "WorkflowTaskFailed", "02", cause=NONDETERMINISM),
        event(3, "WorkflowExecutionCompleted", "03"),
    ]

    deploy = shape(events, "s7-deploy-3")
    assert (deploy.nondeterminism_failures, deploy.nondeterminism_unexpected) == (1, 0)
    elsewhere = shape(events, "s7-12")
    assert elsewhere.nondeterminism_unexpected == 1 and not elsewhere.passed


def test_payload_sizes_land_just_under_and_just_over_the_limit() -> None:
    limit = 4096
    blob = "ab" * limit

    def size(n: int) -> int:
        return payload_size(CONVERTER.to_payloads([blob[:n]]))

    under, over = fit(size, limit - 256), fit(size, limit + 64)
    assert limit - 260 < size(under) <= limit - 256 < size(under + 1)
    assert limit < size(over) <= limit + 64


def test_the_listen_probe_reads_pickup_and_timer_lateness() -> None:
    events = [
        event(1, "WorkflowExecutionStarted", "00"),
        event(2, "WorkflowTaskScheduled", "00"),
        event(3, "WorkflowTaskStarted", "01.200000"),
        event(4, "TimerStarted", "01.300000"),
        event(5, "TimerFired", "02.500000"),
        event(6, "WorkflowTaskScheduled", "02.500000"),
        event(7, "WorkflowTaskStarted", "02.600000"),
    ]

    figures = wakeups(events)
    assert round(figures["task pickup s"], 2) == 1.2
    assert round(figures["timer late s"], 2) == 0.7
