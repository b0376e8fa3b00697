"""``chronicle workflow update ...`` against the real stack and an SDK worker: execute, start
with a wait stage, result and describe, an update id applied once, and a rejection's exit code."""

from __future__ import annotations

import subprocess
import uuid

from sdk import workflow
from sdk.exceptions import ApplicationError
from tests.conftest import Stack, Tenant
from tests.e2e.test_cli_support import chronicle, cli_env, ok_json, running_worker


@workflow.defn(name="CliCounter")
class CliCounter:
    def __init__(self) -> None:
        self.total = 0
        self.released = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: False)
        return self.total

    @workflow.update
    async def add(self, amount: int, note: str) -> dict[str, object]:
        self.total += amount
        return {"total": self.total, "note": note}

    @add.validator
    def check_add(self, amount: int, note: str) -> None:
        if amount <= 0:
            raise ApplicationError("amount must be positive")

    @workflow.update
    async def slow_add(self, amount: int) -> int:
        await workflow.wait_condition(lambda: self.released)
        self.total += amount
        return self.total

    @workflow.signal(name="release")
    def release(self) -> None:
        self.released = True


def _update(env: dict[str, str], verb: str, wid: str, *args: str) -> subprocess.CompletedProcess[str]:
    return chronicle(env, "workflow", "update", verb, "-w", wid, *args)


def test_update_execute_start_result_and_describe(stack: Stack, tenant: Tenant, queue: str) -> None:
    env = cli_env(stack, tenant)
    wid = f"cli-counter-{uuid.uuid4().hex[:8]}"
    with running_worker(stack, tenant, queue, [CliCounter]):
        ok_json(
            chronicle(env, "workflow", "start", "--type", "CliCounter", "-t", queue, "-w", wid, "-o", "json")
        )
        out = ok_json(
            chronicle(
                env, "workflow", "update", "execute", "-w", wid, "--name", "add",
                "-i", "5", "-i", '"first"', "--update-id", "add-1", "-o", "json",
            )
        )  # fmt: skip
        assert out["result"] == {"total": 5, "note": "first"}
        assert out["update_id"] == "add-1" and out["workflow_id"] == wid and out["run_id"]

        # The same update id again: the first outcome, applied once.
        again = ok_json(
            chronicle(
                env, "workflow", "update", "execute", "-w", wid, "--name", "add",
                "-i", "100", "-i", '"other"', "--update-id", "add-1", "-o", "json",
            )
        )  # fmt: skip
        assert again["result"] == {"total": 5, "note": "first"}

        refused = chronicle(
            env, "workflow", "update", "execute", "-w", wid, "--name", "add", "-i", "0", "-i", '"x"'
        )
        assert refused.returncode == 1, refused.stderr
        assert "amount must be positive" in refused.stderr and refused.stdout == ""

        started = ok_json(
            chronicle(
                env, "workflow", "update", "start", "-w", wid, "--name", "slow_add", "-i", "2",
                "--wait-for-stage", "accepted", "--update-id", "slow-1", "-o", "json",
            )
        )  # fmt: skip
        assert started["update_id"] == "slow-1" and started["stage"] == "ACCEPTED"
        pending = ok_json(
            chronicle(env, "workflow", "update", "describe", "-w", wid, "--update-id", "slow-1", "-o", "json")
        )
        assert pending["stage"] == "ACCEPTED" and "result" not in pending

        ok_json(chronicle(env, "workflow", "signal", "-w", wid, "--name", "release", "-o", "json"))
        done = ok_json(
            chronicle(env, "workflow", "update", "result", "-w", wid, "--update-id", "slow-1", "-o", "json")
        )
        assert done["result"] == 7
        described = ok_json(
            chronicle(env, "workflow", "update", "describe", "-w", wid, "--update-id", "slow-1", "-o", "json")
        )
        assert described["stage"] == "COMPLETED" and described["result"] == 7

        text = chronicle(env, "workflow", "update", "describe", "-w", wid, "--update-id", "add-1")
        assert text.returncode == 0 and "COMPLETED" in text.stdout, text.stderr

        missing = chronicle(env, "workflow", "update", "describe", "-w", wid, "--update-id", "nope")
        assert missing.returncode != 0 and missing.stdout == ""
        chronicle(env, "workflow", "terminate", "-w", wid, "--reason", "done")


def test_update_help_needs_no_server() -> None:
    done = chronicle(cli_env(None, None), "workflow", "update", "--help")
    assert done.returncode == 0
    for verb in ("execute", "start", "result", "describe"):
        assert verb in done.stdout
