"""The fault harness's history checker finds each anomaly planted in a small made-up history.

A checker that passes everything proves nothing; these feed it one fault at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.faults.checker import Run, Totals, check_ledger, check_shape
from bench.faults.load import Ledger, Op
from bench.faults.nemesis import RangeSampler
from sdk._runtime.replayer import WorkflowHistory
from sdk.converter import DataConverter

CONVERTER = DataConverter()


def event(event_id: int, event_type: str, **attributes: Any) -> dict[str, Any]:
    return {"event_id": event_id, "event_type": event_type, "attributes": attributes}


def signalled(event_id: int, token: str) -> dict[str, Any]:
    return event(
        event_id, "WorkflowExecutionSignaled", signal_name="token", input=CONVERTER.to_payloads([token])
    )


def run(events: list[dict[str, Any]], status: str = "COMPLETED") -> Run:
    return Run("w", "r1", status, events, WorkflowHistory("w"))


def healthy() -> list[dict[str, Any]]:
    return [
        event(1, "WorkflowExecutionStarted", request_id="req-w"),
        event(2, "TimerStarted", timer_id="1"),
        event(3, "TimerFired", timer_id="1"),
        event(4, "ActivityTaskScheduled"),
        event(5, "ActivityTaskCompleted", scheduled_event_id=4),
        signalled(6, "tok-1"),
        event(7, "WorkflowExecutionCompleted"),
    ]


def ledger(tmp_path: Path, *signals: tuple[str, str]) -> Ledger:
    book = Ledger(tmp_path / "ledger.jsonl")
    book.record(Op("start", "w", "req-w", "ok", "r1"))
    for token, outcome in signals:
        book.record(Op("signal", "w", token, outcome))
    return book


def checked(book: Ledger, events: list[dict[str, Any]], status: str = "COMPLETED") -> Totals:
    totals = Totals()
    runs = [run(events, status)]
    for one in runs:
        check_shape(one, totals)
    check_ledger(book, runs, CONVERTER, totals)
    return totals


def test_a_healthy_history_passes(tmp_path: Path) -> None:
    totals = checked(ledger(tmp_path, ("tok-1", "ok")), healthy())

    assert totals.passed, totals.anomalies
    assert (totals.starts_accepted, totals.signals_accepted, totals.timers_checked) == (1, 1, 1)


def test_an_acknowledged_signal_missing_is_lost(tmp_path: Path) -> None:
    totals = checked(ledger(tmp_path, ("tok-1", "ok"), ("tok-2", "ok")), healthy())

    assert totals.lost == 1 and not totals.passed


def test_an_acknowledged_start_without_its_run_is_lost(tmp_path: Path) -> None:
    book = ledger(tmp_path, ("tok-1", "ok"))
    book.record(Op("start", "w2", "req-w2", "ok", "r9"))

    assert checked(book, healthy()).lost == 1


@pytest.mark.parametrize(
    ("change", "counter"),
    [
        (lambda ev: [*ev[:6], signalled(7, "tok-1"), event(8, "WorkflowExecutionCompleted")], "duplicated"),
        (lambda ev: [*ev[:6], signalled(7, "tok-x"), event(8, "WorkflowExecutionCompleted")], "unexpected"),
        (lambda ev: [*ev[:2], *ev[3:]], "gap_errors"),
        (lambda ev: [*ev[:3], event(4, "TimerFired", timer_id="1"), *renumber(ev[3:], 5)], "timer_errors"),
        (
            lambda ev: [*ev[:5], event(6, "ActivityTaskFailed", scheduled_event_id=4), *renumber(ev[5:], 7)],
            "activity_errors",
        ),
    ],
)
def test_each_planted_anomaly_is_reported(tmp_path: Path, change: Any, counter: str) -> None:
    totals = checked(ledger(tmp_path, ("tok-1", "ok")), change(healthy()))

    assert getattr(totals, counter) >= 1, totals.anomalies
    assert not totals.passed


def test_a_refused_signal_that_applied_is_unexpected(tmp_path: Path) -> None:
    totals = checked(ledger(tmp_path, ("tok-1", "failed"), ("tok-2", "failed")), healthy())

    assert (totals.unexpected, totals.refused) == (1, 2)


def test_an_unknown_signal_is_resolved_either_way(tmp_path: Path) -> None:
    totals = checked(ledger(tmp_path, ("tok-1", "unknown"), ("tok-2", "unknown")), healthy())

    assert totals.passed
    assert (totals.unknown_applied, totals.unknown_not_applied) == (1, 1)


def test_a_lower_range_id_after_a_higher_one_is_a_regression() -> None:
    sampler = RangeSampler("unused")
    sampler.observe([(0, 3), (1, 5)])
    sampler.observe([(0, 4), (1, 5)])
    sampler.observe([(0, 2), (1, 5)])

    assert sampler.bumps == 1
    assert sampler.regressions == ["shard 0: range_id 2 after 4"]


def renumber(events: list[dict[str, Any]], first: int) -> list[dict[str, Any]]:
    return [{**e, "event_id": first + i} for i, e in enumerate(events)]
