"""The fault run's figures: each round, the stalls it caused, and the table.

Two stalls per round, both "time without progress" while the fault and its repair lasted:

* **api**: the longest gap between two successful answers of the probe (a write through
  HAProxy every quarter second, never retried): what a client saw as an outage;
* **timer**: the latest a timer fired past its due time, over the timers due in the round:
  TimerStarted's time plus its duration against TimerFired's time, from the histories
  (a fire held back behind a workflow task in flight is left out: :func:`timer_lateness`).

Per kind of fault the table gives the rounds, the operations invoked during them and what
the checker found of those (accepted, lost, duplicated), and each stall's p50 and p99 over
the rounds (nearest rank: with five rounds the p99 is the worst round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import Any

from ..checker import Run, Totals

TITLES = {
    "pg_kill": "PostgreSQL primary killed (host SIGKILL)",
    "pg_cut": "PostgreSQL primary cut off (nftables)",
    "owner_cut": "shard owner cut off from PostgreSQL",
    "frontend_kill": "frontend host killed mid-request",
    "worker_kill": "worker host killed mid-activity",
}
BETWEEN = "between faults"
CLOSES_TASK = {"WorkflowTaskCompleted", "WorkflowTaskTimedOut", "WorkflowTaskFailed"}


@dataclass
class Round:
    kind: str
    index: int
    began: float = 0.0  # the fault injected (epoch seconds)
    recovered: float = 0.0  # the service (or the shards, the activities) back
    restored: float = 0.0  # the cluster whole again: the node rejoined, the host back
    survived: bool = False
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    api_stall: float = 0.0
    timer_stall: float = 0.0
    timers_due: int = 0


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ranked = sorted(values)
    return ranked[max(0, math.ceil(p / 100 * len(ranked)) - 1)]


def api_stall(answers: list[tuple[float, bool]], began: float, ended: float) -> float:
    """The longest time without a successful probe answer that overlaps [began, ended]."""
    oks = [t for t, ok in answers if ok]
    before = [t for t in oks if t < began]
    inside = [t for t in oks if began <= t <= ended]
    after = [t for t in oks if t > ended][:1]
    points = before[-1:] + inside + after
    if not points:
        return ended - began
    gaps = [b - a for a, b in pairwise(points)]
    if not after:
        gaps.append(ended - points[-1])
    return max(gaps, default=0.0)


def _epoch(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(str(value)).timestamp()


def timer_lateness(runs: list[Run]) -> list[tuple[float, float]]:
    """(due, seconds late) of every user timer that fired, from the histories.

    A timer that comes due while a workflow task of its run is in flight is fired then,
    but its TimerFired event waits in the run's buffer until that task closes, and is
    written with the close (the same moment): behind a task whose worker was killed, 10 s
    later, at the task's timeout. That is the worker's stall, not the timer's, and the
    event does not say when the timer fired: such timers are left out.
    """
    found: list[tuple[float, float]] = []
    for run in runs:
        started: dict[str, float] = {}
        task_started, closed_task = 0.0, (0.0, -1.0)  # the last task to close: (started, closed)
        for event in run.events:
            kind, attributes = event["event_type"], event.get("attributes") or {}
            at = _epoch(event["event_time"])
            timer = str(attributes.get("timer_id"))
            if kind == "WorkflowTaskStarted":
                task_started = at
            elif kind in CLOSES_TASK:
                closed_task = (task_started, at)
            elif kind == "TimerStarted":
                started[timer] = at + float(attributes.get("start_to_fire_timeout") or 0)
            elif kind == "TimerFired" and timer in started:
                due = started.pop(timer)
                if at == closed_task[1] and closed_task[0] < due:
                    continue  # buffered behind a task in flight when it came due
                found.append((due, at - due))
    return found


def fill_stalls(
    rounds: list[Round], answers: list[tuple[float, bool]], timers: list[tuple[float, float]]
) -> None:
    for one in rounds:
        one.api_stall = api_stall(answers, one.began, one.restored)
        late = [lateness for due, lateness in timers if one.began <= due <= one.restored]
        one.timers_due = len(late)
        one.timer_stall = max(late, default=0.0)


def table(rounds: list[Round], totals: Totals, seconds: float, seed: int) -> str:
    kinds = list(dict.fromkeys(r.kind for r in rounds))
    head = (
        f"{'fault':<42} {'rounds':>6} {'held':>4} {'accepted':>8} {'lost':>4} {'dup':>4} {'unknown':>7}"
        f" {'api stall p50 / p99':>20} {'timer stall p50 / p99':>22}"
    )
    lines = [f"cluster fault run: seed {seed}, {len(rounds)} faults, {seconds / 60:.1f} min", "", head]
    for kind in [*kinds, BETWEEN]:
        mine = [r for r in rounds if r.kind == kind]
        counts = totals.by_phase.get(kind, {})
        api = [r.api_stall for r in mine]
        timer = [r.timer_stall for r in mine]
        if mine:
            api_text = f"{percentile(api, 50):.1f} / {percentile(api, 99):.1f} s"
            timer_text = f"{percentile(timer, 50):.1f} / {percentile(timer, 99):.1f} s"
            rounds_text, held_text = str(len(mine)), str(sum(r.survived for r in mine))
        else:
            api_text = timer_text = rounds_text = held_text = "-"
        lines.append(
            f"{TITLES.get(kind, kind):<42} {rounds_text:>6} {held_text:>4}"
            f" {counts.get('accepted', 0):>8} {counts.get('lost', 0):>4} {counts.get('duplicated', 0):>4}"
            f" {counts.get('unknown', 0):>7} {api_text:>20} {timer_text:>22}"
        )
    lines += ["", "per fault (median / worst over its rounds):"]
    for kind in kinds:
        mine = [r for r in rounds if r.kind == kind]
        names = list(dict.fromkeys(name for r in mine for name in r.figures))
        parts = []
        for name in names:
            values = [r.figures[name] for r in mine if name in r.figures]
            parts.append(f"{name} {percentile(values, 50):.1f}/{max(values):.1f}")
        lines.append(f"  {kind}: {', '.join(parts) or '-'}")
        notes = sorted({note for r in mine for note in r.notes})
        lines += [f"    {note}" for note in notes[:6]]
    t = totals
    accepted = f"{t.accepted} ({t.starts_accepted} starts, {t.signals_accepted} signals)"
    executions = f"{t.executions_begun} begun, {t.executions_ended} ended, {t.activities_completed} completed"
    samples = f"{t.range_samples} ({t.range_bumps} takeovers seen, {t.range_regressions} regressions)"
    rows = [
        ("operations accepted (2xx)", accepted),
        ("unknown outcomes", f"{t.unknown_applied} applied, {t.unknown_not_applied} not applied"),
        ("lost / duplicated / unexpected", f"{t.lost} / {t.duplicated} / {t.unexpected}"),
        ("histories gap-checked", f"{t.histories} ({t.gap_errors} malformed)"),
        ("histories replayed", f"{t.replayed} ({t.replay_failures} failures)"),
        ("timers checked", f"{t.timers_checked} ({t.timer_errors} not fired exactly once)"),
        ("activities checked", f"{t.activities_checked} ({t.activity_errors} not closed exactly once)"),
        ("activity executions", executions),
        ("range_id samples", samples),
        ("runs stuck after drain", str(t.stuck)),
    ]
    lines += ["", *(f"{label:<34} {value}" for label, value in rows)]
    lines += [f"  {a}" for a in t.anomalies[:20]]
    return "\n".join(lines)
