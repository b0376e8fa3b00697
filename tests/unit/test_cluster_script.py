"""platform/cluster/ without building a cluster: the scripts parse, are shellcheck-clean
where shellcheck is installed, and cluster.sh refuses what it does not know before touching the
network. The cluster itself is tested by tests/e2e/test_cluster.py (root, on request)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "platform" / "cluster"
SCRIPT = FOLDER / "cluster.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30, check=False
    )


def test_the_scripts_parse() -> None:
    for script in FOLDER.glob("*.sh"):
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{script.name}: {done.stderr}"


def test_the_scripts_are_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    # -x: cluster.sh is checked together with the file it sources.
    scripts = [str(script) for script in FOLDER.glob("*.sh")]
    done = subprocess.run(["shellcheck", "-x", *scripts], capture_output=True, text=True, check=False)
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


def test_cut_and_manage_name_one_of_the_hosts() -> None:
    for args, usage in (
        (("cut", "no-such-host"), "cut HOST [PEER...]: one of the cluster's hosts"),
        (("manage", "no-such-host", "check"), "manage HOST ARGS...: one of the cluster's hosts"),
    ):
        done = run(*args)
        assert done.returncode == 1
        assert usage in done.stderr


def test_a_cut_names_its_peers_among_the_hosts() -> None:
    done = run("cut", "so1", "pg1", "elsewhere")
    assert done.returncode == 1
    assert "elsewhere is not one of the cluster's hosts" in done.stderr or "needs root" in done.stderr
