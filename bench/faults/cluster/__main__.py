"""``python -m bench.faults.cluster``: faults across the hosts of the running cluster, under
load through HAProxy, then the history checker; a table; exit 0 iff everything held."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sdk.client import Client

from ..checker import Run, Totals, check
from ..load import Ledger, Load
from ..nemesis import RangeSampler
from ..stack import TASK_QUEUE
from . import control
from .control import DATABASE_URL, STATE, Probe, Workers, log, script
from .nemesis import KINDS, ClusterNemesis
from .report import BETWEEN, Round, fill_stalls, table, timer_lateness


async def drive(
    options: argparse.Namespace, info: dict[str, str], run_dir: Path
) -> tuple[list[Round], Totals]:
    rng = random.Random(options.seed)
    namespace = f"faults-{options.seed}-{secrets.token_hex(2)}"
    key = await asyncio.to_thread(control.make_namespace, namespace)
    log(f"namespace {namespace}; run directory {run_dir}")
    workers = Workers(info["url"], namespace, key, TASK_QUEUE, run_dir / "effects.jsonl", run_dir / "logs")
    workers.start()
    client = await Client.connect(info["url"], namespace=namespace, api_key=key)
    totals = Totals()
    try:
        ledger = Ledger(run_dir / "ledger.jsonl")
        load = Load(client, ledger, random.Random(rng.random()), f"c{options.seed}")
        load.phase = BETWEEN
        probe = Probe(info["url"], info["namespace"], info["api_key"], run_dir / "probe.jsonl")
        sampler = RangeSampler(DATABASE_URL)
        stop, stop_probe, sampling = asyncio.Event(), asyncio.Event(), asyncio.Event()
        background = [
            asyncio.create_task(probe.run(stop_probe)),
            asyncio.create_task(sampler.run(sampling)),
        ]
        load_task = asyncio.create_task(load.run(stop, options.rate, options.concurrency))
        nemesis = ClusterNemesis(random.Random(rng.random()), load, probe, workers, run_dir)
        if not await nemesis.healthy(within=120):
            raise SystemExit("the cluster is not whole (cluster.sh status): refusing to start")
        await asyncio.sleep(5.0)  # some load in flight before the first fault
        await nemesis.run(options.kinds, options.rounds, stop)
        await load_task
        log(f"load stopped after {len(ledger.ops)} operations; draining (up to {options.drain:.0f} s)")
        loop = asyncio.get_running_loop()
        still_open = await load.drain(loop.time() + options.drain)
        log(f"drained; {len(still_open)} workflow(s) still open; checking")
        stop_probe.set()
        sampling.set()
        await asyncio.gather(*background)
        totals.range_samples, totals.range_bumps = sampler.samples, sampler.bumps
        for regression in sampler.regressions:
            totals.flag("range_regressions", regression)
        runs: list[Run] = []
        await check(client, ledger, totals, workers.effects, keep=runs)
        fill_stalls(nemesis.rounds, probe.answers, timer_lateness(runs))
        return nemesis.rounds, totals
    finally:
        await client.close()
        workers.stop()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.faults.cluster", description=__doc__)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=5, help="each fault this many times")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"a comma list of {', '.join(KINDS)}")
    parser.add_argument("--rate", type=float, default=2.0, help="workflow starts per second")
    parser.add_argument("--concurrency", type=int, default=24, help="workflow scripts at once")
    parser.add_argument("--drain", type=float, default=180.0, help="seconds for the load to drain")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    parser.add_argument(
        "--down",
        action="store_true",
        help="take the cluster down at the end (also when this run brought it up)",
    )
    options = parser.parse_args(argv)
    options.kinds = [k for k in options.kinds.split(",") if k]
    unknown = set(options.kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    return options


def main(argv: list[str]) -> int:
    options = parse(argv)
    began = time.monotonic()
    brought_up = False
    if not (STATE / "up.done").exists():
        log("no cluster is up: bringing one up (make cluster)")
        script("up", timeout=900)
        brought_up = True
    info: dict[str, str] = json.loads((STATE / "cluster.json").read_text(encoding="utf-8"))
    run_dir = Path(tempfile.mkdtemp(prefix="chronicle-cluster-faults-"))
    rounds: list[Round] = []
    totals = Totals()
    try:
        rounds, totals = asyncio.run(drive(options, info, run_dir))
    finally:
        with contextlib.suppress(Exception):
            script("heal")
        if options.down or brought_up:
            log("taking the cluster down")
            script("down", timeout=300)
    seconds = time.monotonic() - began
    print(table(rounds, totals, seconds, options.seed))
    injected = {k: sum(r.kind == k for r in rounds) for k in options.kinds}
    held = (
        totals.passed
        and all(r.survived for r in rounds)
        and all(n >= options.rounds for n in injected.values())
    )
    print(
        f"\n{'HELD' if held else 'DID NOT HOLD'}: every fault {'recovered' if held else 'see above'}; "
        f"run directory {run_dir if options.keep or not held else '(removed)'}"
    )
    if options.json is not None:
        report: dict[str, Any] = {
            "seed": options.seed,
            "seconds": round(seconds, 1),
            "held": held,
            "rounds": [asdict(r) for r in rounds],
            "totals": {**asdict(totals), "passed": totals.passed},
        }
        options.json.write_text(json.dumps(report, indent=2))
    if held and not options.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
