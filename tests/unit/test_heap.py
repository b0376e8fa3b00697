"""Long-lived processes freeze their start-up heap and collect young objects less often."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chronicle import heap

ROOT = Path(__file__).resolve().parents[2]

# Prints the collector's state after the given code ran, as JSON, in a fresh interpreter:
# freezing the test process's own heap would change the collector for every later test.
PROBE = """
import gc, json
{code}
print(json.dumps({{"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}}))
"""


def collector_after(code: str) -> dict[str, object]:
    ran = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code)],
        cwd=ROOT,
        env={**os.environ, "SECRET_KEY": os.environ.get("SECRET_KEY", "test-heap-key")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    answer: dict[str, object] = json.loads(ran.stdout.strip().splitlines()[-1])
    return answer


def test_a_fresh_interpreter_has_nothing_frozen_and_the_default_thresholds() -> None:
    state = collector_after("pass")
    assert state["frozen"] == 0
    assert state["threshold"] != [heap.YOUNG_THRESHOLD, *heap.OLDER_THRESHOLDS]


def test_settling_freezes_what_start_up_built_and_spaces_out_young_collections() -> None:
    state = collector_after("from chronicle import heap; heap.settle_after_start()")
    assert isinstance(state["frozen"], int) and state["frozen"] > 1000
    assert state["threshold"] == [heap.YOUNG_THRESHOLD, *heap.OLDER_THRESHOLDS]


def test_a_frontend_worker_settles_once_its_application_is_built() -> None:
    """Gunicorn's workers import ``chronicle.asgi``: Django and every app are then in the
    frozen part, about a hundred thousand objects no collection walks again."""
    state = collector_after("import chronicle.asgi")
    assert isinstance(state["frozen"], int) and state["frozen"] > 50_000
    assert state["threshold"] == [heap.YOUNG_THRESHOLD, *heap.OLDER_THRESHOLDS]
