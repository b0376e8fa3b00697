"""What the soak checks once its load has stopped, read from the database.

Each ``Soak`` run returns the tokens of the signals it saw and how late its sleep woke
(bench/soak_workflow.py), so one read of the runs' rows checks every acknowledged start
and signal: an acknowledged start has one completed run; an acknowledged signal's token
is in its run's result exactly once; no token is there that was never sent. Two
statements over the histories check that every history is gapless from event 1 and that
every completed run's timer fired exactly once.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Any

import psycopg

# ``history.models.ExecutionStatus``'s values, as the rows hold them.
RUNNING, COMPLETED = "Running", "Completed"
RUNS = "SELECT workflow_id, status, result FROM history_workflowexecution WHERE workflow_type = 'Soak'"
STILL_RUNNING = (
    f"SELECT count(*) FROM history_workflowexecution WHERE workflow_type = 'Soak' AND status = '{RUNNING}'"
)
# Histories whose ids are not 1..n (a gap, a repeat, or not starting at 1).
MALFORMED = (
    "SELECT count(*) FROM (SELECT h.run_id FROM history_historyevent h "
    "JOIN history_workflowexecution e ON e.run_id = h.run_id AND e.workflow_type = 'Soak' "
    "GROUP BY h.run_id HAVING min(h.event_id) <> 1 OR max(h.event_id) <> count(*)) AS bad"
)
# Completed runs whose sleep did not fire exactly once.
TIMERS_NOT_ONCE = (
    "SELECT count(*) FROM (SELECT e.run_id FROM history_workflowexecution e "
    "LEFT JOIN history_historyevent h ON h.run_id = e.run_id AND h.event_type = 'TimerFired' "
    f"WHERE e.workflow_type = 'Soak' AND e.status = '{COMPLETED}' "
    "GROUP BY e.run_id HAVING count(h.event_id) <> 1) AS bad"
)


@dataclass
class CheckTotals:
    """The checks' counts: everything but ``runs``, ``starts_ok`` and ``signals_ok`` must be 0."""

    runs: int = 0
    starts_ok: int = 0
    signals_ok: int = 0
    lost_starts: int = 0  # acknowledged, with no run
    not_completed: int = 0  # acknowledged, with a run that did not complete
    duplicated_starts: int = 0  # more than one run for one workflow id
    refused_but_applied: int = 0  # a 4xx start that has a run
    lost_signals: int = 0  # acknowledged, not in the run's result
    duplicated_signals: int = 0  # in a result more than once
    unexpected_signals: int = 0  # in a result, never sent
    stuck: int = 0  # still running after the drain
    malformed_histories: int = 0
    timers_not_once: int = 0

    @property
    def passed(self) -> bool:
        counts = asdict(self)
        return all(v == 0 for k, v in counts.items() if k not in ("runs", "starts_ok", "signals_ok"))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _scalar(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _result(raw: Any) -> dict[str, Any]:
    """The run's returned value: the first payload's JSON data."""
    if isinstance(raw, list) and raw and isinstance(raw[0], dict) and isinstance(raw[0].get("data"), dict):
        return dict(raw[0]["data"])
    return {}


def wait_until_closed(conn: psycopg.Connection[Any], seconds: float) -> int:
    """Wait up to ``seconds`` for every Soak run to close; the number still running."""
    deadline = time.monotonic() + seconds
    running = _scalar(conn, STILL_RUNNING)
    while running and time.monotonic() < deadline:
        time.sleep(2.0)
        running = _scalar(conn, STILL_RUNNING)
    return running


Row = tuple[str, str, Any]  # a Soak run: workflow id, status, result


def read_runs(dburl: str) -> list[Row]:
    with psycopg.connect(dburl, autocommit=True) as conn:
        return [(str(w), str(s), r) for w, s, r in conn.execute(RUNS).fetchall()]


def check_runs(
    dburl: str, starts: dict[str, str], signals: dict[str, tuple[str, str]], drain: float
) -> CheckTotals:
    """Wait for the runs to close, then judge every acknowledged start and signal by them
    and count the malformed histories and the timers not fired once."""
    with psycopg.connect(dburl, autocommit=True) as conn:
        stuck = wait_until_closed(conn, drain)
        malformed = _scalar(conn, MALFORMED)
        timers_not_once = _scalar(conn, TIMERS_NOT_ONCE)
    totals = judge(read_runs(dburl), starts, signals)
    totals.stuck, totals.malformed_histories, totals.timers_not_once = stuck, malformed, timers_not_once
    return totals


def judge(rows: list[Row], starts: dict[str, str], signals: dict[str, tuple[str, str]]) -> CheckTotals:
    """Every acknowledged start and signal against the runs ``rows`` describe."""
    totals = CheckTotals(runs=len(rows))
    runs_of = Counter(wid for wid, _, _ in rows)
    totals.duplicated_starts = sum(1 for n in runs_of.values() if n > 1)
    completed = {wid: _result(result) for wid, status, result in rows if status == COMPLETED}
    for wid, outcome in starts.items():
        if outcome == "ok":
            totals.starts_ok += 1
            totals.lost_starts += int(runs_of[wid] == 0)
            totals.not_completed += int(runs_of[wid] > 0 and wid not in completed)
        elif outcome == "failed":
            totals.refused_but_applied += int(runs_of[wid] > 0)
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    for wid, result in completed.items():
        seen[wid].update(str(t) for t in result.get("tokens") or [])
    for token, (wid, outcome) in signals.items():
        if outcome == "ok":
            totals.signals_ok += 1
            totals.lost_signals += int(seen[wid][token] == 0 and wid in completed)
    for wid, tokens in seen.items():
        totals.duplicated_signals += sum(1 for n in tokens.values() if n > 1)
        totals.unexpected_signals += sum(1 for t in tokens if t not in signals or signals[t][0] != wid)
    return totals


def lateness_by_minute(rows: list[Row], dues: dict[str, float], minutes: int) -> list[list[float]]:
    """The sleeps' lateness (ms) of the completed runs, by the minute of the load they were due in."""
    by_minute: list[list[float]] = [[] for _ in range(minutes)]
    if not dues:
        return by_minute
    first = min(dues.values())
    for wid, status, result in rows:
        lateness = _result(result).get("lateness")
        if status == COMPLETED and wid in dues and isinstance(lateness, int | float):
            by_minute[min(minutes - 1, int((dues[wid] - first) // 60))].append(lateness * 1000.0)
    return by_minute
