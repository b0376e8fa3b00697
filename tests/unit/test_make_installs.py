"""What each ``make`` target installs, read from make's own plan (``make -n``) against a
virtualenv folder of the test's: ``make run`` only what running needs (requirements.txt),
``make test`` and ``make lint`` the dev tools too, each again only when its requirements
file is newer than its stamp; and no lint or test tool among the running requirements."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

DEV_TOOLS = {
    "pytest",
    "pytest-django",
    "pytest-timeout",
    "ruff",
    "mypy",
    "django-stubs",
    "import-linter",
    "playwright",
}


def plan(venv: Path, target: str) -> list[str]:
    """The commands ``make TARGET`` would run, one a line."""
    done = subprocess.run(
        ["make", "-n", f"VENV={venv}", target], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def installs(venv: Path, target: str) -> list[str]:
    """The requirements files ``make TARGET`` would install, in order."""
    return [m.group(1) for line in plan(venv, target) if (m := re.search(r"pip install .* -r (\S+)", line))]


def test_a_fresh_clone_runs_with_the_running_requirements_only(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run = plan(venv, "run")
    assert any(line.endswith(f"-m venv {venv}") for line in run), run
    assert installs(venv, "run") == ["requirements.txt"]
    for target in ("test", "lint", "test-fast"):
        assert installs(venv, target) == ["requirements-dev.txt"], target


def test_each_stamp_is_redone_only_when_its_requirements_are_newer(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(shutil.which("python3") or "/usr/bin/python3")
    (venv / ".installed-run").touch()
    assert installs(venv, "run") == []
    assert installs(venv, "lint") == ["requirements-dev.txt"]  # the dev tools are not there yet

    (venv / ".installed-dev").touch()
    assert installs(venv, "test") == [] and installs(venv, "run") == []

    past = (ROOT / "requirements.txt").stat().st_mtime - 60
    for stamp in (".installed-run", ".installed-dev"):
        os.utime(venv / stamp, (past, past))
    assert installs(venv, "run") == ["requirements.txt"]
    assert installs(venv, "test") == ["requirements-dev.txt"]


def test_the_running_requirements_hold_no_lint_or_test_tool() -> None:
    names = {
        re.split(r"[\[=<>]", line.strip())[0].lower()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "-"))
    }
    assert names and not names & DEV_TOOLS, names & DEV_TOOLS
