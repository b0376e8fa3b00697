"""``sdk.testing``: ``ActivityEnvironment`` runs activities with no worker (info, heartbeats,
cancellation, sync and async), and ``WorkflowEnvironment``'s parts that need no server."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sdk import activity
from sdk.client import Client
from sdk.exceptions import CancelledError
from sdk.testing import ActivityEnvironment, WorkflowEnvironment
from sdk.testing._workflow import (
    LocalServer,
    _LocalEnvironment,
    _TimeSkippingEnvironment,
    find_server_checkout,
)


@activity.defn
async def count_async(n: int) -> str:
    for i in range(n):
        activity.heartbeat(i)
        await asyncio.sleep(0)
    info = activity.info()
    return f"{info.activity_id}/{info.activity_type}/{info.attempt}/{info.task_queue}"


@activity.defn
def count_sync(n: int) -> str:
    for i in range(n):
        activity.heartbeat(i, "sync")
    return f"{activity.info().workflow_id} counted {n}"


def test_an_async_activity_runs_with_default_info_and_heartbeats() -> None:
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    assert asyncio.run(env.run(count_async, 3)) == "test/unknown/1/test"
    assert beats == [(0,), (1,), (2,)]
    assert not activity.in_activity()  # the context ends with the run


def test_a_sync_activity_runs_in_this_thread_and_returns_directly() -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(ActivityEnvironment.default_info(), workflow_id="wf-7")
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    assert env.run(count_sync, 2) == "wf-7 counted 2"
    assert beats == [(0, "sync"), (1, "sync")]


def test_default_info_is_temporals() -> None:
    info = ActivityEnvironment.default_info()
    assert (info.activity_id, info.activity_type, info.attempt) == ("test", "unknown", 1)
    assert (info.task_queue, info.workflow_id, info.workflow_type) == ("test", "test", "test")
    assert info.start_to_close_timeout is not None and info.start_to_close_timeout.total_seconds() == 1
    assert info.heartbeat_details == [] and not info.is_local


@activity.defn
async def waits_for_cancel() -> str:
    try:
        while True:
            activity.heartbeat()
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        return f"cancelled? {activity.is_cancelled()}, {activity.cancellation_details()}"


def test_cancel_reaches_an_async_activity_as_cancelled_error() -> None:
    env = ActivityEnvironment()
    beats = 0

    def on_heartbeat(*_: Any) -> None:
        nonlocal beats
        beats += 1
        if beats == 3:
            env.cancel()

    env.on_heartbeat = on_heartbeat
    result = asyncio.run(env.run(waits_for_cancel))
    assert result.startswith("cancelled? True")
    assert "cancel_requested=True" in result
    assert beats == 3


@activity.defn
async def ignores_nothing() -> None:
    await asyncio.sleep(30)


def test_an_uncaught_cancel_surfaces_from_run() -> None:
    env = ActivityEnvironment()

    async def scenario() -> None:
        running = asyncio.ensure_future(env.run(ignores_nothing))
        await asyncio.sleep(0.05)
        env.cancel()
        await running

    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario())
    assert time.monotonic() - started < 5


@activity.defn
def sync_until_cancelled() -> str:
    try:
        for _ in range(1000):
            activity.heartbeat()
            time.sleep(0.01)
    except CancelledError:
        return f"stopped, is_cancelled={activity.is_cancelled()}"
    return "ran to the end"


def test_cancel_from_another_thread_raises_at_a_sync_activitys_heartbeat() -> None:
    env = ActivityEnvironment()
    beat = threading.Event()
    env.on_heartbeat = lambda *_: beat.set()
    threading.Thread(target=lambda: beat.wait(5) and env.cancel()).start()
    assert env.run(sync_until_cancelled) == "stopped, is_cancelled=True"


@activity.defn(no_thread_cancel_exception=True)
def polls_cancel() -> int:
    beats = 0
    while not activity.is_cancelled():
        activity.heartbeat()
        beats += 1
    return beats


def test_no_thread_cancel_exception_leaves_a_sync_activity_to_poll() -> None:
    env = ActivityEnvironment()
    count = 0

    def on_heartbeat(*_: Any) -> None:
        nonlocal count
        count += 1
        if count == 4:
            env.cancel()

    env.on_heartbeat = on_heartbeat
    assert env.run(polls_cancel) == 4


@activity.defn
async def uses_client() -> Any:
    return activity.client()


@activity.defn
def uses_client_sync() -> Any:
    return activity.client()


def test_client_is_given_to_async_activities_only() -> None:
    with pytest.raises(RuntimeError, match="No client"):
        asyncio.run(ActivityEnvironment().run(uses_client))
    marker = object()
    assert asyncio.run(ActivityEnvironment(client=marker).run(uses_client)) is marker
    with pytest.raises(RuntimeError, match="No client"):
        ActivityEnvironment(client=marker).run(uses_client_sync)


@activity.defn
async def heartbeats_from_a_child_task() -> None:
    async def child() -> None:
        activity.heartbeat("from child")

    await asyncio.create_task(child())


def test_heartbeats_from_tasks_the_activity_creates_are_captured() -> None:
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    asyncio.run(env.run(heartbeats_from_a_child_task))
    assert beats == [("from child",)]


def test_worker_shutdown_and_assertions_pass_through() -> None:
    env = ActivityEnvironment()
    env.worker_shutdown()
    assert env.run(activity.is_worker_shutdown) is True

    def fails() -> None:
        assert 1 == 2, "plain assert"

    with pytest.raises(AssertionError, match="plain assert"):
        env.run(fails)


def test_only_a_time_skipping_environment_skips_and_it_checks_its_arguments(tmp_path: Path) -> None:
    """The server-free half of ``start_time_skipping``: the e2e tier runs the real stack."""

    async def scenario() -> None:
        client = await Client.connect("http://127.0.0.1:9", namespace="default", api_key="k")
        server = LocalServer(tmp_path, 9, [])
        assert not _LocalEnvironment(client, server).supports_time_skipping
        skipping = _TimeSkippingEnvironment(client, server)
        assert skipping.supports_time_skipping
        with pytest.raises(RuntimeError, match="not running"), skipping.auto_time_skipping_disabled():
            pass
        await skipping.shutdown()
        assert not server.state_dir.exists()

    asyncio.run(scenario())
    with pytest.raises(TypeError, match="no_such_option"):
        asyncio.run(WorkflowEnvironment.start_time_skipping(no_such_option=True))
    # Temporal's download options are accepted; the checkout option is start_local's.
    with pytest.raises(RuntimeError, match="no Chronicle server checkout found"):
        asyncio.run(
            WorkflowEnvironment.start_time_skipping(
                test_server_existing_path=tmp_path, test_server_download_version="1.0"
            )
        )


def test_from_client_wraps_a_client_and_closes_it() -> None:
    async def scenario() -> WorkflowEnvironment:
        client = await Client.connect("http://127.0.0.1:9", namespace="default", api_key="k")
        async with WorkflowEnvironment.from_client(client) as env:
            assert env.client is client
            assert not env.supports_time_skipping
            before = await env.get_current_time()
            await env.sleep(0.01)
            assert await env.get_current_time() > before
            with env.auto_time_skipping_disabled():
                pass
        return env

    asyncio.run(scenario())


def test_start_local_needs_a_server_checkout(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no Chronicle server checkout found"):
        find_server_checkout(tmp_path)
    with pytest.raises(TypeError, match="no_such_option"):
        asyncio.run(WorkflowEnvironment.start_local(no_such_option=True))
    with pytest.raises(RuntimeError, match="no Chronicle server checkout found"):
        asyncio.run(WorkflowEnvironment.start_local(dev_server_existing_path=tmp_path))
