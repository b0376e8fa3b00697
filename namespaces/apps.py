from __future__ import annotations

from django.apps import AppConfig


class NamespacesConfig(AppConfig):
    name = "namespaces"

    def ready(self) -> None:
        # A key or namespace saved or deleted in this process must not be served stale
        # from the API-key cache (other processes honour it within the cache's TTL).
        from django.db.models.signals import post_delete, post_save

        from namespaces.auth import forget_resolved_keys
        from namespaces.models import ApiKey, Namespace

        for model in (ApiKey, Namespace):
            for signal in (post_save, post_delete):
                signal.connect(forget_resolved_keys, sender=model, dispatch_uid=f"forget-{model.__name__}")
