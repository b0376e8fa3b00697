"""Commands started against an unreachable PostgreSQL fail at once with one clear message."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, free_port


@pytest.mark.parametrize(
    "argv", [["migrate", "--noinput"], ["start_dev", "--no-demo-worker"], ["run_shard_owner"]]
)
def test_unreachable_database_fails_fast_with_one_message(argv: list[str]) -> None:
    env = {**os.environ, "DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/nowhere"}
    done = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=25,  # the connection pool alone used to retry for 30 s
    )
    assert done.returncode != 0
    assert done.stderr.count("cannot reach PostgreSQL at 127.0.0.1:") == 1, done.stderr
    assert "error connecting" not in done.stderr
    assert "Traceback" not in done.stderr
