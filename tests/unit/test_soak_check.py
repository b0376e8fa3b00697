"""The soak's judge finds each anomaly planted in a few made-up runs.

A judge that passes everything proves nothing; these feed it one fault at a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.soak_check import COMPLETED, RUNNING, CheckTotals, Row, judge, lateness_by_minute


def result(*tokens: str, lateness: float = 0.05) -> list[dict[str, Any]]:
    return [{"data": {"lateness": lateness, "tokens": list(tokens)}, "metadata": {"encoding": "json/plain"}}]


def healthy() -> tuple[list[Row], dict[str, str], dict[str, tuple[str, str]]]:
    rows: list[Row] = [("soak-1", COMPLETED, result("soak-1.0", "soak-1.1"))]
    starts = {"soak-1": "ok"}
    signals = {"soak-1.0": ("soak-1", "ok"), "soak-1.1": ("soak-1", "ok")}
    return rows, starts, signals


def anomalies(totals: CheckTotals) -> dict[str, int]:
    counts = totals.as_dict()
    return {k: v for k, v in counts.items() if v and k not in ("runs", "starts_ok", "signals_ok")}


def test_a_healthy_run_passes() -> None:
    totals = judge(*healthy())
    assert totals.passed
    assert (totals.runs, totals.starts_ok, totals.signals_ok) == (1, 1, 2)


@pytest.mark.parametrize(
    ("plant", "found"),
    [
        ("lost start", {"lost_starts": 1}),
        ("second run", {"duplicated_starts": 1}),
        ("refused start applied", {"refused_but_applied": 1}),
        ("not completed", {"not_completed": 1}),
        ("lost signal", {"lost_signals": 1}),
        ("signal twice", {"duplicated_signals": 1}),
        ("signal never sent", {"unexpected_signals": 1}),
        ("signal of another run", {"unexpected_signals": 1}),
    ],
)
def test_each_anomaly_is_found(plant: str, found: dict[str, int]) -> None:
    rows, starts, signals = healthy()
    if plant == "lost start":
        starts["soak-2"] = "ok"
    elif plant == "second run":
        rows.append(("soak-1", RUNNING, None))
    elif plant == "refused start applied":
        starts["soak-2"] = "failed"
        rows.append(("soak-2", COMPLETED, result()))
    elif plant == "not completed":
        rows[0] = ("soak-1", RUNNING, None)
        signals.clear()
    elif plant == "lost signal":
        rows[0] = ("soak-1", COMPLETED, result("soak-1.0"))
    elif plant == "signal twice":
        rows[0] = ("soak-1", COMPLETED, result("soak-1.0", "soak-1.1", "soak-1.1"))
    elif plant == "signal never sent":
        rows[0] = ("soak-1", COMPLETED, result("soak-1.0", "soak-1.1", "soak-1.9"))
    else:
        starts["soak-2"] = "ok"
        rows.append(("soak-2", COMPLETED, result("soak-1.0")))
    totals = judge(rows, starts, signals)
    assert not totals.passed
    assert anomalies(totals) == found


def test_an_unknown_start_may_have_applied_or_not() -> None:
    rows, starts, signals = healthy()
    starts["soak-2"] = "unknown"
    starts["soak-3"] = "unknown"
    rows.append(("soak-2", COMPLETED, result()))
    assert judge(rows, starts, signals).passed


def test_lateness_goes_to_the_minute_its_sleep_was_due_in() -> None:
    rows: list[Row] = [
        ("a", COMPLETED, result(lateness=0.01)),
        ("b", COMPLETED, result(lateness=0.2)),
        ("c", RUNNING, None),
        ("d", COMPLETED, result(lateness=3.0)),
    ]
    dues = {"a": 1000.0, "b": 1059.0, "c": 1061.0, "d": 1500.0}
    assert lateness_by_minute(rows, dues, 2) == [[10.0, 200.0], [3000.0]]
