"""The Temporal-style examples run as programs, connecting the way ported code does
(``ClientConfig.load_client_connect_config()`` reading ``CHRONICLE_*`` from the environment)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Stack, Tenant

ROOT = Path(__file__).resolve().parents[2]


def _run_example(stack: Stack, tenant: Tenant, module: str, tmp_path: Path) -> str:
    env = {
        **stack.env,
        "CHRONICLE_URL": stack.url,
        "CHRONICLE_NAMESPACE": tenant.namespace,
        "CHRONICLE_API_KEY": tenant.keys["all"],
        "XDG_CONFIG_HOME": str(tmp_path),  # no TOML profile of this machine's user
    }
    done = subprocess.run(
        [sys.executable, "-m", module], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        (
            "examples.codec",
            ["Workflow result: Hello, codec!", "Stored payload encodings: ['binary/zlib']"],
        ),
        (
            "examples.dynamic_handlers",
            ["Count so far: 2", "Workflow result: ['greeting: hello', 'order: o-7, 3']"],
        ),
        ("examples.async_activity_completion", ["Workflow result: laptop: approved"]),
        (
            "examples.schedules",
            [
                "Next run at: 03:00 UTC",
                "Scheduled run result: report for data team",
                "Paused: True",
                "Deleted: True",
            ],
        ),
        ("examples.child_workflows", ["Workflow result: 4 parcels, 11 kg", "Parcel 2 on its own: 5 kg"]),
        ("examples.continue_as_new", ["Workflow result: total 28 after "]),
        (
            "examples.patching",
            [
                "Run started on version 1: charged, shipped",
                "Run started on version 2: checked, charged, shipped",
            ],
        ),
        (
            "examples.saga",
            [
                "Workflow failed: trip not booked (no car free for t-42); "
                "undone: cancelled hotel-t-42, cancelled flight-t-42"
            ],
        ),
    ],
)
def test_example_program_prints_what_it_documents(
    stack: Stack, tenant: Tenant, tmp_path: Path, module: str, expected: list[str]
) -> None:
    output = _run_example(stack, tenant, module, tmp_path)
    for line in expected:
        assert line in output, output
