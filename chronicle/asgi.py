"""ASGI entry point: HTTP through Django; websockets are routed by Channels."""

from __future__ import annotations

import os

from channels.routing import ProtocolTypeRouter
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

application = ProtocolTypeRouter({"http": get_asgi_application()})
