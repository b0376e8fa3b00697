"""``chronicle --help`` stays fast: it imports neither rich nor httpx (nor the SDK's client),
which only a command that runs needs. A guard on what is imported, not a timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("rich", "httpx", "httpcore", "anyio", "sdk.client", "sdk.converter")


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["workflow", "--help"], ["workflow", "start", "--help"], ["schedule", "create", "--help"]],
)
def test_help_imports_nothing_heavy(argv: list[str]) -> None:
    script = (
        "import json, sys\n"
        "from sdk.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE", "CHRONICLE_"))}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd="/", env=env, capture_output=True, text=True, timeout=60
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0 and "Usage: chronicle" in done.stdout
    loaded = [m for m in report["modules"] if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert not loaded, f"--help imported {loaded}"


def test_python_dash_m_runs_the_same_tool() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "sdk.cli", "--version"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.startswith("chronicle, version ")
