from __future__ import annotations

from django.apps import AppConfig


class NamespacesConfig(AppConfig):
    name = "namespaces"
