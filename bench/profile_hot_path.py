"""Profile the frontend's share of a one-activity workflow, in process.

Drives the frontend's ASGI application (``chronicle.asgi.application``: the same routing,
handlers, views and kernel gunicorn serves) with no HTTP server or network, through the
four calls an SDK worker and client make for a workflow with one activity: the start
(which waits for the close), the workflow-task poll, the completion scheduling the
activity (which comes back eagerly), and the activity's result with the closing workflow
task run ahead. Prints, per call and per workflow, the CPU this process spent, the SQL statements
it sent and the transactions it committed: figures that do not drift with the machine's
load, unlike wall-clock throughput. Transactions are counted here, as the frontend commits
them (a transaction block, or a statement sent outside one): PostgreSQL's own
``xact_commit`` is flushed late and counts one extended-protocol statement outside a block
twice, so it is no measure of a few hundred calls.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<scratch> python bench/profile_hot_path.py \\
        --workflows 200 [--profile]

The database must exist; it is migrated first. ``--profile`` adds a CPU profile of the
calls over every thread (yappi).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

import django

from chronicle.launcher import ensure_secret_key

ensure_secret_key()  # a key for this run: the settings refuse to start without one

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.backends import utils as db_utils  # noqa: E402
from django.db.backends.base.base import BaseDatabaseWrapper  # noqa: E402
from proc_cpu import backend_pids, cpu_by_pid, cpu_used  # noqa: E402

from chronicle.db import listen_conninfo  # noqa: E402
from history.kernel.wakeups import task_wakeup_key  # noqa: E402
from matching.longpoll import hub  # noqa: E402
from matching.sync_match import waiting_polls  # noqa: E402
from namespaces.models import Namespace  # noqa: E402
from namespaces.services import api_key_issue, namespace_create  # noqa: E402
from tests.asgi_client import asgi_call  # noqa: E402

STATEMENTS = [0]
# Transaction blocks committed, and statements sent outside a block (each its own transaction).
COMMITS = [0]
START_CALL = "start (+ close)"
MATCHED_POLL = "wft poll (in the start)"


def _count_statements() -> None:
    """Count every statement Django sends, and every transaction it commits, on every
    thread (the views run on a pool)."""
    for name in ("execute", "executemany"):
        original = getattr(db_utils.CursorWrapper, name)

        def counted(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            STATEMENTS[0] += 1
            if self.db.get_autocommit():
                COMMITS[0] += 1
            return __original(self, *args, **kwargs)

        setattr(db_utils.CursorWrapper, name, counted)
    original_commit = getattr(BaseDatabaseWrapper, "_commit")  # noqa: B009 (private to Django's stubs)

    def counted_commit(self: Any) -> Any:
        COMMITS[0] += 1
        return original_commit(self)

    setattr(BaseDatabaseWrapper, "_commit", counted_commit)  # noqa: B010


class AsgiClient:
    """Calls the frontend's ASGI app as a server would, without sockets, with one key."""

    def __init__(self, authorization: str, namespace_id: uuid.UUID) -> None:
        self.authorization = authorization
        self.namespace_id = namespace_id

    async def call(self, method: str, path: str, body: Any = None, query: str = "") -> tuple[int, Any]:
        raw = json.dumps(body).encode() if body is not None else b""
        answer = await asgi_call(method, path, raw, authorization=self.authorization, query=query)
        return answer.status_code, answer.json() if answer.content else None


class Tally:
    """CPU, statements and commits per kind of call."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.statements: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self.commits: dict[str, int] = defaultdict(int)

    async def measure(self, name: str, call: Awaitable[tuple[int, Any]]) -> Any:
        cpu, statements, commits = time.process_time(), STATEMENTS[0], COMMITS[0]
        status, body = await call
        self.cpu[name] += time.process_time() - cpu
        self.statements[name] += STATEMENTS[0] - statements
        self.commits[name] += COMMITS[0] - commits
        self.calls[name] += 1
        if status >= 300:
            raise RuntimeError(f"{name}: {status} {body}")
        return body

    async def measure_workflow(self, workflow: Awaitable[None]) -> None:
        """Run one workflow; what its total leaves beside the calls measured one by one is
        the start's (sent first, answered last, with the close)."""
        cpu, statements, commits = time.process_time(), STATEMENTS[0], COMMITS[0]
        measured = sum(self.cpu.values()), sum(self.statements.values()), sum(self.commits.values())
        await workflow
        name = START_CALL
        self.cpu[name] += time.process_time() - cpu - (sum(self.cpu.values()) - measured[0])
        self.statements[name] += STATEMENTS[0] - statements - (sum(self.statements.values()) - measured[1])
        self.commits[name] += COMMITS[0] - commits - (sum(self.commits.values()) - measured[2])
        self.calls[name] += 1


async def one_workflow(
    client: AsgiClient, base: str, queue: str, tally: Tally, *, matched: bool = False
) -> None:
    wid = f"hot-{uuid.uuid4().hex[:12]}"
    sticky = f"{queue}-sticky"
    m = tally.measure
    # What execute_workflow sends: the start's answer waits for the close, and is the result.
    start = {
        "workflow_id": wid,
        "workflow_type": "OneStep",
        "task_queue": queue,
        "input": [1],
        "wait_for_close": 10,
    }
    poll = {"identity": "prof", "timeout": 5}
    polling = client.call("POST", f"{base}/task-queues/{queue}/workflow-tasks/poll", poll)
    if matched:
        started, task = await _matched(
            client.call("POST", f"{base}/workflows", start), polling, client, queue
        )
        # Its figures are in the start's line: its first, empty claim (a worker's poll makes
        # one before it waits) and the task the start's transaction started for it.
        tally.calls[MATCHED_POLL] += 1
    else:
        started = await _started_in_background(client.call("POST", f"{base}/workflows", start), client, queue)
        task = await m("wft poll", polling)
    schedule = {
        "command_type": "ScheduleActivityTask",
        "attributes": {
            "activity_id": "1",
            "activity_type": "Step",
            "task_queue": queue,
            "start_to_close_timeout": 30,
            "input": [1],
            "request_eager_execution": True,
        },
    }
    complete = f"{base}/task-queues/{queue}/workflow-tasks/complete"
    body = {
        "task_token": task["task_token"],
        "commands": [schedule],
        "sticky_task_queue": sticky,
        "return_recorded_events": True,
    }
    done = await m("wft complete (activity)", client.call("POST", complete, body))
    activity = done["activity_tasks"][0]
    # The worker runs the workflow too: with the result it sends the closing task, run
    # ahead on the events it knows the result writes (as the SDK does).
    close = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 2}}
    finished = {
        "task_token": activity["task_token"],
        "result": 2,
        "identity": "prof",
        "return_new_workflow_task": True,
        "sticky_task_queue": sticky,
        "workflow_task_ahead": {
            "expected_event_id": done["recorded_events"][-1]["event_id"] + 1,
            "started_time": datetime.now(UTC).isoformat(),
            "commands": [close],
        },
    }
    tasks = f"{base}/task-queues"
    reported = await m(
        "activity complete (+ close)",
        client.call("POST", f"{tasks}/{queue}/activity-tasks/complete", finished),
    )
    if "workflow_task_ahead" not in reported:
        raise RuntimeError(f"the close run ahead was refused: {reported}")
    status, answer = await started
    if status != 201 or "close" not in answer:
        raise RuntimeError(f"start: {status} {answer}")


async def _matched(
    start: Awaitable[tuple[int, Any]], poll: Awaitable[tuple[int, Any]], client: AsgiClient, queue: str
) -> tuple[asyncio.Task[tuple[int, Any]], Any]:
    """Poll first; once the poll waits on offer, start: the start hands the poll its task
    (sync match). Returns the start, still waiting for the close, and the task."""
    polling = asyncio.ensure_future(poll)
    key = task_wakeup_key(client.namespace_id, "workflow", queue, "")
    for _ in range(500):
        if waiting_polls.waiting(key):
            break
        await asyncio.sleep(0.002)
    started = asyncio.ensure_future(start)
    status, task = await polling
    if status != 200 or task["history"]["events"][-1]["attributes"].get("request_id") != "matched":
        raise RuntimeError(f"the poll was not matched with the start: {status} {task}")
    return started, task


async def _started_in_background(
    call: Awaitable[tuple[int, Any]], client: AsgiClient, queue: str
) -> asyncio.Task[tuple[int, Any]]:
    """Send the start, and return once it has committed and begun its wait for the close
    (the worker's calls then run alone, so each call's figures are its own; the start's
    are what the workflow's total leaves)."""
    key = task_wakeup_key(client.namespace_id, "workflow", queue, "")
    hub.ensure_listening(listen_conninfo())
    woken = hub.subscribe(key)
    try:
        started = asyncio.ensure_future(call)
        await asyncio.wait_for(woken.wait(), 10)
    finally:
        hub.unsubscribe(key, woken)
    await asyncio.sleep(0.005)  # the wait's first look
    return started


class ThreadsProfile:
    """CPU time by function over every thread (yappi): the kernel's work runs on the API's
    threads, which a cProfile of the event loop's thread never sees."""

    def __init__(self) -> None:
        import yappi

        self.yappi = yappi
        yappi.set_clock_type("cpu")

    def enable(self) -> None:
        self.yappi.start(builtins=False)

    def disable(self) -> None:
        self.yappi.stop()

    def report(self, workflows: int, top: int = 45) -> None:
        """The functions with the most CPU, inclusive and own, in µs per workflow."""
        stats = self.yappi.get_func_stats()
        per = 1e6 / workflows
        for title, key in (("inclusive", "ttot"), ("own", "tsub")):
            print(f"\nCPU by function, {title} (µs per workflow)")
            for stat in sorted(stats, key=lambda s: -getattr(s, key))[:top]:
                where = f"{stat.module.rsplit('/', 2)[-1]}:{stat.lineno}"
                calls = stat.ncall / workflows
                print(f"{getattr(stat, key) * per:9.0f}  {calls:7.1f}x  {stat.name}  {where}")


async def run(namespace: Namespace, key: str, workflows: int, profile: bool, matched: bool) -> None:
    client = AsgiClient(f"Bearer {key}", namespace.id)
    base, queue = f"/api/v1/namespaces/{namespace.name}", "hot"
    for _ in range(5):  # warm-up: imports, caches, the pool
        await one_workflow(client, base, queue, Tally(), matched=matched)
    tally = Tally()
    profiler = ThreadsProfile() if profile else None
    backends = backend_pids(os.environ["DATABASE_URL"])  # this run's: the pool's and the listener's
    postgres_before = cpu_by_pid(backends)
    if profiler:
        profiler.enable()
    for i in range(workflows):
        await tally.measure_workflow(one_workflow(client, base, queue, tally, matched=matched))
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{workflows} workflows", file=sys.stderr)
    if profiler:
        profiler.disable()
    _report(tally, workflows)
    postgres = cpu_used(postgres_before, cpu_by_pid(backends)) * 1000 / workflows
    print(f"PostgreSQL: {postgres:.1f} ms CPU per workflow in this run's {len(backends)} server processes")
    if profiler:
        profiler.report(workflows)


def _report(tally: Tally, workflows: int) -> None:
    print(f"{'call':<26}{'CPU ms/call':>12}{'statements/call':>17}{'commits/call':>14}")
    for name, calls in tally.calls.items():
        cpu, statements = tally.cpu[name] * 1000 / calls, tally.statements[name] / calls
        print(f"{name:<26}{cpu:>12.2f}{statements:>17.1f}{tally.commits[name] / calls:>14.1f}")
    per = 1 / workflows
    print(
        f"per workflow: {sum(tally.calls.values()) * per:.0f} calls, "
        f"{sum(tally.cpu.values()) * 1000 * per:.1f} ms CPU, "
        f"{sum(tally.statements.values()) * per:.1f} statements, "
        f"{sum(tally.commits.values()) * per:.1f} commits"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--sync-match", action="store_true", help="poll before the start, which hands the poll its task"
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    namespace = namespace_create(name=f"hot-{uuid.uuid4().hex[:8]}", request_rps=0)
    _, key = api_key_issue(namespace=namespace, name="bench", roles=["client", "worker"])
    connection.close()
    _count_statements()
    asyncio.run(run(namespace, key, args.workflows, args.profile, args.sync_match))


if __name__ == "__main__":
    main()
