"""The lean lane's ASGI handler: the worker's token calls answered in front of Django.

Measured against the same lane as plain Django views behind ``ApiHandler``, this handler
was the cheaper (docs/architecture.md, "The lean lane"): it skips resolving the URL twice
(once to pick the path, once to find the view), building Django's request and response
objects and its response logging, none of which these calls use. What it keeps is what
the calls need from Django: the request-started and request-finished signals around the
work, on the same reused thread pool, so database connections are checked and handed
back exactly as for every other API call.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals

from matching.lane import ENDPOINTS, Call, Reply, answer

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_BY_PATH = {endpoint.path: endpoint for endpoint in ENDPOINTS}
# The URLs Django's resolver matched for these views: ``<str:...>`` is one path segment.
LANE_PATH = re.compile(
    r"/api/v1/namespaces/(?P<namespace>[^/]+)/task-queues/(?P<task_queue>[^/]+)/"
    r"(?P<endpoint>" + "|".join(re.escape(path) for path in _BY_PATH) + r")\Z"
)
_log = logging.getLogger("django.request")
_INTERNAL = Reply(500, b'{"code":"internal","message":"internal error"}')


def lane_call(path: str) -> re.Match[str] | None:
    """The lane's match for an HTTP path, or None for every other path."""
    return LANE_PATH.match(path)


async def serve(
    scope: dict[str, Any], receive: Receive, send: Send, match: re.Match[str], pool: ThreadPoolExecutor
) -> None:
    """Read the body, answer on ``pool`` in one trip, send the answer."""
    raw = await _read_body(receive)
    if raw is None:
        return  # the client went away
    call = Call(
        endpoint=_BY_PATH[match["endpoint"]],
        method=scope["method"],
        authorization=_header(scope, b"authorization"),
        namespace=match["namespace"],
        task_queue=match["task_queue"],
        body=raw,
    )
    reply = await sync_to_async(_answer_on_thread, thread_sensitive=False, executor=pool)(call, scope["path"])
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(reply.body)).encode())]
    await send(
        {"type": "http.response.start", "status": reply.status, "headers": headers + list(reply.headers)}
    )
    await send({"type": "http.response.body", "body": reply.body})


async def _read_body(receive: Receive) -> bytes | None:
    """The body, kept up to one byte past the size limit (enough to refuse it with 413)."""
    keep = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        if size < keep:
            chunks.append(chunk[: keep - size])
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _answer_on_thread(call: Call, path: str) -> Reply:
    """Answer between Django's request signals, which check out and hand back the thread's
    database connection as they do around every view."""
    signals.request_started.send(sender=__name__)
    try:
        reply = answer(call)
    except Exception:
        _log.exception("Internal Server Error: %s", path)
        return _INTERNAL
    finally:
        signals.request_finished.send(sender=__name__)
    if reply.status >= 400:
        _log.warning("%s: %s", HTTPStatus(reply.status).phrase, path)
    return reply
