"""The fault harness's quick variant: one round of every fault (processes killed and
paused, the database cut, restarted and filled, LISTEN dropped, poison activities, a bad
deploy, a signal storm, payloads at the limit) loses nothing, and the checker catches the
planted bug (a signal answered 2xx, then rolled back).

Each test runs ``python -m bench.faults`` as a command, with a stack and a database of
its own (a throwaway PostgreSQL cluster when run as root), and reads its JSON figures.
The full run (``--rounds 10``) is by command only: see docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT


def harness(tmp_path: Path, *args: str) -> dict[str, Any]:
    report = tmp_path / "faults.json"
    env = dict(os.environ)
    if env.get("DATABASE_URL", "").startswith("postgres"):
        env.setdefault("FAULTS_SERVER_URL", env["DATABASE_URL"])  # used when no private cluster can be made
    done = subprocess.run(
        [sys.executable, "-m", "bench.faults", "--json", str(report), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    print(done.stdout)
    assert report.exists(), done.stderr[-4000:]
    figures: dict[str, Any] = json.loads(report.read_text())
    return figures


@pytest.mark.timeout(300)
def test_one_round_of_every_fault_loses_nothing(tmp_path: Path) -> None:
    figures = harness(tmp_path, "--seed", "11", "--rounds", "1", "--no-planted-bug", "--drain", "60")

    run = figures["fault_run"]
    totals = run["totals"]
    assert totals["starts_accepted"] > 10 and totals["signals_accepted"] > 10
    assert (totals["lost"], totals["duplicated"], totals["unexpected"]) == (0, 0, 0), totals["anomalies"]
    assert totals["replay_failures"] == 0 and totals["replayed"] >= totals["starts_accepted"]
    assert totals["timers_checked"] > 0 and totals["range_regressions"] == 0 and totals["stuck"] == 0
    assert (totals["time_regressions"], totals["order_errors"], totals["nondeterminism_unexpected"]) == (
        0,
        0,
        0,
    )
    assert totals["nondeterminism_failures"] >= 1  # the bad deploy's, each run completed afterwards
    assert run["passed"], totals["anomalies"]
    assert all(stats["injected"] >= 1 for stats in run["faults"].values()), run["faults"]


@pytest.mark.timeout(300)
def test_the_planted_bug_is_caught(tmp_path: Path) -> None:
    figures = harness(tmp_path, "--planted-bug", "--seed", "5", "--load-seconds", "10", "--drain", "20")

    planted = figures["planted"]
    assert planted["caught"]
    assert planted["totals"]["lost"] > 0, planted["totals"]
