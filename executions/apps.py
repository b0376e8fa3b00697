from __future__ import annotations

from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
