"""Drive the frontend's ASGI application in process, as a server would, without sockets.

For tests of paths Django's test client cannot reach: the lean lane answers the hot calls
in front of Django (``chronicle.lane_asgi``), on the API's thread pool, whose
threads use their own database connections — so tests using this client need
``django_db(transaction=True)`` for their rows to be seen.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync


@dataclass
class AsgiResponse:
    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)

    def __getitem__(self, header: str) -> str:
        return self.headers[header.lower()]


def asgi_request(
    method: str,
    path: str,
    content: bytes | str = b"",
    *,
    authorization: str | None = None,
    query: str = "",
) -> AsgiResponse:
    """One request to ``chronicle.asgi.application``; ``path`` is the decoded path."""
    raw = content.encode() if isinstance(content, str) else content
    return async_to_sync(asgi_call)(method, path, raw, authorization=authorization, query=query)


def asgi_post(path: str, body: dict[str, Any], *, authorization: str | None = None) -> AsgiResponse:
    return asgi_request("POST", path, json.dumps(body), authorization=authorization)


async def asgi_call(
    method: str,
    path: str,
    raw: bytes = b"",
    *,
    authorization: str | None = None,
    query: str = "",
    gone: asyncio.Event | None = None,
) -> AsgiResponse:
    """The same, from a running event loop (``bench/profile_hot_path.py`` drives it so).

    ``gone``, once set, is the client going away before its answer (a status of 0 then
    means nothing was sent)."""
    from chronicle.asgi import application

    headers = [(b"host", b"testserver"), (b"content-type", b"application/json")]
    headers.append((b"content-length", str(len(raw)).encode()))
    if authorization is not None:
        headers.append((b"authorization", authorization.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    inbox = [{"type": "http.request", "body": raw, "more_body": False}]
    answer: dict[str, Any] = {"status": 0, "headers": {}, "body": []}
    answered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        # Django's async views and the lane's waiting calls listen for a disconnect while
        # they run: the client stays until the whole answer is sent, as a real one does,
        # unless it is told to go.
        ends = [asyncio.ensure_future(answered.wait())]
        if gone is not None:
            ends.append(asyncio.ensure_future(gone.wait()))
        try:
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for end in ends:
                end.cancel()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            answer["body"].append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    await application(scope, receive, send)
    return AsgiResponse(answer["status"], answer["headers"], b"".join(answer["body"]))
