"""The UI's query page against a real stack and an SDK worker: a viewer asks a running
workflow a query and sees the answer, and the query is audited."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid
from collections.abc import Iterator

import pytest

from executions.models import AuditAction, AuditEntry
from history.models import WorkflowExecution
from namespaces.models import MemberRole, Namespace
from namespaces.services import api_key_issue
from sdk import workflow
from sdk.client import Client as SdkClient
from sdk.worker import Worker
from tests.conftest import Stack
from tests.factories import NamespaceFactory
from tests.integration.test_ui import detail_url, signed_in
from tests.integration.test_ui_reset import body_of


@workflow.defn
class Basket:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.done = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.done)
        return len(self.items)

    @workflow.signal
    def add(self, item: str) -> None:
        self.items.append(item)

    @workflow.signal
    def close(self) -> None:
        self.done = True

    @workflow.query
    def contents(self, prefix: str) -> list[str]:
        return [f"{prefix}{item}" for item in self.items]


@pytest.fixture
def basket(stack: Stack) -> Iterator[tuple[Namespace, WorkflowExecution]]:
    """A running Basket with one item, its SDK worker polling the stack until the test ends."""
    namespace = NamespaceFactory(name=f"shop-{uuid.uuid4().hex[:6]}")
    _, key = api_key_issue(namespace=namespace, name="worker", roles=["client", "worker"])
    queue = f"q-{uuid.uuid4().hex[:8]}"
    started = threading.Event()
    stop = threading.Event()

    async def serve() -> None:
        client = await SdkClient.connect(stack.url, namespace=namespace.name, api_key=key)
        async with Worker(client, task_queue=queue, workflows=[Basket]):
            handle = await client.start_workflow(Basket.run, id="basket-1", task_queue=queue)
            await handle.signal(Basket.add, "apple")
            started.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)
            await handle.signal(Basket.close)
            await handle.result()
        await client.close()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert started.wait(20), "the worker did not start the workflow"
    yield namespace, WorkflowExecution.objects.get(namespace=namespace, workflow_id="basket-1")
    stop.set()
    thread.join(20)


@pytest.mark.django_db(transaction=True)
def test_a_viewer_queries_the_workflow_and_the_query_is_audited(
    basket: tuple[Namespace, WorkflowExecution],
) -> None:
    namespace, run = basket
    viewer = signed_in(namespace, MemberRole.VIEWER)
    form = {"request_id": "q1", "query_type": "contents", "query_args": '"fresh "', "reason": "customer call"}
    response = viewer.post(detail_url(run, "query/"), form)
    page = response.content.decode()
    assert response.status_code == 200, page[:800]
    answer = re.search(r'<pre id="query-answer">(.*?)</pre>', page, flags=re.S)
    assert answer is not None and json.loads(answer.group(1).replace("&quot;", '"')) == ["fresh apple"]
    entry = AuditEntry.objects.get(namespace=namespace)
    assert (entry.action, entry.reason, entry.result) == (AuditAction.QUERY, "customer call", "answered")
    assert entry.details == {"query_type": "contents", "workflow_type": "Basket"}

    # A handler the workflow lacks: the worker's message, audited as failed.
    unknown = viewer.post(detail_url(run, "query/"), {"request_id": "q2", "query_type": "nope"})
    assert unknown.status_code == 422 and b"unknown query type" in unknown.content
    assert AuditEntry.objects.get(request_id="q2").result.startswith("failed: unknown query type")
    # Names asked before are offered next time.
    assert '<option value="contents">' in body_of(viewer, detail_url(run, "query/"))
