"""The lean lane's ASGI handler: hot API calls answered in front of Django.

Measured against the same lane as plain Django views behind ``ApiHandler``, this handler
was the cheaper (docs/architecture.md, "The lean lane"): it skips resolving the URL twice
(once to pick the path, once to find the view), building Django's request and response
objects and its response logging, none of which these calls use. What it keeps is what
the calls need from Django: the request-started and request-finished signals around
each trip to the API's reused thread pool, so database connections are checked out and
handed back exactly as for every other API call. A call that waits (a history long-poll)
waits on the event loop between trips, holding neither a thread nor a connection.

Each app's lane is a :class:`Route`: a compiled path pattern and the handler of the calls
it matches. This module imports no app; ``chronicle.asgi`` wires the apps' routes in.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, TypeVar

from django.conf import settings
from django.core import signals

from chronicle.db import unavailable
from chronicle.errors import ChronicleError
from chronicle.lane import Call, Reply, error_reply

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
T = TypeVar("T")
_log = logging.getLogger("django.request")
_INTERNAL = Reply(500, b'{"code":"internal","message":"internal error"}')


class Trips:
    """A call's trips to the pool: each runs between Django's request signals."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` on a pool thread, in this call's context (its log binding); its
        database connection is handed back after.

        The loop's own executor hop, not asgiref's ``sync_to_async``: the calls need none of
        what that adds (a thread-sensitive executor, a shield, nested ``async_to_sync``), and
        it cost about 0.05 ms of CPU more a trip."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, context.run, _between_signals, work, *args)


Handler = Callable[[Call, Trips], Awaitable[Reply]]


@dataclass(frozen=True)
class Route:
    """The paths of one app's lane and how their calls are answered.

    ``pattern`` matches the decoded path (``<str:...>`` segments as ``[^/]+``); ``handler``
    picks the answer from the match; ``methods``, when given, limits the lane to those
    verbs, leaving the others to Django (a path whose other verbs stay DRF views)."""

    pattern: re.Pattern[str]
    handler: Callable[[re.Match[str]], Handler]
    methods: frozenset[str] | None = None

    def match(self, method: str, path: str) -> re.Match[str] | None:
        if self.methods is not None and method not in self.methods:
            return None
        return self.pattern.match(path)


def one_trip(respond: Callable[[Call], Reply]) -> Handler:
    """A handler that answers in one trip to the pool (refusals as ``{code, ...}`` errors)."""

    def on_thread(call: Call) -> Reply:
        try:
            return respond(call)
        except ChronicleError as error:
            return error_reply(error)

    async def handle(call: Call, trips: Trips) -> Reply:
        return await trips.run(on_thread, call)

    return handle


async def serve(
    scope: dict[str, Any],
    receive: Receive,
    send: Send,
    route: Route,
    match: re.Match[str],
    pool: ThreadPoolExecutor,
) -> None:
    """Read the body, answer the call, send the answer."""
    raw = await _read_body(receive)
    if raw is None:
        return  # the client went away
    call = Call(
        method=scope["method"],
        authorization=_header(scope, b"authorization"),
        params={name: value for name, value in match.groupdict().items() if value is not None},
        query=scope.get("query_string", b""),
        body=raw,
    )
    try:
        handler = route.handler(match)
        if getattr(handler, "waits", False):
            answered = await _unless_gone(handler(call, Trips(pool)), receive)
            if answered is None:
                return  # the client went away while the call waited
            reply = answered
        else:
            reply = await handler(call, Trips(pool))
    except ChronicleError as error:
        reply = error_reply(error)
    except Exception as error:
        outage = unavailable(error)
        if outage is None:
            _log.exception("Internal Server Error: %s", scope["path"])
        reply = _INTERNAL if outage is None else error_reply(outage)
    if reply.status >= 400:
        _log.warning("%s: %s", HTTPStatus(reply.status).phrase, scope["path"])
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(reply.body)).encode())]
    await send(
        {"type": "http.response.start", "status": reply.status, "headers": headers + list(reply.headers)}
    )
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else reply.body})


def waiting(handler: Handler) -> Handler:
    """Mark ``handler`` as one that may wait (a long-poll): it is given up when its client
    goes away, as Django gives up an async view, so a poll whose worker is gone stops
    waiting and claims no task that nobody would receive."""
    setattr(handler, "waits", True)  # noqa: B010 (an attribute of a function)
    return handler


async def _unless_gone(answer: Awaitable[Reply], receive: Receive) -> Reply | None:
    """``answer``'s reply, or None (``answer`` cancelled) if the client disconnects first."""
    answering = asyncio.ensure_future(answer)
    gone = asyncio.ensure_future(_disconnect(receive))
    try:
        await asyncio.wait((answering, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not answering.done():
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering
    return None if answering.cancelled() else answering.result()


async def _disconnect(receive: Receive) -> None:
    """Return once the client has gone (the body was read before)."""
    while (await receive())["type"] != "http.disconnect":
        pass


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


def _between_signals(work: Callable[..., T], *args: Any) -> T:
    """Run ``work`` between Django's request signals, which check out and hand back the
    thread's database connection as they do around every view."""
    signals.request_started.send(sender=__name__)
    try:
        return work(*args)
    finally:
        signals.request_finished.send(sender=__name__)
