"""``chronicle workflow ...`` against the real stack and an SDK worker: each verb's output and
exit code, as a script would read them."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from sdk import workflow
from sdk.exceptions import ApplicationError
from tests.conftest import Stack, Tenant, wait_until
from tests.e2e.test_cli_support import chronicle, cli_env, ok_json, running_worker


@workflow.defn(name="CliEcho")
class CliEcho:
    @workflow.run
    async def run(self, order: dict[str, Any], times: int) -> dict[str, Any]:
        return {"order": order, "times": times}


@workflow.defn(name="CliRefuse")
class CliRefuse:
    @workflow.run
    async def run(self) -> None:
        raise ApplicationError("card declined", type="Declined", non_retryable=True)


@workflow.defn(name="CliWaiter")
class CliWaiter:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.done = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.done)
        return self.items

    @workflow.signal(name="add")
    def add(self, item: str) -> None:
        self.items.append(item)

    @workflow.signal(name="finish")
    def finish(self) -> None:
        self.done = True

    @workflow.query(name="items")
    def items_so_far(self, prefix: str) -> list[str]:
        return [prefix + item for item in self.items]


WORKFLOWS = [CliEcho, CliRefuse, CliWaiter]


def _wid(kind: str) -> str:
    return f"cli-{kind}-{uuid.uuid4().hex[:8]}"


def test_execute_prints_the_result_and_a_failed_workflow_exits_1(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    env = cli_env(stack, tenant)
    with running_worker(stack, tenant, queue, WORKFLOWS):
        wid = _wid("echo")
        done = chronicle(
            env, "workflow", "execute", "--type", "CliEcho", "-t", queue, "-w", wid,
            "-i", '{"sku": "A1"}', "-i", "3", "-o", "json",
        )  # fmt: skip
        out = ok_json(done)
        assert out["result"] == {"order": {"sku": "A1"}, "times": 3}
        assert out["workflow_id"] == wid and out["status"] == "Completed" and out["run_id"]

        failed = chronicle(env, "workflow", "execute", "--type", "CliRefuse", "-t", queue, "-w", _wid("no"))
        assert failed.returncode == 1, failed.stderr
        assert "card declined" in failed.stderr and failed.stdout == ""

        # result of a closed run, in the table format
        table = chronicle(env, "workflow", "result", "-w", wid)
        assert table.returncode == 0, table.stderr
        assert "Completed" in table.stdout and '"sku":"A1"' in table.stdout


def test_start_signal_query_describe_list_count_result(stack: Stack, tenant: Tenant, queue: str) -> None:
    env = cli_env(stack, tenant)
    wid = _wid("wait")
    with running_worker(stack, tenant, queue, WORKFLOWS):
        started = ok_json(
            chronicle(env, "workflow", "start", "--type", "CliWaiter", "-t", queue, "-w", wid, "-o", "json")
        )
        assert started["workflow_id"] == wid and started["namespace"] == tenant.namespace
        again = chronicle(env, "workflow", "start", "--type", "CliWaiter", "-t", queue, "-w", wid)
        assert again.returncode == 7, again.stderr  # already exists
        assert "already" in again.stderr

        for item in ("apple", "pear"):
            sent = chronicle(env, "workflow", "signal", "-w", wid, "--name", "add", "-i", json.dumps(item))
            assert sent.returncode == 0, sent.stderr
        answer = ok_json(
            chronicle(env, "workflow", "query", "-w", wid, "--type", "items", "-i", '"fruit:"', "-o", "json")
        )
        assert answer["result"] == ["fruit:apple", "fruit:pear"]

        described = ok_json(chronicle(env, "workflow", "describe", "-w", wid, "-o", "json"))
        assert described["status"] == "Running" and described["workflow_type"] == "CliWaiter"
        assert described["run_id"] == started["run_id"]

        rows = ok_json(chronicle(env, "workflow", "list", "-q", f"WorkflowId = '{wid}'", "-o", "json"))
        assert [r["workflow_id"] for r in rows] == [wid]
        lines = chronicle(env, "workflow", "list", "-q", "WorkflowType = 'CliWaiter'", "-o", "jsonl")
        assert [json.loads(line)["workflow_id"] for line in lines.stdout.splitlines()] == [wid]
        table = chronicle(env, "workflow", "list", "--limit", "5")
        assert table.returncode == 0 and wid in table.stdout and "Workflow ID" in table.stdout

        counted = ok_json(
            chronicle(env, "workflow", "count", "-q", "WorkflowType = 'CliWaiter'", "-o", "json")
        )
        assert counted["count"] == 1
        grouped = chronicle(env, "workflow", "count", "-q", "GROUP BY ExecutionStatus")
        assert grouped.returncode == 0 and "Total: 1" in grouped.stdout and "Running" in grouped.stdout

        assert chronicle(env, "workflow", "signal", "-w", wid, "--name", "finish").returncode == 0
        result = ok_json(chronicle(env, "workflow", "result", "-w", wid, "-o", "json"))
        assert result["result"] == ["apple", "pear"]


def test_show_prints_the_history_and_follow_waits_for_the_close(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    env = cli_env(stack, tenant)
    wid = _wid("show")
    with running_worker(stack, tenant, queue, WORKFLOWS):
        ok_json(
            chronicle(env, "workflow", "start", "--type", "CliWaiter", "-t", queue, "-w", wid, "-o", "json")
        )
        follower = subprocess.Popen(
            [sys.executable, "-m", "sdk.cli", "workflow", "show", "-w", wid, "--follow", "-o", "jsonl"],
            env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert follower.stdout is not None
            first = json.loads(follower.stdout.readline())
            assert first["event_type"] == "WorkflowExecutionStarted"
            assert follower.poll() is None, "--follow must wait while the run is open"
            assert (
                chronicle(env, "workflow", "signal", "-w", wid, "--name", "add", "-i", '"kiwi"').returncode
                == 0
            )
            assert chronicle(env, "workflow", "signal", "-w", wid, "--name", "finish").returncode == 0
            rest, errors = follower.communicate(timeout=60)
        finally:
            follower.kill()
        assert follower.returncode == 0, errors
        types = [json.loads(line)["event_type"] for line in rest.splitlines()]
        assert "WorkflowExecutionSignaled" in types and types[-1] == "WorkflowExecutionCompleted"

        table = chronicle(env, "workflow", "show", "-w", wid)
        assert table.returncode == 0, table.stderr
        assert table.stdout.splitlines()[0].split() == ["ID", "TIME", "TYPE", "DETAILS"]
        signaled = [line for line in table.stdout.splitlines() if "WorkflowExecutionSignaled" in line]
        assert any('"kiwi"' in line for line in signaled), signaled  # the payload, decoded
        events = ok_json(chronicle(env, "workflow", "show", "-w", wid, "-o", "json"))
        assert [e["event_id"] for e in events] == list(range(1, len(events) + 1))


def test_cancel_terminate_and_reset(stack: Stack, tenant: Tenant, queue: str) -> None:
    env = cli_env(stack, tenant)
    with running_worker(stack, tenant, queue, WORKFLOWS):
        cancelled, ended = _wid("cancel"), _wid("term")
        for wid in (cancelled, ended):
            ok_json(
                chronicle(
                    env, "workflow", "start", "--type", "CliWaiter", "-t", queue, "-w", wid, "-o", "json"
                )
            )
        assert (
            chronicle(env, "workflow", "signal", "-w", ended, "--name", "add", "-i", '"one"').returncode == 0
        )
        wait_until(lambda: _history_has(env, ended, "WorkflowExecutionSignaled"), timeout=20)

        done = chronicle(env, "workflow", "cancel", "-w", cancelled, "--reason", "not needed")
        assert done.returncode == 0, done.stderr
        outcome = chronicle(env, "workflow", "result", "-w", cancelled)
        assert outcome.returncode == 1 and "Cancel" in outcome.stderr

        reset = ok_json(
            chronicle(
                env, "workflow", "reset", "-w", ended, "--type", "FirstWorkflowTask",
                "--reason", "try again", "-o", "json",
            )
        )  # fmt: skip
        first_run = ok_json(chronicle(env, "workflow", "list", "-q", f"WorkflowId = '{ended}'", "-o", "json"))
        assert reset["run_id"] in {r["run_id"] for r in first_run} and len(first_run) == 2
        # the signal came after the reset point: sent again to the new run
        query = ["workflow", "query", "-w", ended, "--type", "items", "-i", '""', "-o", "json"]
        wait_until(lambda: chronicle(env, *query).stdout.count("one") == 1, timeout=20)

        done = chronicle(env, "workflow", "terminate", "-w", ended, "--reason", "enough")
        assert done.returncode == 0, done.stderr
        described = ok_json(chronicle(env, "workflow", "describe", "-w", ended, "-o", "json"))
        assert described["status"] == "Terminated" and described["run_id"] == reset["run_id"]
        assert chronicle(env, "workflow", "result", "-w", ended).returncode == 1

        neither = chronicle(env, "workflow", "reset", "-w", ended, "--reason", "x")
        assert neither.returncode == 2 and "exactly one" in neither.stderr
        # event 1 is the start, not a workflow task's completion: the server refuses the point
        wrong_point = chronicle(env, "workflow", "reset", "-w", ended, "-e", "1", "--reason", "x")
        assert wrong_point.returncode == 2 and "invalid request" in wrong_point.stderr
        by_event = ok_json(
            chronicle(env, "workflow", "reset", "-w", ended, "-e", "4", "--reason", "x", "-o", "json")
        )
        assert by_event["run_id"] not in (reset["run_id"], None)


def _history_has(env: dict[str, str], wid: str, event_type: str) -> bool:
    done = chronicle(env, "workflow", "show", "-w", wid, "-o", "jsonl")
    return done.returncode == 0 and event_type in done.stdout


def test_errors_have_their_exit_codes(stack: Stack, tenant: Tenant, tmp_path: Path) -> None:
    env = cli_env(stack, tenant)
    missing = chronicle(env, "workflow", "describe", "-w", "no-such-workflow")
    assert missing.returncode == 3 and "not found" in missing.stderr
    no_history = chronicle(env, "workflow", "show", "-w", "no-such-workflow")
    assert no_history.returncode == 3 and no_history.stdout == ""

    bad_key = chronicle({**env, "CHRONICLE_API_KEY": "chr_not_a_key"}, "workflow", "list")
    assert bad_key.returncode == 4 and "unauthenticated" in bad_key.stderr

    no_key = chronicle({**env, "CHRONICLE_API_KEY": ""}, "workflow", "list")
    assert no_key.returncode == 4

    worker_only = chronicle(cli_env(stack, tenant, key="worker"), "workflow", "list")
    assert worker_only.returncode == 5 and "permission denied" in worker_only.stderr

    bad_flag = chronicle(env, "workflow", "list", "--no-such-flag")
    assert bad_flag.returncode == 2 and "No such option" in bad_flag.stderr
    bad_json = chronicle(env, "workflow", "start", "--type", "X", "-t", "q", "-i", "{oops")
    assert bad_json.returncode == 2 and "not JSON" in bad_json.stderr
    bad_query = chronicle(env, "workflow", "list", "-q", "WorkflowType = ")
    assert bad_query.returncode == 2 and "invalid" in bad_query.stderr

    # a query nobody answers: the server times it out (the stack waits 3 s), exit 1
    ok_json(
        chronicle(
            env, "workflow", "start", "--type", "CliWaiter", "-t", "no-worker", "-w", "lonely", "-o", "json"
        )
    )
    unanswered = chronicle(env, "workflow", "query", "-w", "lonely", "--type", "items")
    assert unanswered.returncode == 1 and "timed out" in unanswered.stderr

    closed_port = chronicle({**env, "CHRONICLE_URL": "http://127.0.0.1:9"}, "workflow", "list")
    assert closed_port.returncode == 6 and "server unavailable" in closed_port.stderr

    nowhere = chronicle(
        {k: v for k, v in env.items() if k != "CHRONICLE_URL"}, "workflow", "list", cwd=tmp_path
    )
    assert nowhere.returncode == 2 and "no server address" in nowhere.stderr


def test_the_connection_comes_from_flags_a_profile_or_dev_json(
    stack: Stack, tenant: Tenant, tmp_path: Path
) -> None:
    bare = cli_env(None, None)
    flags = ["--address", stack.url, "--namespace", tenant.namespace, "--api-key", tenant.keys["all"]]
    assert ok_json(chronicle(bare, "workflow", "list", *flags, "-o", "json")) == []
    # the flags also go before the group, as the root command's
    assert ok_json(chronicle(bare, *flags, "-o", "json", "workflow", "count"))["count"] == 0

    config = tmp_path / "chronicle.toml"
    config.write_text(
        f'[profile.staging]\naddress = "{stack.url}"\nnamespace = "{tenant.namespace}"\n'
        f'api_key = "{tenant.keys["all"]}"\n'
    )
    with_file = {**bare, "CHRONICLE_CONFIG_FILE": str(config)}
    assert chronicle(with_file, "workflow", "list", "--profile", "staging").returncode == 0
    unknown = chronicle(with_file, "workflow", "list", "--profile", "prod")
    assert unknown.returncode == 2 and "prod" in unknown.stderr

    dev = tmp_path / "project" / ".chronicle"
    dev.mkdir(parents=True)
    (dev / "dev.json").write_text(
        json.dumps({"url": stack.url, "namespace": tenant.namespace, "api_key": tenant.keys["all"]})
    )
    found = chronicle(bare, "workflow", "count", "-o", "json", cwd=dev.parent)
    assert ok_json(found)["count"] == 0


def test_help_and_completion_need_no_server() -> None:
    env = cli_env(None, None)
    done = chronicle(env, "--help")
    assert done.returncode == 0
    for group in ("workflow", "schedule", "batch", "search-attribute", "completion"):
        assert group in done.stdout
    script = chronicle(env, "completion", "bash")
    assert script.returncode == 0 and "_CHRONICLE_COMPLETE" in script.stdout
    # what the script asks the tool when Tab is pressed after `chronicle workflow sh`
    asked = {
        **env,
        "_CHRONICLE_COMPLETE": "bash_complete",
        "COMP_WORDS": "chronicle workflow sh",
        "COMP_CWORD": "2",
    }
    assert chronicle(asked).stdout.split() == ["plain,show"]
    asked = {**asked, "COMP_WORDS": "chronicle workflow list -o ", "COMP_CWORD": "4"}
    assert chronicle(asked).stdout.split() == ["plain,table", "plain,json", "plain,jsonl"]
