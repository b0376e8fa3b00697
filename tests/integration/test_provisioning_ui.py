"""The settings page where a tenant admin adds a person who has no account yet, through
Django's test client on real PostgreSQL: the one-time password shown once and working,
the audit entry, refusals that create nothing, and who may open the page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from executions.models import AuditAction, AuditEntry
from namespaces.models import MemberRole, Membership, Namespace
from tests.factories import MembershipFactory, NamespaceFactory

pytestmark = pytest.mark.django_db


def signed_in(namespace: Namespace, role: str) -> Client:
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=role).user)
    return client


def page(namespace: Namespace) -> str:
    return f"/ns/{namespace.name}/settings/members/new/"


def test_an_admin_adds_a_person_and_sees_the_password_once() -> None:
    ns = NamespaceFactory()
    admin = signed_in(ns, MemberRole.ADMIN)
    assert (
        f'href="/ns/{ns.name}/settings/members/new/"'
        in admin.get(f"/ns/{ns.name}/settings/members/").content.decode()
    )
    assert admin.get(page(ns)).status_code == 200

    answer = admin.post(
        page(ns), {"username": "grace", "email": "", "role": "operator", "reason": "new hire"}
    )
    assert answer.status_code == 200
    password = answer.context["password"]
    assert password and password in answer.content.decode()
    user = get_user_model().objects.get(username="grace")
    assert user.check_password(password)
    assert Membership.objects.get(namespace=ns, user=user).role == "operator"
    entry = AuditEntry.objects.get(namespace=ns, action=AuditAction.MEMBER_CHANGE)
    assert entry.reason == "new hire" and entry.details == {"operation": "user.create"}
    assert password not in admin.get(page(ns)).content.decode()  # shown on that answer only
    assert Client().login(username="grace", password=password)


@pytest.mark.parametrize(
    "fields",
    [
        {"username": "", "role": "viewer", "reason": "x"},
        {"username": "has space", "role": "viewer", "reason": "x"},
        {"username": "ok", "role": "king", "reason": "x"},
        {"username": "ok", "role": "viewer", "reason": ""},
        {"username": "ok", "role": "viewer", "reason": "x", "email": "not-an-email"},
    ],
)
def test_bad_input_is_a_400_and_creates_nobody(fields: dict[str, str]) -> None:
    ns = NamespaceFactory()
    admin = signed_in(ns, MemberRole.ADMIN)
    users = get_user_model().objects.count()
    answer = admin.post(page(ns), fields)
    assert answer.status_code == 400
    assert get_user_model().objects.count() == users
    assert not AuditEntry.objects.filter(namespace=ns).exists()


def test_an_existing_username_is_refused_not_taken_over() -> None:
    ns = NamespaceFactory()
    admin = signed_in(ns, MemberRole.ADMIN)
    other = MembershipFactory(namespace=NamespaceFactory(), role=MemberRole.VIEWER).user
    answer = admin.post(page(ns), {"username": other.username, "role": "admin", "reason": "x"})
    assert answer.status_code == 400 and b"already exists" in answer.content
    assert not Membership.objects.filter(namespace=ns, user=other).exists()


def test_only_the_namespaces_admins_open_it() -> None:
    ns = NamespaceFactory()
    for role in (MemberRole.VIEWER, MemberRole.OPERATOR):
        client = signed_in(ns, role)
        assert client.get(page(ns)).status_code == 403
        assert client.post(page(ns), {"username": "x", "role": "admin", "reason": "x"}).status_code == 403
    outsider = signed_in(NamespaceFactory(), MemberRole.ADMIN)
    assert outsider.get(page(ns)).status_code == 404
    assert not get_user_model().objects.filter(username="x").exists()
    assert Client().get(page(ns)).status_code == 302  # to the sign-in page
