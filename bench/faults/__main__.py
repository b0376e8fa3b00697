"""``python -m bench.faults``: a fault run, then the planted-bug run; a table; exit 0 iff both hold."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sdk.client import Client

from .checker import Totals, check
from .load import Ledger, Load
from .nemesis import FAULTS, TITLES, FaultStats, Nemesis, RangeSampler
from .stack import (
    FAKETIME_LIB,
    NAMESPACE,
    Cluster,
    Stack,
    create_database,
    drop_database,
    private_cluster_unavailable,
    run_name,
)

DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432/postgres"
PLANTED_RATE = 0.3


def log(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Outcome:
    """One run's figures: what the nemesis did, what the checker found."""

    seed: int
    cluster: str
    faults: dict[str, FaultStats] = field(default_factory=dict)
    totals: Totals = field(default_factory=Totals)
    skipped: list[str] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def held(self) -> bool:
        """The data checks passed, every fault recovered, and no process died on its own."""
        recovered = all(stats.survived == stats.injected for stats in self.faults.values())
        return self.totals.passed and recovered and not self.exits


async def drive(stack: Stack, cluster: Cluster | None, options: argparse.Namespace, outcome: Outcome) -> None:
    rng = random.Random(options.seed)
    client = await Client.connect(stack.url, namespace=NAMESPACE, api_key=stack.key)
    ledger = Ledger(stack.run_dir / "ledger.jsonl")
    load = Load(client, ledger, random.Random(rng.random()), f"s{options.seed}")
    sampler = RangeSampler(stack.db_url)
    stop, sampling = asyncio.Event(), asyncio.Event()
    sampler_task = asyncio.create_task(sampler.run(sampling))
    load_task = asyncio.create_task(load.run(stop, options.rate, options.concurrency))
    if options.planted:
        await asyncio.sleep(options.load_seconds)
        stop.set()
    else:
        nemesis = Nemesis(stack, client, cluster, random.Random(rng.random()), load, options.only)
        log(f"nemesis: {options.rounds} round(s) of {', '.join(nemesis.kinds())}")
        await nemesis.run(options.rounds, stop)
        outcome.faults = nemesis.stats
        outcome.exits = nemesis.exits
    await load_task
    log(f"load stopped after {len(ledger.ops)} operations; draining (up to {options.drain:.0f} s)")
    loop = asyncio.get_running_loop()
    still_open = await load.drain(loop.time() + options.drain)
    log(f"drained; {len(still_open)} workflow(s) still open; checking")
    sampling.set()
    await sampler_task
    totals = outcome.totals
    totals.range_samples, totals.range_bumps = sampler.samples, sampler.bumps
    for regression in sampler.regressions:
        totals.flag("range_regressions", regression)
    await check(client, ledger, totals, stack.effects)
    await client.close()


def run_once(options: argparse.Namespace) -> Outcome:
    """One stack, one database of its own, from start to teardown."""
    began = time.monotonic()
    run_dir = Path(tempfile.mkdtemp(prefix="chronicle-faults-"))
    os.chmod(run_dir, 0o755)
    reason = private_cluster_unavailable()
    use_private = options.cluster == "private" or (options.cluster == "auto" and reason is None)
    cluster: Cluster | None = Cluster(run_dir / "cluster") if use_private else None
    outcome = Outcome(options.seed, "private" if cluster else "shared")
    if cluster is None:
        why = reason or "shared server asked for"
        outcome.skipped.append(f"pg_restart, conn_exhaust: no throwaway cluster ({why})")
    server = cluster.url if cluster else options.server
    name = run_name(options.seed)
    stack: Stack | None = None
    try:
        if cluster is not None:
            cluster.create()
        log(f"{'planted-bug' if options.planted else 'fault'} run in {run_dir}, database {name}")
        db_url = create_database(server, name)
        fake_clock = options.clock and not options.planted
        stack = Stack(
            db_url, run_dir, planted_bug=PLANTED_RATE if options.planted else 0.0, fake_clock=fake_clock
        )
        stack.start()
        asyncio.run(drive(stack, cluster, options, outcome))
    finally:
        if stack is not None:
            stack.stop()
        if cluster is not None:
            with contextlib.suppress(subprocess.CalledProcessError):  # it may never have started
                cluster.stop("immediate")
        else:
            drop_database(server, name)
        outcome.seconds = round(time.monotonic() - began, 1)
        if options.keep or not (outcome.held or options.planted):
            log(f"kept {run_dir} (logs, ledger, nemesis log)")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    return outcome


def planted_caught(planted: Outcome) -> bool:
    """The planted bug loses acknowledged signals: caught means the checker reports them lost."""
    return planted.totals.lost > 0


def table(fault_run: Outcome | None, planted: Outcome | None) -> str:
    lines: list[str] = []
    if fault_run is not None:
        t = fault_run.totals
        lines += [
            f"fault run: seed {fault_run.seed}, {fault_run.cluster} cluster, {fault_run.seconds:.0f} s",
            "",
        ]
        lines += [f"{'fault':<40} {'injected':>8} {'survived':>8}"]
        for name, stats in fault_run.faults.items():
            lines.append(f"{TITLES[name]:<40} {stats.injected:>8} {stats.survived:>8}")
            if stats.worst:
                lines.append("  worst: " + ", ".join(f"{k} {v:.10g}" for k, v in stats.worst.items()))
            lines += [f"  {note}" for note in sorted(set(stats.notes))[:5]]
        lines += [f"skipped: {s}" for s in fault_run.skipped]
        lines += [f"process exited by itself (restarted): {e}" for e in fault_run.exits]
        rows = [
            (
                "operations accepted (2xx)",
                f"{t.accepted} ({t.starts_accepted} starts, {t.signals_accepted} signals)",
            ),
            ("operations refused (4xx)", t.refused),
            ("unknown outcomes", f"{t.unknown_applied} applied, {t.unknown_not_applied} not applied"),
            ("lost", t.lost),
            ("duplicated", t.duplicated),
            ("unexpected", t.unexpected),
            ("histories gap-checked", f"{t.histories} ({t.gap_errors} malformed)"),
            ("histories replayed", f"{t.replayed} ({t.replay_failures} failures)"),
            ("timers checked", f"{t.timers_checked} ({t.timer_errors} not fired exactly once)"),
            ("activities checked", f"{t.activities_checked} ({t.activity_errors} not closed exactly once)"),
            (
                "activity executions (at least once)",
                f"{t.executions_begun} begun, {t.executions_ended} ended, {t.activities_completed} completed",
            ),
            (
                "range_id samples",
                f"{t.range_samples} ({t.range_bumps} takeovers seen, {t.range_regressions} regressions)",
            ),
            ("event times going back", t.time_regressions),
            ("signals out of acknowledgement order", t.order_errors),
            (
                "nondeterminism failures",
                f"{t.nondeterminism_failures} in the deploy's runs, {t.nondeterminism_unexpected} elsewhere",
            ),
            ("runs stuck after drain", t.stuck),
        ]
        lines += ["", *(f"{label:<40} {value}" for label, value in rows)]
        lines += [f"  {a}" for a in t.anomalies[:20]]
    if planted is not None:
        caught = planted_caught(planted)
        lines += [
            "",
            f"planted bug (2xx before a rolled-back signal commit, p={PLANTED_RATE}): "
            f"{'caught' if caught else 'NOT CAUGHT'} ({planted.totals.lost} lost, "
            f"{planted.totals.signals_accepted} signals accepted)",
        ]
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=10, help="each fault this many times")
    parser.add_argument("--rate", type=float, default=2.0, help="workflow starts per second")
    parser.add_argument("--concurrency", type=int, default=24, help="workflow scripts at once")
    parser.add_argument("--drain", type=float, default=120.0, help="seconds for the load to drain")
    parser.add_argument("--cluster", choices=("auto", "private", "shared"), default="auto")
    parser.add_argument("--server", default=os.environ.get("FAULTS_SERVER_URL", DEFAULT_SERVER))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--planted-bug", dest="only_planted", action="store_true", help="only the planted-bug run"
    )
    mode.add_argument("--no-planted-bug", dest="skip_planted", action="store_true")
    parser.add_argument(
        "--only",
        type=lambda v: [k for k in v.split(",") if k],
        default=None,
        help=f"inject only these faults (comma-separated: {','.join(FAULTS)})",
    )
    parser.add_argument(
        "--clock",
        action="store_true",
        help="run one shard owner under libfaketime and add the clock_jump fault (apt-get install faketime)",
    )
    parser.add_argument("--load-seconds", type=float, default=20.0, help="planted-bug run's load")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    options = parser.parse_args(argv)
    options.planted = False
    if options.clock and not FAKETIME_LIB.exists():
        parser.error(f"--clock needs libfaketime at {FAKETIME_LIB} (apt-get install faketime)")
    return options


def main(argv: list[str]) -> int:
    options = parse(argv)
    fault_run = planted = None
    if not options.only_planted:
        fault_run = run_once(options)
    if not options.skip_planted:
        planted_options = argparse.Namespace(
            **{**vars(options), "planted": True, "drain": min(options.drain, 30.0)}
        )
        planted = run_once(planted_options)
    print(table(fault_run, planted))
    report: dict[str, Any] = {}
    if fault_run is not None:
        report["fault_run"] = {**asdict(fault_run), "passed": fault_run.totals.passed, "held": fault_run.held}
    if planted is not None:
        report["planted"] = {**asdict(planted), "caught": planted_caught(planted)}
    if options.json is not None:
        options.json.write_text(json.dumps(report, indent=2))
    ok = (fault_run is None or fault_run.held) and (planted is None or planted_caught(planted))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
