from __future__ import annotations

from django.apps import AppConfig


class HistoryConfig(AppConfig):
    name = "history"
