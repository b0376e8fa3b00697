"""ASGI entry point: the REST API and the site through Django; websockets via Channels.

Two Django handlers share one process. ``/api/v1/`` goes to :class:`ApiHandler`,
which runs no middleware; everything else (UI, admin, schema) gets the full stack
from ``settings.MIDDLEWARE``. Websockets (the UI's live mode) go through Channels with
the session's user (``AuthMiddlewareStack``), from allowed origins only, since a
session cookie would otherwise let another site open a socket as the signed-in user.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.core.asgi import get_asgi_application
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

API_PREFIX = "/api/v1/"
Asgi = Callable[
    [dict[str, Any], Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]
]


class ApiHandler(ASGIHandler):
    """The REST API's handler: the views without the browser middleware.

    API calls authenticate with a bearer key and answer JSON, so sessions, CSRF,
    messages, the auth user and frame options do nothing for them. Under ASGI each
    of those sync middlewares still moved the request between the event loop and a
    thread twice; on a 2-core machine those hops were the largest part of a signal's
    cost. The sync views still run in a thread, entered once.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        # The same attributes Django's load_middleware sets, with every list empty.
        handler: Any = self  # the stubs do not declare BaseHandler's private members
        handler._view_middleware = []
        handler._template_response_middleware = []
        handler._exception_middleware = []
        get_response = handler._get_response_async if is_async else handler._get_response
        handler._middleware_chain = convert_exception_to_response(get_response)


def route_http(site: Asgi, api: Asgi) -> Asgi:
    """Send API paths to ``api`` and the rest to ``site``."""

    async def app(
        scope: dict[str, Any], receive: Callable[..., Awaitable[Any]], send: Callable[..., Awaitable[Any]]
    ) -> None:
        handler = api if scope["path"].startswith(API_PREFIX) else site
        await handler(scope, receive, send)

    return app


_site = get_asgi_application()  # sets Django up first

from executions.ui.urls import websocket_urlpatterns  # noqa: E402  (needs Django set up)

application = ProtocolTypeRouter(
    {
        "http": route_http(_site, ApiHandler()),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
