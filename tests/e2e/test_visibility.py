"""Visibility end to end: an admin registers attributes over REST, SDK workflows upsert
them, and clients list and count by them with the filter language."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sdk import workflow
from sdk._http import RPCError
from sdk.client import Client
from sdk.search_attributes import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant, wait_until

CUSTOMER = SearchAttributeKey.for_keyword("CustomerId")
AMOUNT = SearchAttributeKey.for_int("Amount")
DUE = SearchAttributeKey.for_datetime("Due")
TAGS = SearchAttributeKey.for_keyword_list("Tags")
REGISTRY = {"CustomerId": "Keyword", "Amount": "Int", "Due": "Datetime", "Tags": "KeywordList"}


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def registered(api: Api) -> Api:
    for name, kind in REGISTRY.items():
        r = api.post("/search-attributes", {"name": name, "type": kind})
        assert r.status_code == 201, r.text
    return api


@workflow.defn
class Invoice:
    """Tags itself as it goes: typed updates first, then the dict form, then waits to close."""

    def __init__(self) -> None:
        self.paid = False

    @workflow.run
    async def run(self, customer: str, amount: int) -> dict[str, Any]:
        workflow.upsert_search_attributes(
            [
                CUSTOMER.value_set(customer),
                AMOUNT.value_set(amount),
                DUE.value_set(datetime(2026, 5, 1, tzinfo=UTC)),
            ]
        )
        workflow.upsert_search_attributes({"Tags": ["invoice", "open"]})
        await workflow.wait_condition(lambda: self.paid)
        workflow.upsert_search_attributes([TAGS.value_set(["invoice", "paid"])])
        return dict(workflow.info().search_attributes)

    @workflow.signal
    def pay(self) -> None:
        self.paid = True


@workflow.defn
class Mislabelled:
    @workflow.run
    async def run(self) -> None:
        workflow.upsert_search_attributes({"NotRegistered": ["x"]})


async def _client(stack: Stack, tenant: Tenant) -> Client:
    return await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])


def test_admin_registers_lists_and_removes_attributes(stack: Stack, tenant: Tenant, api: Api) -> None:
    client_only = Api(stack, tenant, key="client")
    assert client_only.post("/search-attributes", {"name": "Region", "type": "Keyword"}).status_code == 403
    assert api.post("/search-attributes", {"name": "Region", "type": "Keyword"}).status_code == 201
    assert api.post("/search-attributes", {"name": "Region", "type": "Keyword"}).status_code == 200
    conflict = api.post("/search-attributes", {"name": "Region", "type": "Int"})
    assert conflict.status_code == 409, conflict.text
    bad = api.post("/search-attributes", {"name": "Region", "type": "Colour"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"
    listing = api.get("/search-attributes").json()
    assert listing["custom"] == {"Region": "Keyword"} and listing["system"]["StartTime"] == "Datetime"
    assert api.http.delete(api.base + "/search-attributes/Region").status_code == 200
    assert api.http.delete(api.base + "/search-attributes/Region").status_code == 404


def test_workflows_upsert_typed_attributes_and_clients_find_them(
    stack: Stack, tenant: Tenant, registered: Api, queue: str
) -> None:
    ids = {name: _wid() for name in ("small", "large", "other")}

    async def scenario() -> None:
        client = await _client(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Invoice]):
            small = await client.start_workflow(
                Invoice.run, args=["acme", 10], id=ids["small"], task_queue=queue
            )
            large = await client.start_workflow(
                Invoice.run, args=["acme", 900], id=ids["large"], task_queue=queue
            )
            await client.start_workflow(
                Invoice.run,
                args=["globex", 50],
                id=ids["other"],
                task_queue=queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(CUSTOMER, "globex")]),
            )

            async def listed(query: str) -> set[str]:
                return {row.workflow_id async for row in client.list_workflows(query)}

            async def upserted() -> bool:
                return await listed("Tags = 'open'") == set(ids.values())

            deadline = asyncio.get_running_loop().time() + 30
            while not await upserted():
                assert asyncio.get_running_loop().time() < deadline, "upserts never became visible"
                await asyncio.sleep(0.2)

            assert await listed("CustomerId = 'acme' AND Amount > 100") == {ids["large"]}
            assert await listed("CustomerId = 'acme' OR Amount BETWEEN 40 AND 60") == set(ids.values())
            assert await listed("Due = '2026-05-01T00:00:00Z' AND CustomerId STARTS_WITH 'glo'") == {
                ids["other"]
            }
            ordered = [
                row.workflow_id
                async for row in client.list_workflows("Tags = 'invoice' ORDER BY Amount DESC")
            ]
            assert ordered == [ids["large"], ids["other"], ids["small"]]
            paged = [row.workflow_id async for row in client.list_workflows("Tags = 'invoice'", page_size=1)]
            assert sorted(paged) == sorted(ids.values())

            await small.signal(Invoice.pay)
            final = await small.result()
            assert final["Tags"] == ["invoice", "paid"] and final["Amount"] == 10
            described = await large.describe()
            assert described.search_attributes["Due"] == "2026-05-01T00:00:00.000000Z"

            count = await client.count_workflows("Tags = 'invoice' GROUP BY ExecutionStatus")
            groups = {tuple(g.group_values): g.count for g in count.groups}
            assert count.count == 3 and groups == {("Running",): 2, ("Completed",): 1}
            assert (await client.count_workflows("Tags = 'paid'")).count == 1
        await client.close()

    asyncio.run(scenario())


def test_an_unregistered_upsert_fails_the_workflow_task(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid = _wid()

    async def scenario() -> None:
        client = await _client(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Mislabelled]):
            await client.start_workflow(Mislabelled.run, id=wid, task_queue=queue)
            failed = lambda: "WorkflowTaskFailed" in api.event_types(wid)  # noqa: E731
            await asyncio.to_thread(wait_until, failed, 20)
        await client.close()

    asyncio.run(scenario())
    failed = next(e for e in api.events(wid) if e["event_type"] == "WorkflowTaskFailed")
    assert failed["attributes"]["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES"
    assert "NotRegistered" in str(failed["attributes"])


def test_a_start_with_a_wrong_type_is_refused(registered: Api, queue: str) -> None:
    r = registered.post(
        "/workflows",
        {
            "workflow_id": _wid(),
            "workflow_type": "T",
            "task_queue": queue,
            "search_attributes": {"Amount": "lots"},
        },
    )
    assert r.status_code == 400 and "is Int" in r.json()["message"], r.text
    assert r.json()["details"]["cause"] == "BadSearchAttributes"


def test_a_bad_query_gets_a_400_pointing_at_the_error(stack: Stack, tenant: Tenant, registered: Api) -> None:
    r = registered.get("/workflows", query="Amount > 'ten'")
    body = r.json()
    assert r.status_code == 400 and body["code"] == "invalid_query"
    assert body["details"]["position"] == 9 and body["details"]["snippet"].endswith("\n         ^")
    r = registered.get("/workflow-count", query="CustomerId = ")
    assert r.status_code == 400 and r.json()["details"]["position"] == 13

    async def through_the_sdk() -> RPCError:
        client = await _client(stack, tenant)
        try:
            with pytest.raises(RPCError) as caught:
                [row async for row in client.list_workflows("WorkflowId = 'a' AND AND")]
            return caught.value
        finally:
            await client.close()

    error = asyncio.run(through_the_sdk())
    assert error.status == 400 and error.code == "invalid_query" and "position 21" in str(error)


def test_start_time_queries_take_rfc3339_strings(stack: Stack, tenant: Tenant, api: Api, queue: str) -> None:
    wid = _wid()
    api.start(wid, queue)
    since = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    rows = api.get("/workflows", query=f"WorkflowId = '{wid}' AND StartTime > '{since}'").json()["executions"]
    assert [row["workflow_id"] for row in rows] == [wid]
