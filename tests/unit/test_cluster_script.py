"""platform/cluster/cluster.sh without building a cluster: it parses, it is shellcheck-clean
where shellcheck is installed, and it refuses what it does not know before touching the
network. The cluster itself is tested by tests/e2e/test_cluster.py (root, on request)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "platform" / "cluster" / "cluster.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30, check=False
    )


def test_the_script_parses() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_script_is_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    done = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_an_unknown_command_gets_the_usage() -> None:
    done = run("sideways")
    assert done.returncode == 2
    assert "usage:" in done.stderr and "up|down|status" in done.stderr


def test_kill_and_restart_name_one_of_the_hosts() -> None:
    for verb in ("kill", "restart"):
        done = run(verb, "no-such-host")
        assert done.returncode == 1
        assert f"{verb} HOST: one of the cluster's hosts" in done.stderr
