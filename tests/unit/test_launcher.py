"""The stack launcher: named processes, log files, exit detection, SIGTERM then SIGKILL."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from chronicle.launcher import ProcessExited, ProcessGroup, ProcessSpec, stack_processes

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(60)"
)


def test_stack_is_a_list_of_named_commands_that_extra_processes_extend() -> None:
    extra = ProcessSpec("demo_worker", [sys.executable, "-m", "chronicle.demo_worker"])
    specs = stack_processes(8000, owner="a", extra=[extra])
    assert [s.name for s in specs] == ["frontend", "shard_owner:a", "batch_runner", "demo_worker"]
    assert "127.0.0.1:8000" in specs[0].argv and specs[1].argv[-2:] == ["--owner", "a"]


def test_stop_kills_a_child_that_ignores_sigterm_after_the_grace_period(tmp_path: Path) -> None:
    group = ProcessGroup(
        [ProcessSpec("stubborn", [sys.executable, "-c", STUBBORN])], log_dir=tmp_path, grace_seconds=1
    )
    group.start()
    deadline = time.monotonic() + 10
    while "up" not in (tmp_path / "stubborn.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    group.stop()
    assert group.processes["stubborn"].returncode == -9
    assert time.monotonic() - started < 5


def test_a_child_that_exits_is_reported_with_its_code_and_log(tmp_path: Path) -> None:
    group = ProcessGroup(
        [
            ProcessSpec("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"]),
            ProcessSpec("crasher", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]),
        ],
        log_dir=tmp_path,
    )
    with group:
        group.processes["crasher"].wait(10)
        assert group.exited() == ("crasher", 3)
        with pytest.raises(ProcessExited, match=r"crasher exited with code 3 \(see .*crasher\.log\)"):
            group.wait_http("http://127.0.0.1:9", timeout=5)
    assert group.processes["sleeper"].returncode == -15
    assert "boom" in (tmp_path / "crasher.log").read_text()
