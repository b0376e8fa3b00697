"""A superuser creates a namespace from the UI, through Django's test client on real
PostgreSQL: the namespace with its settings, the audit entries the REST call and the
command write, refusals that create nothing, and nobody else opening the page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from executions.models import AuditAction, AuditEntry
from namespaces.models import MemberRole, Membership, Namespace
from tests.factories import MembershipFactory, NamespaceFactory, UserFactory

pytestmark = pytest.mark.django_db

PAGE = "/namespaces/new/"


def superuser_client() -> tuple[Client, Any]:
    user = UserFactory(is_superuser=True, is_staff=True)
    client = Client()
    client.force_login(user)
    return client, user


def test_a_superuser_creates_a_namespace_and_becomes_its_admin() -> None:
    client, user = superuser_client()
    assert f'href="{PAGE}"' in client.get("/").content.decode()  # the header links to it
    assert client.get(PAGE).status_code == 200

    answer = client.post(
        PAGE,
        {
            "name": "acme",
            "description": "the first customer",
            "retention_days": "9",
            "join_as_admin": "on",
            "reason": "new customer",
        },
    )
    assert answer.status_code == 302 and answer["Location"] == "/ns/acme/settings/"
    ns = Namespace.objects.get(name="acme")
    assert (ns.description, ns.retention_days) == ("the first customer", 9)
    assert Membership.objects.get(namespace=ns, user=user).role == MemberRole.ADMIN

    created = AuditEntry.objects.get(namespace=ns, action=AuditAction.SETTINGS_CHANGE)
    assert created.details == {"operation": "namespace.create"} and created.reason == "new customer"
    assert created.actor == user.username and created.new["namespace"] == "acme"
    assert created.new["retention_days"] == 9
    joined = AuditEntry.objects.get(namespace=ns, action=AuditAction.MEMBER_CHANGE)
    assert joined.target == user.username and joined.reason == "new customer"

    settings_page = client.get(answer["Location"])
    assert settings_page.status_code == 200 and "Namespace acme created." in settings_page.content.decode()


def test_without_joining_the_namespace_has_no_members_and_settings_keep_their_defaults() -> None:
    client, _ = superuser_client()
    answer = client.post(PAGE, {"name": "quiet", "reason": "placeholder"})
    assert answer.status_code == 302 and answer["Location"] == PAGE
    ns = Namespace.objects.get(name="quiet")
    assert ns.retention_days == Namespace._meta.get_field("retention_days").default
    assert not Membership.objects.filter(namespace=ns).exists()
    assert list(AuditEntry.objects.filter(namespace=ns).values_list("action", flat=True)) == [
        AuditAction.SETTINGS_CHANGE
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "", "reason": "x"},
        {"name": "has space", "reason": "x"},
        {"name": "-leading-dash", "reason": "x"},
        {"name": "taken", "reason": "x"},  # exists already
        {"name": "ok", "reason": ""},
        {"name": "ok", "retention_days": "-1", "reason": "x"},
        {"name": "ok", "retention_days": "many", "reason": "x"},
    ],
)
def test_bad_input_is_a_400_and_creates_nothing(fields: dict[str, str]) -> None:
    NamespaceFactory(name="taken")
    client, _ = superuser_client()
    before = (Namespace.objects.count(), AuditEntry.objects.count(), Membership.objects.count())
    answer = client.post(PAGE, {**fields, "join_as_admin": "on"})
    assert answer.status_code == 400, answer.content
    assert b'id="namespace-error"' in answer.content
    assert (Namespace.objects.count(), AuditEntry.objects.count(), Membership.objects.count()) == before


def test_only_superusers_open_it() -> None:
    admin = MembershipFactory(namespace=NamespaceFactory(), role=MemberRole.ADMIN).user
    client = Client()
    client.force_login(admin)
    assert PAGE not in client.get(f"/ns/{Namespace.objects.get().name}/").content.decode()
    assert client.get(PAGE).status_code == 403
    assert client.post(PAGE, {"name": "sneaky", "reason": "x"}).status_code == 403
    anonymous = Client().post(PAGE, {"name": "sneaky", "reason": "x"})
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    assert not Namespace.objects.filter(name="sneaky").exists()
