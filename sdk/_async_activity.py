"""Completing an activity from outside the worker: ``client.get_async_activity_handle(...)``.

An activity that calls ``activity.raise_complete_async()`` returns without a result and stays
started on the server; whoever holds its task token (``activity.info().task_token``) finishes
it later through this handle, by the same calls the worker makes: heartbeat, complete, fail
or report cancellation. The token carries the activity's task queue, which the server's
calls are addressed by. Without the token, the activity is found by its workflow id and
activity id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from sdk._failure import exception_to_failure
from sdk._http import ServerClient
from sdk.exceptions import ChronicleError

_NO_RESULT: Any = object()


class AsyncActivityCancelledError(ChronicleError):
    """The activity a heartbeat was sent for has been asked to cancel."""

    def __init__(self) -> None:
        super().__init__("Activity cancelled")


def task_token_for(task_queue: str, server_token: str) -> bytes:
    """The token an activity sees: its task queue and the server's token, together."""
    return f"{task_queue}\n{server_token}".encode()


def split_task_token(task_token: bytes) -> tuple[str, str]:
    queue, separator, token = bytes(task_token).decode().partition("\n")
    if not separator or not queue or not token:
        raise ValueError("not a task token from activity.info().task_token")
    return queue, token


class AsyncActivityHandle:
    """Heartbeat, complete, fail or cancel an activity that completes asynchronously.

    Addressed by its task token, or by workflow id (and run id) and activity id: the server
    then looks up the started activity's token on the first call.
    """

    def __init__(
        self,
        client: ServerClient,
        identity: str,
        *,
        task_token: bytes | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
        activity_id: str | None = None,
    ) -> None:
        self._client = client
        self._identity = identity
        self._address: tuple[str, str] | None = split_task_token(task_token) if task_token else None
        if self._address is None and not (workflow_id and activity_id):
            raise ValueError("give task_token, or workflow_id and activity_id")
        self._by_id = (workflow_id or "", run_id, activity_id or "")

    async def _token(self) -> tuple[str, str]:
        if self._address is None:
            workflow_id, run_id, activity_id = self._by_id
            ids = f"{quote(workflow_id, safe='')}/activities/{quote(activity_id, safe='')}"
            path = f"/workflows/{ids}/task-token"
            found = await self._client.transport.get(path, params={"run_id": run_id}) or {}
            self._address = (str(found["task_queue"]), str(found["task_token"]))
        return self._address

    async def _post(self, kind: str, body: dict[str, Any]) -> dict[str, Any] | None:
        queue, token = await self._token()
        # A heartbeat names no identity (the server refuses a field a call does not have).
        identity = None if kind == "heartbeat" else self._identity
        body = {"task_token": token, "identity": identity, **body}
        path = f"/task-queues/{quote(queue, safe='')}/activity-tasks/{kind}"
        return await self._client.transport.post(path, {k: v for k, v in body.items() if v is not None})

    async def heartbeat(self, *details: Any) -> None:
        """Record progress; raises ``AsyncActivityCancelledError`` once a cancel was requested."""
        answer = await self._post("heartbeat", {"details": self._client.data_converter.to_payloads(details)})
        if (answer or {}).get("cancel_requested"):
            raise AsyncActivityCancelledError()

    async def complete(self, result: Any = _NO_RESULT) -> None:
        value = None if result is _NO_RESULT else result
        await self._post("complete", {"result": self._client.data_converter.to_result(value)})

    async def fail(self, error: Exception, *, last_heartbeat_details: Sequence[Any] = ()) -> None:
        converter = self._client.data_converter
        body: dict[str, Any] = {"failure": exception_to_failure(error, converter)}
        if last_heartbeat_details:
            body["last_heartbeat_details"] = converter.to_payloads(list(last_heartbeat_details))
        await self._post("fail", body)

    async def report_cancellation(self, *details: Any) -> None:
        payloads = self._client.data_converter.to_payloads(details) if details else None
        await self._post("canceled", {"details": payloads})
