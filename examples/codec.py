"""A payload codec: every payload is compressed before it leaves the process, as an encryption
codec would encrypt it. The server stores only what the codec produced; a client without the
codec cannot read the result.

Written as a Temporal program is, with only the imports changed. Run it against ``make run``:
``python -m examples.codec``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
import zlib
from collections.abc import Sequence
from datetime import timedelta

from sdk import activity, workflow
from sdk.api.common.v1 import Payload
from sdk.client import Client
from sdk.converter import DataConverter, PayloadCodec
from sdk.envconfig import ClientConfig
from sdk.worker import Worker


class CompressionCodec(PayloadCodec):
    """zlib over each whole serialized payload, marked so decode knows which ones it made."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": b"binary/zlib"}, data=zlib.compress(p.SerializeToString()))
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for p in payloads:
            if p.metadata.get("encoding", b"").decode() == "binary/zlib":
                decoded.append(Payload.FromString(zlib.decompress(p.data)))
            else:
                decoded.append(p)
        return decoded


@activity.defn
async def compose_greeting(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class CodecGreeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            compose_greeting, name, start_to_close_timeout=timedelta(seconds=10)
        )


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    converter = dataclasses.replace(DataConverter.default, payload_codec=CompressionCodec())
    client = await Client.connect(**config, data_converter=converter)
    task_queue = f"codec-{uuid.uuid4().hex[:8]}"
    workflow_id = f"codec-greeting-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[CodecGreeting], activities=[compose_greeting]
    ):
        result = await client.execute_workflow(
            CodecGreeting.run, "codec", id=workflow_id, task_queue=task_queue
        )
    print(f"Workflow result: {result}")
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    stored = await Client.connect(**config)  # no codec: sees what the server stored
    raw = await stored.get_workflow_handle(workflow_id).fetch_history()
    encodings = {p["metadata"]["encoding"] for p in _payloads(raw.events)}
    print(f"Stored payload encodings: {sorted(encodings)} in {len(history.events)} events")
    await stored.close()
    await client.close()


def _payloads(value: object) -> list[dict[str, object]]:
    """Every payload in the events, wherever it sits."""
    if isinstance(value, dict):
        if isinstance(value.get("metadata"), dict) and "data" in value:
            return [value]
        return [p for v in value.values() for p in _payloads(v)]
    if isinstance(value, list):
        return [p for v in value for p in _payloads(v)]
    return []


if __name__ == "__main__":
    asyncio.run(main())
