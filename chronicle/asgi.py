"""ASGI entry point: the REST API and the site through Django; websockets via Channels.

The hot calls go to the lean lane (:mod:`chronicle.lane_asgi`), in front of Django: the
worker's token calls (complete, fail, heartbeat, answer; :mod:`matching.lane`) and the
client's start, signal-with-start, signal and history read (:mod:`executions.lane`). Two
Django handlers share the rest:
the other ``/api/v1/`` paths go to :class:`ApiHandler`, which runs no middleware;
everything else (UI, admin, schema) gets the full stack from ``settings.MIDDLEWARE``.
The probes (``/healthz``, ``/readyz``: :mod:`chronicle.health`) and the Prometheus scrape
(``/metrics``: :mod:`chronicle.metrics`) are answered before any of them; every other
request is counted and timed by route, and bound to its log records
(:mod:`chronicle.logging_config`). Websockets (the UI's live mode) go through Channels with the session's user
(``AuthMiddlewareStack``), from allowed origins only, since a session cookie would
otherwise let another site open a socket as the signed-in user.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.core import signals
from django.core.asgi import get_asgi_application
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.urls import Resolver404, get_resolver, set_script_prefix, set_urlconf
from django.utils.log import log_response

from chronicle import health, heap, metrics
from chronicle.logging_config import bind_request
from chronicle.waiting_views import waits_on_its_thread

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

API_PREFIX = "/api/v1/"
Asgi = Callable[
    [dict[str, Any], Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]
]


class ApiHandler(ASGIHandler):
    """The REST API's handler: the views without the browser middleware, and a sync view
    served in one trip to a thread.

    API calls authenticate with a bearer key and answer JSON, so sessions, CSRF,
    messages, the auth user and frame options do nothing for them. Under ASGI each
    of those sync middlewares still moved the request between the event loop and a
    thread twice; on a 2-core machine those hops were the largest part of a signal's
    cost.

    Django's own path for a sync view then still made three trips (the request-started
    signal, the view, the close) to a thread it started for that one request, plus two
    tasks to watch for a disconnect. Here a sync view's request is built, answered and
    closed in one trip to :data:`API_THREADS`, whose threads serve request after
    request. Async views (the task-queue long-polls) and views that wait on a thread
    (marked with :func:`chronicle.waiting_views.waiting_view`: queries) take
    Django's path unchanged, so no number of waiting clients can use up the pool.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        # The same attributes Django's load_middleware sets, with every list empty.
        handler: Any = self  # the stubs do not declare BaseHandler's private members
        handler._view_middleware = []
        handler._template_response_middleware = []
        handler._exception_middleware = []
        get_response = handler._get_response_async if is_async else handler._get_response
        handler._middleware_chain = convert_exception_to_response(get_response)
        self._sync_chain = convert_exception_to_response(handler._get_response)

    async def handle(
        self,
        scope: dict[str, Any],
        receive: Callable[..., Awaitable[Any]],
        send: Callable[..., Awaitable[Any]],
    ) -> None:
        if _takes_djangos_path(scope["path"]):
            await super().handle(scope, receive, send)
            return
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            response = await sync_to_async(self._respond, thread_sensitive=False, executor=API_THREADS)(
                scope, body_file
            )
            try:
                await self.send_response(response, send)
            finally:
                if response.streaming:  # none of the API's views streams; closed after sending
                    await sync_to_async(response.close, thread_sensitive=False, executor=API_THREADS)()
        finally:
            body_file.close()

    def _respond(self, scope: dict[str, Any], body_file: Any) -> Any:
        """Build the request, run the view, and close a whole (not streamed) response, all
        on this thread: the request-finished signal hands back the connection the view used."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        # Any: the stubs type neither the chain's result nor a response's resource closers.
        response: Any = error_response
        if request is not None:
            set_urlconf(settings.ROOT_URLCONF)
            response = self._sync_chain(request)
            response._resource_closers.append(request.close)
            if response.status_code >= 400:
                log_response(
                    "%s: %s", response.reason_phrase, request.path, response=response, request=request
                )
        if not response.streaming:
            response.close()
        return response


# Threads for the API's sync views that answer without waiting, reused from request to
# request; idle ones are reused before a new one starts.
API_THREADS = ThreadPoolExecutor(
    max_workers=int(os.environ.get("CHRONICLE_API_THREADS", "64")), thread_name_prefix="chronicle-api"
)


def _takes_djangos_path(path: str) -> bool:
    """Whether ``path`` resolves to an async view or to one that waits on its thread (an
    unknown path takes the pool's path, to its 404)."""
    try:
        match = get_resolver().resolve(path)
    except Resolver404:
        return False
    view_class = getattr(match.func, "view_class", None)
    return iscoroutinefunction(match.func) or waits_on_its_thread(view_class)


def route_http(site: Asgi, api: Asgi) -> Asgi:
    """Send the probes to :mod:`chronicle.health` and the scrape to :mod:`chronicle.metrics`,
    the lane's calls to the lean lane (:mod:`chronicle.lane_asgi`), the other API paths to
    ``api`` and the rest to ``site``; each of those requests is counted and timed by route."""

    async def app(
        scope: dict[str, Any], receive: Callable[..., Awaitable[Any]], send: Callable[..., Awaitable[Any]]
    ) -> None:
        path = scope["path"]
        if path in health.PROBE_PATHS:
            await health.serve(scope, receive, send)
            return
        if path == metrics.METRICS_PATH:
            await metrics.serve(scope, receive, send)
            return
        bind_request(scope)  # the request's id, namespace and workflow on its log records
        timed = metrics.Timed(send)
        route = None  # a Django path's route is resolved after the answer (cached by path)
        try:
            if not path.startswith(API_PREFIX):
                await site(scope, receive, timed)
                return
            method = scope["method"]
            for lane in LANE_ROUTES:
                match = lane.match(method, path)
                if match is not None:
                    route = metrics.lane_route(match)
                    await serve_lane(scope, receive, timed, lane, match, API_THREADS)
                    return
            await api(scope, receive, timed)
        finally:
            timed.done(scope, route)

    return app


_site = get_asgi_application()  # sets Django up first

from chronicle.lane_asgi import serve as serve_lane  # noqa: E402
from executions.lane import ROUTES as CLIENT_ROUTES  # noqa: E402
from executions.ui.urls import websocket_urlpatterns  # noqa: E402  (needs Django set up)
from matching.lane import ROUTE as WORKER_ROUTE  # noqa: E402
from matching.lane_batch import ROUTE as WORKER_BATCH_ROUTE  # noqa: E402

# Probes and scrapes leave no access-log line (the filter is on uvicorn's logger, which
# gunicorn's uvicorn workers log requests through).
logging.getLogger("uvicorn.access").addFilter(health.QuietProbes())

LANE_ROUTES = [WORKER_ROUTE, WORKER_BATCH_ROUTE, *CLIENT_ROUTES]

application = ProtocolTypeRouter(
    {
        "http": route_http(_site, ApiHandler()),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# Everything this worker serves with is built: leave it out of the collector's walks.
heap.settle_after_start()
