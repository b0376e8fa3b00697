"""Who may see and do what in the UI: the membership checks every page starts with."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest

from namespaces.models import MemberRole, Membership, Namespace

ACTING_ROLES = frozenset({MemberRole.OPERATOR, MemberRole.ADMIN})


@dataclass(frozen=True)
class Access:
    namespace: Namespace
    role: str

    @property
    def can_act(self) -> bool:
        return self.role in ACTING_ROLES

    @property
    def is_admin(self) -> bool:
        return self.role == MemberRole.ADMIN


def own_memberships(request: HttpRequest) -> QuerySet[Membership]:
    """The signed-in user's memberships (none for an anonymous visitor)."""
    return Membership.objects.select_related("namespace").filter(user_id=request.user.pk or 0)


def memberships(request: HttpRequest) -> list[Membership]:
    """The namespaces for the switcher, by name."""
    return list(own_memberships(request).order_by("namespace__name"))


def member_access(user_pk: int | None, namespace_name: str) -> Access | None:
    """The user's role in the namespace, or None when they are not a member (or it does not exist).

    Pages go through ``reader``; the live websocket, which has a user but no request, calls this.
    """
    membership = (
        Membership.objects.select_related("namespace")
        .filter(user_id=user_pk or 0, namespace__name=namespace_name)
        .first()
    )
    return None if membership is None else Access(membership.namespace, membership.role)


def reader(request: HttpRequest, namespace_name: str) -> Access:
    """The user's role in the namespace; 404 when they are not a member (or it does not exist)."""
    access = member_access(request.user.pk, namespace_name)
    if access is None:
        raise Http404("namespace not found")
    return access


def operator(request: HttpRequest, namespace_name: str) -> Access:
    """As ``reader``, and 403 unless the user may act on executions and schedules."""
    access = reader(request, namespace_name)
    if not access.can_act:
        raise PermissionDenied("this action needs the operator or admin role")
    return access


def admin(request: HttpRequest, namespace_name: str) -> Access:
    """As ``reader``, and 403 unless the user manages the namespace."""
    access = reader(request, namespace_name)
    if not access.is_admin:
        raise PermissionDenied("this page needs the admin role")
    return access


def actor(request: HttpRequest) -> str:
    """The name the audit log records for the signed-in user."""
    return str(request.user.get_username())


def form_request_id(request: HttpRequest) -> str:
    """The confirmation form's request id (a fresh one when the form carried none)."""
    source = request.POST if request.method == "POST" else request.GET
    return source.get("request_id", "").strip()[:64] or str(uuid.uuid4())
