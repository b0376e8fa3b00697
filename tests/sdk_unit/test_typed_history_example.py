"""``examples/replay_history.py``: the determinism check a team runs before deploying, over a
history Temporal exported and one Chronicle wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.replay_history import main
from tests.sdk_unit.test_typed_history_temporal import greeting_export

RECORDED = Path(__file__).parent / "histories" / "approval_recorded.json"
PORTED = "tests.sdk_unit.test_typed_history_temporal:GreetingWorkflow"
CHANGED = "tests.sdk_unit.test_typed_history_temporal:GreetingWorkflowSleepsFirst"
APPROVAL = "tests.sdk_unit.test_replayer:RecordedApproval"


def test_histories_that_replay_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = tmp_path / "greeting.json"
    exported.write_text(greeting_export())
    assert main([str(exported), str(RECORDED), "--workflow", PORTED, "--workflow", APPROVAL]) == 0
    out = capsys.readouterr().out
    assert "greeting.json: 20 events, ok" in out
    assert "approval_recorded.json" in out and "FAILED" not in out


def test_a_history_the_code_no_longer_matches_exits_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "greeting.json"
    exported.write_text(greeting_export())
    assert main([str(exported), "--workflow", CHANGED]) == 1
    assert "greeting.json: 20 events, FAILED: NondeterminismError" in capsys.readouterr().out


def test_bad_arguments_exit_two(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main([str(tmp_path / "x.json"), "--workflow", "tests.sdk_unit.test_replayer"])
    assert exited.value.code == 2
