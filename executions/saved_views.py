"""Saved and built-in views of the executions list.

A saved view is a visibility query with a name. Personal views are seen by their owner
only; shared views by every member of the namespace. Saving a shared view takes the
operator or admin role (``can_share``); a member deletes their own views, and an admin
also deletes any shared view. Built-in views are fixed queries every namespace has.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode, invalid
from executions import visibility
from executions.models import SavedView
from namespaces.models import Namespace

# A pending activity at this attempt or later has failed at least twice: the run is stuck.
STUCK_ACTIVITY_ATTEMPT = 3
MAX_NAME = 200


@dataclass(frozen=True)
class BuiltinView:
    slug: str
    name: str
    description: str

    def query(self) -> str:
        if self.slug == "running":
            return 'ExecutionStatus = "Running"'
        if self.slug == "failed-24h":
            since = (timezone.now() - timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%SZ")
            return f'ExecutionStatus = "Failed" AND CloseTime >= "{since}"'
        return (
            'ExecutionStatus = "Running" AND (WorkflowTaskAttempt > 1 '
            f"OR PendingActivityAttempt >= {STUCK_ACTIVITY_ATTEMPT})"
        )


BUILTIN_VIEWS = (
    BuiltinView("running", "Running", "Every open run"),
    BuiltinView("failed-24h", "Failed in the last 24 h", "Runs that closed Failed since this time yesterday"),
    BuiltinView(
        "stuck",
        "Stuck",
        f"Running, its workflow task failing or an activity at attempt {STUCK_ACTIVITY_ATTEMPT}+",
    ),
)


def builtin(slug: str) -> BuiltinView | None:
    return next((view for view in BUILTIN_VIEWS if view.slug == slug), None)


def visible_views(namespace: Namespace, user_id: int) -> list[SavedView]:
    """The user's own views and the namespace's shared ones, by name."""
    mine_or_shared = Q(owner_id=user_id) | Q(shared=True)
    return list(
        SavedView.objects.filter(mine_or_shared, namespace=namespace).select_related("owner").order_by("name")
    )


def save_view(
    namespace: Namespace,
    owner_id: int,
    *,
    name: str,
    query: str,
    shared: bool,
    may_share: bool,
    sort: str = "",
) -> SavedView:
    """Save ``query`` under ``name`` after checking it reads; 409 if the owner has that name."""
    if shared and not may_share:
        raise ChronicleError(ErrorCode.PERMISSION_DENIED, "sharing a view needs the operator or admin role")
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise invalid(f"a view needs a name of 1 to {MAX_NAME} characters")
    visibility.search(namespace, query)  # refuses a query that does not read, with its position
    try:
        with transaction.atomic():
            return SavedView.objects.create(
                namespace=namespace, owner_id=owner_id, name=name, query=query, shared=shared, sort=sort
            )
    except IntegrityError:
        raise ChronicleError(ErrorCode.CONFLICT, f"you already have a view named {name!r}") from None


def deletable(view: SavedView, user_id: int, *, is_admin: bool) -> bool:
    return view.owner_id == user_id or (view.shared and is_admin)


def delete_view(namespace: Namespace, user_id: int, view_id: int, *, is_admin: bool) -> SavedView:
    """Delete a view the user may delete; 404 for a view they cannot see."""
    view = next((v for v in visible_views(namespace, user_id) if v.pk == view_id), None)
    if view is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, "saved view not found")
    if not deletable(view, user_id, is_admin=is_admin):
        raise ChronicleError(
            ErrorCode.PERMISSION_DENIED, "only its owner or an admin may delete a shared view"
        )
    view.delete()
    return view
