"""Django's admin for the tenancy models: a superuser's read-only view.

Every write to these rows goes through a service that checks it (settings bounds, the
last admin, a key shown once and stored hashed) and is audited by its callers: the
settings pages, the provisioning API and the ``manage.py`` commands (docs/provisioning.md).
The admin would bypass both, so it shows and searches the rows and changes none; users
stay editable in the admin's own user pages.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from namespaces.models import ApiKey, Membership, Namespace, OperatorKey, TaskQueueLimit


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Lists and shows rows; adding, changing and deleting go through the services."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Namespace)
class NamespaceAdmin(ReadOnlyAdmin):
    list_display = ("name", "retention_days", "request_rps", "dispatch_rps", "created_at")
    search_fields = ("name", "description")
    ordering = ("name",)


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "namespace",
        "prefix",
        "roles",
        "created_at",
        "last_used_at",
        "revoked_at",
        "expires_at",
    )
    list_filter = ("namespace",)
    search_fields = ("name", "prefix", "namespace__name")
    exclude = ("key_hash",)


@admin.register(OperatorKey)
class OperatorKeyAdmin(ReadOnlyAdmin):
    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at", "expires_at")
    search_fields = ("name", "prefix", "user__username")
    exclude = ("key_hash",)


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("user", "namespace", "role")
    list_filter = ("role", "namespace")
    search_fields = ("user__username", "namespace__name")


@admin.register(TaskQueueLimit)
class TaskQueueLimitAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "task_queue", "dispatch_rps")
    search_fields = ("task_queue", "namespace__name")
