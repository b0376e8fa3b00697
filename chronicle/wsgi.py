"""WSGI entry point (admin and API without long-poll; production uses ASGI)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")
application = get_wsgi_application()
