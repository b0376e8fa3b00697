"""The worker's report batcher: two reports on their way at once; the rest go together,
each answered (or refused) as it would have been alone."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from sdk._http import NotFoundError, RateLimitedError
from sdk.worker._reports import ReportBatcher

BASE = "/task-queues/q/"


class Transport:
    """Records requests; each waits until the test releases it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.release = asyncio.Event()
        self.fail_batches = False

    async def post(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any] | None:
        self.sent.append((path, body))
        await self.release.wait()
        if path == BASE + "responses":
            if self.fail_batches:
                raise httpx.ConnectError("down")
            return {"responses": [_answer(report) for report in body["responses"]]}
        return {"alone": body["n"]}


def _answer(report: dict[str, Any]) -> dict[str, Any]:
    n = report["body"]["n"]
    if n == 3:
        return {"status": 404, "body": {"code": "stale_task_token", "message": "gone"}}
    if n == 4:
        return {"status": 429, "body": {"code": "resource_exhausted", "message": "slow"}, "retry_after": 2.5}
    return {"status": 200, "body": {"together": n}}


async def _run(transport: Transport) -> list[Any]:
    batcher = ReportBatcher(transport, BASE)  # type: ignore[arg-type]
    calls = [asyncio.create_task(batcher.post(BASE + "workflow-tasks/complete", {"n": n})) for n in range(6)]
    await asyncio.sleep(0.01)
    sent_first = list(transport.sent)
    transport.release.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    return [sent_first, results]


def test_two_go_alone_and_the_rest_together_each_answered_as_alone() -> None:
    transport = Transport()
    sent_first, results = asyncio.run(_run(transport))

    assert [path for path, _ in sent_first] == [BASE + "workflow-tasks/complete"] * 2
    together = [body for path, body in transport.sent if path == BASE + "responses"]
    assert [[r["body"]["n"] for r in body["responses"]] for body in together] == [[2, 3, 4, 5]]
    assert together[0]["responses"][0]["kind"] == "workflow-tasks/complete"
    assert results[:3] == [{"alone": 0}, {"alone": 1}, {"together": 2}]
    assert isinstance(results[3], NotFoundError) and results[3].code == "stale_task_token"
    assert isinstance(results[4], RateLimitedError) and results[4].retry_after == 2.5
    assert results[5] == {"together": 5}


def test_a_failed_batch_request_reaches_each_caller() -> None:
    transport = Transport()
    transport.fail_batches = True
    _, results = asyncio.run(_run(transport))

    assert results[:2] == [{"alone": 0}, {"alone": 1}]
    assert all(isinstance(r, httpx.ConnectError) for r in results[2:])


def test_a_path_of_another_queue_is_sent_alone() -> None:
    async def scenario() -> Any:
        transport = Transport()
        transport.release.set()
        batcher = ReportBatcher(transport, BASE)  # type: ignore[arg-type]
        return await batcher.post("/task-queues/other/activity-tasks/complete", {"n": 9}), transport.sent

    answer, sent = asyncio.run(scenario())
    assert answer == {"alone": 9} and sent == [("/task-queues/other/activity-tasks/complete", {"n": 9})]


@pytest.mark.parametrize("n", [1, 2])
def test_with_nothing_on_its_way_a_report_goes_at_once(n: int) -> None:
    async def scenario() -> Any:
        transport = Transport()
        transport.release.set()
        batcher = ReportBatcher(transport, BASE)  # type: ignore[arg-type]
        return [
            await batcher.post(BASE + "activity-tasks/complete", {"n": i}) for i in range(n)
        ], transport.sent

    answers, sent = asyncio.run(scenario())
    assert answers == [{"alone": i} for i in range(n)]
    assert [path for path, _ in sent] == [BASE + "activity-tasks/complete"] * n
