"""Races and multi-daemon behaviour against the real stack."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections import Counter
from typing import Any

from history.models import HistoryEvent, Shard, TimerTask, WorkflowExecution
from tests.conftest import Api, ScriptedWorker, Stack, command, wait_until


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


def _parallel(fns: list[Any]) -> list[Any]:
    results: list[Any] = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def run(i: int) -> None:
        barrier.wait()
        results[i] = fns[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_concurrent_completions_of_one_token_exactly_one_wins(
    stack: Stack, api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    clients = [Api(stack, _tenant_of(api, stack)) for _ in range(2)]
    body = {"task_token": task["task_token"], "commands": [], "identity": "race"}
    results = _parallel(
        [lambda c=c: c.post(f"/task-queues/{worker.queue}/workflow-tasks/complete", body) for c in clients]
    )

    codes = sorted(r.status_code for r in results)
    assert codes[0] == 200 and codes[1] in (404, 409), [r.text for r in results]
    assert api.event_types(wid).count("WorkflowTaskCompleted") == 1


def _tenant_of(api: Api, stack: Stack) -> Any:
    # Rebuild a Tenant-like object from the Api so each thread has its own HTTP client.
    from tests.conftest import Tenant

    ns = api.base.rsplit("/", 1)[1]
    key = api.http.headers["Authorization"].split(" ", 1)[1]
    return Tenant(ns, {"all": key})


def test_twenty_concurrent_signals_all_land_gapless(stack: Stack, api: Api, queue: str) -> None:
    wid = _wid()
    api.start(wid, queue)
    tenant = _tenant_of(api, stack)
    clients = [Api(stack, tenant) for _ in range(20)]
    results = _parallel(
        [
            lambda c=c, i=i: c.post(f"/workflows/{wid}/signal", {"signal_name": "s", "input": [i]})
            for i, c in enumerate(clients)
        ]
    )

    assert all(r.status_code == 200 for r in results), [r.text for r in results if r.status_code != 200]
    events = api.events(wid)
    signals = [e for e in events if e["event_type"] == "WorkflowExecutionSignaled"]
    assert len(signals) == 20
    assert sorted(e["attributes"]["input"][0] for e in signals) == list(range(20))
    assert [e["event_id"] for e in events] == list(range(1, len(events) + 1))


def _start_with_timers(
    api: Api, worker: ScriptedWorker, n_workflows: int, n_timers: int, due: float
) -> list[str]:
    wids = [_wid() for _ in range(n_workflows)]
    for wid in wids:
        api.start(wid, worker.queue)
    for _ in wids:
        task = worker.poll_workflow_task()
        cmds = [command("StartTimer", timer_id=f"t{i}", start_to_fire_timeout=due) for i in range(n_timers)]
        r = worker.complete_workflow_task(task, *cmds)
        assert r.status_code == 200, r.text
    return wids


def _fired(django_db_blocker: Any, wids: list[str]) -> list[tuple[Any, str]]:
    with django_db_blocker.unblock():
        return list(
            HistoryEvent.objects.filter(run__workflow_id__in=wids, event_type="TimerFired").values_list(
                "run_id", "attributes__timer_id"
            )
        )


def test_two_daemons_fire_each_of_1000_timers_exactly_once(
    stack: Stack, api: Api, worker: ScriptedWorker, django_db_blocker: Any
) -> None:
    extra = f"owner-{uuid.uuid4().hex[:6]}"
    proc = stack.start_shard_owner(extra)
    try:
        wids = _start_with_timers(api, worker, 100, 10, due=2)
        wait_until(lambda: len(_fired(django_db_blocker, wids)) >= 1000, timeout=30, interval=0.2)
        fired = _fired(django_db_blocker, wids)
        counts = Counter(fired)
        assert len(fired) == 1000 and max(counts.values()) == 1
        with django_db_blocker.unblock():
            per_run = Counter(r for r, _ in fired)
            assert len(per_run) == 100 and set(per_run.values()) == {10}
            assert not TimerTask.objects.filter(run__workflow_id__in=wids, kind="user_timer").exists()
            assert WorkflowExecution.objects.filter(workflow_id__in=wids).count() == 100
    finally:
        proc.terminate()
        proc.wait(10)


def test_sigkilled_daemon_shards_are_taken_over(
    stack: Stack, api: Api, worker: ScriptedWorker, django_db_blocker: Any
) -> None:
    extra = f"victim-{uuid.uuid4().hex[:6]}"
    proc = stack.start_shard_owner(extra)

    def owned() -> dict[int, int]:
        with django_db_blocker.unblock():
            return dict(Shard.objects.filter(owner=extra).values_list("shard_id", "range_id"))

    victim_shards = wait_until(owned, timeout=20, interval=0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(5)
    assert stack.shard_owner.poll() is None  # the stack's own daemon keeps running

    wids = _start_with_timers(api, worker, 20, 3, due=0.5)

    def all_fired() -> bool:
        return len(_fired(django_db_blocker, wids)) >= 60

    wait_until(all_fired, timeout=15, interval=0.2)
    assert max(Counter(_fired(django_db_blocker, wids)).values()) == 1
    with django_db_blocker.unblock():
        now = {s.shard_id: s for s in Shard.objects.filter(shard_id__in=victim_shards)}
    for shard_id, old_range in victim_shards.items():
        wait_until(lambda sid=shard_id: _owner_of(django_db_blocker, sid) not in ("", extra), timeout=15)
        with django_db_blocker.unblock():
            shard = Shard.objects.get(shard_id=shard_id)
        assert shard.owner != extra and shard.range_id > old_range
    assert now  # victim's shards still exist


def _owner_of(django_db_blocker: Any, shard_id: int) -> str:
    with django_db_blocker.unblock():
        return Shard.objects.get(shard_id=shard_id).owner
