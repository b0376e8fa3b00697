"""Temporal's SDK surface end to end, on a real stack: what a ported program relies on."""

from __future__ import annotations

import asyncio
import json
import uuid
import zlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from sdk import activity, workflow
from sdk.api.common.v1 import Payload
from sdk.client import Client
from sdk.converter import DataConverter, PayloadCodec
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant

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
        histories = [h async for h in client.list_workflows(f"WorkflowId = '{wid}'").map_histories()]
        schedules = [s async for s in await client.list_schedules()]
        return histories, schedules

    histories, schedules = asyncio.run(
        _with_worker(stack, tenant, queue, body, workflows=[Secretive], activities=[reveal])
    )
    assert [h.workflow_id for h in histories] == [wid]
    assert histories[0].events[0]["event_type"] == "WorkflowExecutionStarted"
    assert schedules == []
