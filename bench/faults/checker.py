"""The history checker: run after the load drains, over every operation the ledger holds.

It reads every run of the harness's namespace through the public API (list, then each
run's history) and checks, Jepsen-style:

* **lost**: an acknowledged (2xx) start whose run is missing, or whose chain has no run
  started with its request id; an acknowledged signal whose token is in no
  ``WorkflowExecutionSignaled`` event of its workflow's runs;
* **duplicated**: a workflow id started more than once (two chain heads), a token
  signalled more than once, an activity closed twice, a timer fired twice;
* **unexpected**: a token in a history that the ledger never attempted, or that was
  refused with a 4xx (a refusal must mean "not applied");
* unknown operations are resolved as applied once or not applied, and counted;
* event ids are exactly 1..N, event 1 is ``WorkflowExecutionStarted``, a closed run's
  last event closes it;
* every closed run replays through the SDK's ``Replayer`` without nondeterminism (a
  workflow task the bad deploy failed for nondeterminism is counted, and allowed only in
  the deploy's own runs: those completed on the good code, which replays them);
* a history's event times never go backwards;
* signals on one run are recorded in acknowledgement order: one acknowledged before
  another was sent has the lower event id;
* every user timer of a completed run was fired (or cancelled) exactly once, every
  activity closed exactly once;
* shard ``range_id`` never went down while sampled (:class:`~bench.faults.nemesis.RangeSampler`);
* no run is still open after the drain.

Each operation's verdict is also counted under the phase it was invoked in
(``Totals.by_phase``: accepted, lost, duplicated, unknown), so a run of several kinds of
fault can say which one lost or doubled what.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sdk._runtime.replayer import WorkflowHistory
from sdk.client import Client
from sdk.converter import DataConverter
from sdk.worker import Replayer

from .load import Ledger, Op
from .workflows import BLOB_SIGNAL, FINISH_SIGNAL, TOKEN_SIGNAL, WORKFLOWS

CLOSES_ACTIVITY = {
    "ActivityTaskCompleted",
    "ActivityTaskFailed",
    "ActivityTaskTimedOut",
    "ActivityTaskCanceled",
}
CLOSES_TIMER = {"TimerFired", "TimerCanceled"}
NONDETERMINISM = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
DEPLOY_RUNS = "-deploy-"  # in the id of every run the nondeterministic-deploy fault starts
CLOSES_RUN = {
    "WorkflowExecutionCompleted",
    "WorkflowExecutionFailed",
    "WorkflowExecutionTimedOut",
    "WorkflowExecutionCanceled",
    "WorkflowExecutionTerminated",
    "WorkflowExecutionContinuedAsNew",
}


@dataclass
class Totals:
    starts_accepted: int = 0
    signals_accepted: int = 0
    refused: int = 0
    unknown_applied: int = 0
    unknown_not_applied: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    histories: int = 0
    gap_errors: int = 0
    replayed: int = 0
    replay_failures: int = 0
    timers_checked: int = 0
    timer_errors: int = 0
    activities_checked: int = 0
    activities_completed: int = 0
    executions_begun: int = 0  # physical attempts, from the workers' effect ledger
    executions_ended: int = 0
    activity_errors: int = 0
    range_samples: int = 0
    range_bumps: int = 0
    range_regressions: int = 0
    stuck: int = 0
    time_regressions: int = 0
    order_errors: int = 0
    nondeterminism_failures: int = 0  # in the deploy's runs, where they are the point
    nondeterminism_unexpected: int = 0
    anomalies: list[str] = field(default_factory=list)
    by_phase: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def accepted(self) -> int:
        return self.starts_accepted + self.signals_accepted

    @property
    def passed(self) -> bool:
        """Every check held, over a run that had something to check."""
        return self.accepted > 0 and not (
            self.lost
            or self.duplicated
            or self.unexpected
            or self.gap_errors
            or self.replay_failures
            or self.timer_errors
            or self.activity_errors
            or self.range_regressions
            or self.stuck
            or self.time_regressions
            or self.order_errors
            or self.nondeterminism_unexpected
        )

    def flag(self, counter: str, message: str) -> None:
        setattr(self, counter, getattr(self, counter) + 1)
        if len(self.anomalies) < 200:
            self.anomalies.append(f"{counter}: {message}")

    def count_phase(self, phase: str, verdict: str) -> None:
        """One more operation invoked during ``phase`` with ``verdict``."""
        counts = self.by_phase.setdefault(phase, {})
        counts[verdict] = counts.get(verdict, 0) + 1


@dataclass
class Run:
    workflow_id: str
    run_id: str
    status: str
    events: list[dict[str, Any]]
    history: WorkflowHistory

    def of(self, *types: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event_type"] in types]


async def fetch_runs(client: Client) -> list[Run]:
    """Every run of the namespace with its whole history, through the public API."""
    described = [d async for d in client.list_workflows()]
    gate = asyncio.Semaphore(8)

    async def one(wid: str, run_id: str, status: str) -> Run:
        async with gate:
            history = await client.get_workflow_handle(wid, run_id=run_id).fetch_history()
        return Run(wid, run_id, status, [event.to_wire() for event in history.events], history)

    return list(await asyncio.gather(*(one(d.workflow_id, d.run_id, d.status.name) for d in described)))


def check_shape(run: Run, totals: Totals) -> None:
    """Gapless ids from 1, a start first, a closed run's close last; timers and activities once."""
    totals.histories += 1
    ids = [int(e["event_id"]) for e in run.events]
    if ids != list(range(1, len(ids) + 1)):
        totals.flag("gap_errors", f"{run.workflow_id}/{run.run_id}: event ids {ids[:5]}... not 1..{len(ids)}")
    if not run.events or run.events[0]["event_type"] != "WorkflowExecutionStarted":
        totals.flag("gap_errors", f"{run.workflow_id}/{run.run_id}: does not begin with its start")
    closes = [i for i, e in enumerate(run.events) if e["event_type"] in CLOSES_RUN]
    if run.status != "RUNNING" and closes != [len(run.events) - 1]:
        totals.flag("gap_errors", f"{run.workflow_id}/{run.run_id}: close events at {closes}")
    stamps = [datetime.fromisoformat(str(e["event_time"])) for e in run.events if e.get("event_time")]
    backwards = [i + 1 for i in range(1, len(stamps)) if stamps[i] < stamps[i - 1]]
    if backwards:
        totals.flag(
            "time_regressions", f"{run.workflow_id}/{run.run_id}: event time back at ids {backwards[:5]}"
        )
    for failed in run.of("WorkflowTaskFailed"):
        if failed["attributes"].get("cause") != NONDETERMINISM:
            continue
        if DEPLOY_RUNS in run.workflow_id:
            totals.nondeterminism_failures += 1
        else:
            totals.flag(
                "nondeterminism_unexpected", f"{run.workflow_id}/{run.run_id}: event {failed['event_id']}"
            )
    completed = run.status == "COMPLETED"
    fired = Counter(str(e["attributes"].get("timer_id")) for e in run.of(*CLOSES_TIMER))
    for started in run.of("TimerStarted"):
        totals.timers_checked += 1
        times = fired[str(started["attributes"].get("timer_id"))]
        if times > 1 or (completed and times != 1):
            totals.flag(
                "timer_errors",
                f"{run.workflow_id}/{run.run_id}: timer {started['attributes']} closed {times}x",
            )
    closed = Counter(int(e["attributes"].get("scheduled_event_id") or 0) for e in run.of(*CLOSES_ACTIVITY))
    totals.activities_completed += len(run.of("ActivityTaskCompleted"))
    for scheduled in run.of("ActivityTaskScheduled"):
        totals.activities_checked += 1
        times = closed[int(scheduled["event_id"])]
        if times > 1 or (completed and times != 1):
            totals.flag(
                "activity_errors",
                f"{run.workflow_id}/{run.run_id}: activity {scheduled['event_id']} closed {times}x",
            )


def check_replay(runs: list[Run], totals: Totals) -> None:
    replayer = Replayer(workflows=WORKFLOWS)
    for run in runs:
        if run.status == "RUNNING":
            continue
        failure = replayer.replay_workflow(run.history, raise_on_replay_failure=False).replay_failure
        totals.replayed += 1
        if failure is not None:
            totals.flag("replay_failures", f"{run.workflow_id}/{run.run_id}: {failure!r}"[:300])


def resolve(op: Op, applied: bool, what: str, totals: Totals) -> None:
    """Judge one operation by whether the histories show it applied."""
    if op.outcome == "ok":
        totals.count_phase(op.phase, "accepted")
        if not applied:
            totals.flag("lost", f"{what} acknowledged, not in any history")
            totals.count_phase(op.phase, "lost")
    elif op.outcome == "unknown":
        totals.count_phase(op.phase, "unknown")
        if applied:
            totals.unknown_applied += 1
        else:
            totals.unknown_not_applied += 1
    else:
        totals.refused += 1
        if applied:
            totals.flag("unexpected", f"{what} refused ({op.detail}) but applied")


def check_ledger(ledger: Ledger, runs: list[Run], converter: DataConverter, totals: Totals) -> None:
    by_wid: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_wid[run.workflow_id].append(run)
    for op in ledger.of("start"):
        chain = by_wid.get(op.workflow_id, [])
        heads = [r for r in chain if not r.events[0]["attributes"].get("continued_execution_run_id")]
        mine = [r for r in heads if r.events[0]["attributes"].get("request_id") == op.key]
        if len(heads) > 1:
            totals.flag("duplicated", f"start {op.workflow_id}: {len(heads)} runs started")
            totals.count_phase(op.phase, "duplicated")
        totals.starts_accepted += op.outcome == "ok"
        same_run = op.outcome != "ok" or op.run_id in {r.run_id for r in chain}
        resolve(op, bool(mine) and same_run, f"start {op.workflow_id} ({op.run_id})", totals)
    seen: Counter[str] = Counter()
    placed: dict[str, tuple[str, int]] = {}  # token key -> (run id, event id) of its first event
    for run in runs:
        for event in run.of("WorkflowExecutionSignaled"):
            attributes = event["attributes"]
            if attributes.get("signal_name") not in (TOKEN_SIGNAL, FINISH_SIGNAL, BLOB_SIGNAL):
                continue
            values = converter.from_payloads(attributes.get("input") or [])
            key = f"{run.workflow_id}|{values[0] if values else ''}"
            seen[key] += 1
            placed.setdefault(key, (run.run_id, int(event["event_id"])))
    attempted: set[str] = set()
    per_run: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for op in ledger.of("signal"):
        key = f"{op.workflow_id}|{op.key}"
        attempted.add(key)
        count = seen[key]
        if count > 1:
            totals.flag("duplicated", f"signal {op.key} to {op.workflow_id} applied {count}x")
            totals.count_phase(op.phase, "duplicated")
        totals.signals_accepted += op.outcome == "ok"
        resolve(op, count > 0, f"signal {op.key} to {op.workflow_id}", totals)
        if op.outcome == "ok" and key in placed and op.sent:
            run_id, event_id = placed[key]
            per_run[run_id].append((event_id, op.sent, op.at))
    for key in seen.keys() - attempted:
        totals.flag("unexpected", f"signal {key} in a history, never attempted")
    for run_id, signals in per_run.items():
        if violations := order_violations(signals):
            totals.flag(
                "order_errors", f"run {run_id}: {violations} signal(s) before one acknowledged earlier"
            )


def order_violations(signals: list[tuple[int, float, float]]) -> int:
    """How many of one run's acknowledged signals, ``(event id, sent, acknowledged)``, were
    recorded before a signal whose acknowledgement came before they were even sent."""
    violations = 0
    earliest_ack_above = float("inf")  # over the signals with a higher event id
    for _, sent, acknowledged in sorted(signals, reverse=True):
        if earliest_ack_above < sent:
            violations += 1
        earliest_ack_above = min(earliest_ack_above, acknowledged)
    return violations


def count_executions(effects: Path, totals: Totals) -> None:
    """Physical activity attempts against logical completions: at least once, more after a kill."""
    if not effects.exists():
        return
    phases = Counter(json.loads(line)["phase"] for line in effects.read_text(encoding="utf-8").splitlines())
    totals.executions_begun, totals.executions_ended = phases["begin"], phases["end"]


async def check(
    client: Client,
    ledger: Ledger,
    totals: Totals,
    effects: Path | None = None,
    keep: list[Run] | None = None,
) -> Totals:
    """Fill ``totals`` from the namespace's histories (``totals`` may hold the sampler's
    figures); the runs read are added to ``keep`` when given (for timings of their events)."""
    if effects is not None:
        count_executions(effects, totals)
    runs = await fetch_runs(client)
    if keep is not None:
        keep.extend(runs)
    for run in runs:
        check_shape(run, totals)
        if run.status == "RUNNING":
            totals.flag("stuck", f"{run.workflow_id}/{run.run_id} still open after the drain")
    check_replay(runs, totals)
    check_ledger(ledger, runs, client.data_converter, totals)
    return totals
