"""``chronicle schedule ...`` against the real stack: create, list, describe, update, pause,
unpause, trigger, backfill and delete, read back through the CLI itself."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from tests.conftest import Stack, Tenant, wait_until
from tests.e2e.test_cli_support import chronicle, cli_env, ok_json


def _runs_of(env: dict[str, str], workflow_type: str) -> int:
    done = chronicle(env, "workflow", "count", "-q", f"WorkflowType = '{workflow_type}'", "-o", "json")
    return int(ok_json(done)["count"])


def test_a_schedule_from_create_to_delete(stack: Stack, tenant: Tenant, queue: str) -> None:
    env = cli_env(stack, tenant)
    sid, kind = f"cli-sched-{uuid.uuid4().hex[:8]}", f"Nightly{uuid.uuid4().hex[:6]}"
    created = ok_json(
        chronicle(
            env, "schedule", "create", "-s", sid, "--cron", "0 3 * * *", "--type", kind, "-t", queue,
            "-w", f"{sid}-run", "-i", '{"report": "daily"}', "--notes", "first", "--overlap-policy",
            "AllowAll", "--execution-timeout", "1h", "-o", "json",
        )
    )  # fmt: skip
    definition = created["schedule"]
    assert created["schedule_id"] == sid
    assert definition["spec"]["cron_expressions"] == ["0 3 * * *"]
    assert definition["action"]["workflow_type"] == kind and definition["action"]["input"] == [
        {"report": "daily"}
    ]
    assert definition["action"]["execution_timeout"] == 3600
    assert definition["policy"]["overlap"] == "ALLOW_ALL" and definition["state"]["note"] == "first"
    assert created["info"]["next_action_times"], "a cron schedule has a next time"

    again = chronicle(
        env, "schedule", "create", "-s", sid, "--cron", "0 3 * * *", "--type", kind, "-t", queue, "-w", "x"
    )
    assert again.returncode == 7 and "already exists" in again.stderr

    listed = chronicle(env, "schedule", "list")
    assert listed.returncode == 0 and sid in listed.stdout and kind in listed.stdout
    assert [row["schedule_id"] for row in ok_json(chronicle(env, "schedule", "list", "-o", "json"))] == [sid]

    updated = ok_json(
        chronicle(
            env, "schedule", "update", "-s", sid, "--interval", "2h/15m", "--notes", "moved", "-o", "json"
        )
    )
    spec = updated["schedule"]["spec"]
    assert spec["cron_expressions"] == [] and spec["intervals"] == [{"every": 7200.0, "offset": 900.0}]
    # what the flags did not name stays as it was
    assert updated["schedule"]["action"]["workflow_type"] == kind
    assert updated["schedule"]["action"]["input"] == [{"report": "daily"}]
    assert updated["schedule"]["state"]["note"] == "moved"

    paused = ok_json(chronicle(env, "schedule", "pause", "-s", sid, "--reason", "maintenance", "-o", "json"))
    assert paused["schedule"]["state"] == {
        **paused["schedule"]["state"],
        "paused": True,
        "note": "maintenance",
    }
    table = chronicle(env, "schedule", "describe", "-s", sid)
    assert table.returncode == 0 and "maintenance" in table.stdout
    unpaused = ok_json(chronicle(env, "schedule", "unpause", "-s", sid, "-o", "json"))
    assert unpaused["schedule"]["state"]["paused"] is False

    assert chronicle(env, "schedule", "trigger", "-s", sid).returncode == 0
    wait_until(lambda: _runs_of(env, kind) == 1, timeout=20)

    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    filled = chronicle(
        env, "schedule", "backfill", "-s", sid, "--start-time", (now - timedelta(hours=6)).isoformat(),
        "--end-time", now.isoformat(), "--overlap-policy", "AllowAll",
    )  # fmt: skip
    assert filled.returncode == 0, filled.stderr
    # every 2h at :15 in the 6 hours before the hour: three actions
    wait_until(lambda: _runs_of(env, kind) == 4, timeout=30)

    assert chronicle(env, "schedule", "delete", "-s", sid).returncode == 0
    gone = chronicle(env, "schedule", "describe", "-s", sid)
    assert gone.returncode == 3 and "not found" in gone.stderr


def test_schedule_usage_errors_exit_2(stack: Stack, tenant: Tenant) -> None:
    env = cli_env(stack, tenant)
    no_action = chronicle(env, "schedule", "create", "-s", "s1", "--cron", "* * * * *")
    assert no_action.returncode == 2 and "--type" in no_action.stderr
    no_spec = chronicle(env, "schedule", "create", "-s", "s1", "--type", "T", "-t", "q", "-w", "w")
    assert no_spec.returncode == 2 and "--cron" in no_spec.stderr
    bad_cron = chronicle(
        env, "schedule", "create", "-s", "s1", "--cron", "every day", "--type", "T", "-t", "q", "-w", "w"
    )
    assert bad_cron.returncode == 2, bad_cron.stderr
    bad_time = chronicle(
        env, "schedule", "backfill", "-s", "s1", "--start-time", "yesterday", "--end-time", "x"
    )
    assert bad_time.returncode == 2 and "ISO 8601" in bad_time.stderr
    assert ok_json(chronicle(env, "schedule", "list", "-o", "json")) == []
