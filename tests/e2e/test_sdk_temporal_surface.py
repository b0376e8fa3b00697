"""Temporal's SDK surface end to end, on a real stack: what a ported program relies on."""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest

from sdk import activity, workflow
from sdk.api.common.v1 import Payload
from sdk.client import Client
from sdk.common import RawValue, RetryPolicy
from sdk.converter import DataConverter, PayloadCodec
from sdk.exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    RPCError,
    WorkflowFailureError,
)
from sdk.worker import SharedStateManager, Worker
from tests.conftest import Api, Stack, Tenant, wait_until

STEP = timedelta(seconds=10)


def _wid() -> str:
    return f"surface-{uuid.uuid4().hex[:8]}"


async def _client(stack: Stack, tenant: Tenant, converter: DataConverter | None = None) -> Client:
    return await Client.connect(
        stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"], data_converter=converter
    )


async def _with_worker(
    stack: Stack,
    tenant: Tenant,
    queue: str,
    body: Callable[[Client], Awaitable[Any]],
    *,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    converter: DataConverter | None = None,
    **options: Any,
) -> Any:
    client = await _client(stack, tenant, converter)
    try:
        async with Worker(client, task_queue=queue, workflows=workflows, activities=activities, **options):
            return await asyncio.wait_for(body(client), 60)
    finally:
        await client.close()


# -- a payload codec encodes what goes over the wire ------------------------------------------------


class XorZlibCodec(PayloadCodec):
    """Stands in for an encryption codec: the serialized payload, compressed and scrambled."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(
                metadata={"encoding": b"binary/scrambled", "key-id": b"test"},
                data=bytes(b ^ 0x5A for b in zlib.compress(p.SerializeToString())),
            )
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload.FromString(zlib.decompress(bytes(b ^ 0x5A for b in p.data)))
            if p.metadata.get("encoding") == b"binary/scrambled"
            else p
            for p in payloads
        ]


@activity.defn
async def reveal(secret: str) -> str:
    return f"revealed {secret}"


@workflow.defn
class Secretive:
    @workflow.run
    async def run(self, secret: str) -> str:
        return await workflow.execute_activity(reveal, secret, start_to_close_timeout=STEP)


def test_a_codec_encodes_every_payload_the_server_stores(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()
    converter = DataConverter(payload_codec=XorZlibCodec())

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Secretive.run, "open sesame", id=wid, task_queue=queue)

    result = asyncio.run(
        _with_worker(
            stack, tenant, queue, body, workflows=[Secretive], activities=[reveal], converter=converter
        )
    )
    assert result == "revealed open sesame"
    stored = api.get(f"/workflows/{wid}/history", page_size=256).json()["events"]
    text = json.dumps(stored)
    assert "sesame" not in text and "revealed" not in text
    assert text.count('"binary/scrambled"') >= 4  # input, activity input and result, workflow result

    async def plain_result() -> Any:
        client = await _client(stack, tenant)
        try:
            return await client.get_workflow_handle(wid).result()
        finally:
            await client.close()

    try:
        asyncio.run(plain_result())
    except ValueError as exc:  # without the codec, the payload cannot be read
        assert "binary/scrambled" in str(exc)
    else:
        raise AssertionError("a client without the codec read an encoded result")


def test_list_workflows_maps_histories_and_list_schedules_can_be_awaited(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    wid = _wid()

    async def body(client: Client) -> tuple[list[Any], list[Any]]:
        await client.execute_workflow(Secretive.run, "x", id=wid, task_queue=queue)
        assert await client.get_workflow_handle_for(Secretive.run, wid).result() == "revealed x"
        histories = [h async for h in client.list_workflows(f"WorkflowId = '{wid}'").map_histories()]
        schedules = [s async for s in await client.list_schedules()]
        return histories, schedules

    histories, schedules = asyncio.run(
        _with_worker(stack, tenant, queue, body, workflows=[Secretive], activities=[reveal])
    )
    assert [h.workflow_id for h in histories] == [wid]
    assert histories[0].events[0]["event_type"] == "WorkflowExecutionStarted"
    assert schedules == []


# -- activities as a ported program writes them ------------------------------------------------------


observed: list[bool] = []  # what the activities below saw of their context


class Inventory:
    """Activities as methods of an object holding a dependency (Temporal's usual pattern)."""

    def __init__(self, stock: dict[str, int]) -> None:
        self.stock = stock

    @activity.defn
    async def count(self, sku: str) -> int:
        activity.logger.info("counting %s", sku)
        observed.append(activity.client().namespace == activity.info().workflow_namespace)
        observed.append(activity.is_worker_shutdown() or activity.cancellation_details() is not None)
        return self.stock[sku]

    @activity.defn
    def reserve(self, sku: str) -> str:
        try:
            activity.client()
        except RuntimeError as err:
            observed.append("async activities only" in str(err))
        raise ApplicationError(
            "nothing to reserve yet", type="Empty", category=ApplicationErrorCategory.BENIGN
        )


@workflow.defn
class Stocktake:
    @workflow.run
    async def run(self, sku: str) -> list[Any]:
        count = await workflow.execute_activity_method(Inventory.count, sku, start_to_close_timeout=STEP)
        try:
            await workflow.execute_activity_method(
                Inventory.reserve,
                sku,
                start_to_close_timeout=STEP,
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except ActivityError as err:
            cause = err.cause
            assert isinstance(cause, ApplicationError) and cause.failure is not None
            return [count, str(cause), cause.category.name, "reserve" in cause.failure.stack_trace]
        return [count]


def test_bound_method_activities_logger_and_error_category(
    stack: Stack, tenant: Tenant, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    inventory = Inventory({"apple": 7})
    observed.clear()

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Stocktake.run, "apple", id=_wid(), task_queue=queue)

    with caplog.at_level(logging.DEBUG, logger="sdk"):
        result = asyncio.run(
            _with_worker(
                stack,
                tenant,
                queue,
                body,
                workflows=[Stocktake],
                activities=[inventory.count, inventory.reserve],
                activity_executor=ThreadPoolExecutor(2),
            )
        )
    assert result == [7, "Empty: nothing to reserve yet", "BENIGN", True]
    # The async one reached its worker's client and saw no shutdown or cancel; the sync one
    # was told activity.client() is for async activities.
    assert observed == [True, False, True]
    [counted] = [r for r in caplog.records if r.name == "sdk.activity"]
    assert counted.temporal_activity["activity_type"] == "count"  # type: ignore[attr-defined]
    assert counted.temporal_activity["workflow_type"] == "Stocktake"  # type: ignore[attr-defined]
    [failed] = [r for r in caplog.records if "attempt 1 failed" in r.getMessage()]
    assert failed.levelno == logging.DEBUG  # BENIGN: an expected outcome, not a warning
    assert getattr(failed, "__temporal_error_identifier") == "ActivityFailure"


# -- cancellation: a sync activity stops at its heartbeat; a waited-for activity may still return --


@activity.defn
def grind(rounds: int) -> str:
    """A sync activity that only learns of a cancel through its heartbeat."""
    for _ in range(rounds):
        activity.heartbeat()
        time.sleep(0.05)
    return "ground"


@activity.defn
async def stubborn() -> str:
    """Catches its cancel and returns a value anyway."""
    try:
        while True:
            activity.heartbeat()
            await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        return "finished anyway"


@workflow.defn
class Canceller:
    @workflow.run
    async def run(self, which: str) -> str:
        waits = workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        task = (
            workflow.start_activity(
                grind,
                2000,
                start_to_close_timeout=timedelta(seconds=60),
                heartbeat_timeout=timedelta(seconds=1),
                cancellation_type=waits,
            )
            if which == "sync"
            else workflow.start_activity(
                stubborn,
                start_to_close_timeout=timedelta(seconds=60),
                heartbeat_timeout=timedelta(seconds=1),
                cancellation_type=waits,
            )
        )
        await workflow.sleep(0.5)
        task.cancel()
        try:
            return f"returned {await task}"
        except asyncio.CancelledError:
            return "cancelled"


def test_a_cancelled_sync_activity_stops_at_its_heartbeat(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Canceller.run, "sync", id=wid, task_queue=queue)

    started = time.monotonic()
    result = asyncio.run(
        _with_worker(
            stack,
            tenant,
            queue,
            body,
            workflows=[Canceller],
            activities=[grind],
            activity_executor=ThreadPoolExecutor(2),
        )
    )
    # The activity would grind for 100 s: its heartbeat raised, it confirmed the cancel, and the
    # worker shut down without waiting on it.
    assert result == "cancelled" and time.monotonic() - started < 30
    events = api.event_types(wid)
    assert events.index("ActivityTaskCanceled") < events.index("WorkflowExecutionCompleted")


def test_an_activity_returning_after_a_waited_cancel_completes_the_run(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()

    async def body(client: Client) -> Any:
        return await client.execute_workflow(Canceller.run, "async", id=wid, task_queue=queue)

    result = asyncio.run(
        _with_worker(stack, tenant, queue, body, workflows=[Canceller], activities=[stubborn])
    )
    assert result == "returned finished anyway"
    events = api.event_types(wid)
    assert events[-1] == "WorkflowExecutionCompleted" and "ActivityTaskCompleted" in events


# -- a sync activity in a process pool, its heartbeats and cancel flag shared through a manager ------


@activity.defn
def crunch_elsewhere(seconds: float) -> int:
    """Outlives its 1 s heartbeat timeout, so it only completes if its heartbeats get through."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        activity.heartbeat("crunching")
        time.sleep(0.2)
    return os.getpid()


@workflow.defn
class Crunch:
    @workflow.run
    async def run(self) -> int:
        return await workflow.execute_activity(
            crunch_elsewhere,
            2.5,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


def test_a_sync_activity_runs_in_a_process_pool_with_shared_state(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def body(client: Client) -> Any:
        return await client.execute_workflow(Crunch.run, id=_wid(), task_queue=queue)

    with multiprocessing.Manager() as manager, ProcessPoolExecutor(2) as pool:
        shared = SharedStateManager.create_from_multiprocessing(manager)
        pid = asyncio.run(
            _with_worker(
                stack,
                tenant,
                queue,
                body,
                workflows=[Crunch],
                activities=[crunch_elsewhere],
                activity_executor=pool,
                shared_state_manager=shared,
            )
        )
    assert isinstance(pid, int) and pid != os.getpid()
    with pytest.raises(ValueError, match="shared_state_manager"):
        Worker(
            asyncio.run(_client(stack, tenant)),
            task_queue=queue,
            activities=[crunch_elsewhere],
            activity_executor=ProcessPoolExecutor(1),
        )


# -- async completion, dynamic workflows, the guard and failure types on a real worker --------------

tokens: asyncio.Queue[bytes] | None = None


@activity.defn
async def hand_off(order: str) -> str:
    assert tokens is not None
    await tokens.put(activity.info().task_token)
    activity.raise_complete_async()
    return "never"  # pragma: no cover


@workflow.defn
class AwaitsApproval:
    @workflow.run
    async def run(self, order: str) -> str:
        return await workflow.execute_activity(hand_off, order, start_to_close_timeout=timedelta(seconds=60))


def test_an_activity_completed_later_by_its_task_token_or_by_ids(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def body(client: Client) -> Any:
        global tokens
        tokens = asyncio.Queue()
        by_token = await client.start_workflow(AwaitsApproval.run, "o-1", id=_wid(), task_queue=queue)
        outside = client.get_async_activity_handle(task_token=await tokens.get())
        await outside.heartbeat("checking")
        await outside.complete("approved by a person")
        by_ids = await client.start_workflow(AwaitsApproval.run, "o-2", id=_wid(), task_queue=queue)
        await tokens.get()  # started; the completer knows only the ids
        named = client.get_async_activity_handle(workflow_id=by_ids.id, activity_id="1")
        await named.fail(ApplicationError("rejected", non_retryable=True))
        with pytest.raises(RPCError, match="no started activity"):
            await client.get_async_activity_handle(workflow_id=by_ids.id, activity_id="9").complete()
        try:
            await by_ids.result()
        except WorkflowFailureError as err:
            return [await by_token.result(), str(err.cause.cause)]
        return [await by_token.result()]

    result = asyncio.run(
        _with_worker(stack, tenant, queue, body, workflows=[AwaitsApproval], activities=[hand_off])
    )
    assert result == ["approved by a person", "rejected"]


@workflow.defn(dynamic=True)
class Anything:
    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> str:
        values = [workflow.payload_converter().from_payload(a.payload) for a in args]
        return f"{workflow.info().workflow_type}{values}"


class Refused(Exception):
    pass


@workflow.defn
class Strict:
    @workflow.run
    async def run(self, what: str) -> str:
        if what == "clock":
            return str(datetime.now())  # noqa: DTZ005 - the call the guard refuses
        raise Refused("listed on the worker")


def test_dynamic_workflow_guard_and_failure_types_on_a_worker(
    stack: Stack, tenant: Tenant, api: Api, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = _wid()

    async def body(client: Client) -> list[Any]:
        dynamic = await client.execute_workflow("AnyName", args=[1, "two"], id=_wid(), task_queue=queue)
        await client.start_workflow(Strict.run, "clock", id=clock, task_queue=queue)
        try:
            await client.execute_workflow(Strict.run, "fail", id=_wid(), task_queue=queue)
        except WorkflowFailureError as err:
            return [dynamic, str(err.cause)]
        return [dynamic]

    result = asyncio.run(
        _with_worker(
            stack,
            tenant,
            queue,
            body,
            workflows=[Anything, Strict],
            workflow_failure_exception_types=[Refused],
        )
    )
    assert result == ["AnyName[1, 'two']", "Refused: listed on the worker"]
    failed = wait_until(lambda: _task_failure(api, clock), timeout=15)
    assert "workflow.now()" in failed
    # The worker's log record carries Temporal's marker, which log filters look for.
    marked = [r for r in caplog.records if getattr(r, "__temporal_error_identifier", None)]
    assert any(getattr(r, "__temporal_error_identifier") == "WorkflowTaskFailure" for r in marked)


def _task_failure(api: Api, workflow_id: str) -> str | None:
    events = api.get(f"/workflows/{workflow_id}/history", page_size=256).json()["events"]
    for event in events:
        if event["event_type"] == "WorkflowTaskFailed":
            return str(event["attributes"]["failure"]["message"])
    return None
