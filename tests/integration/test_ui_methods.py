"""Every route of the operator UI answers only the methods it is meant to, and a 405 naming
them (in ``Allow``) for the others.

A function view without ``require_GET`` (or ``require_http_methods``) answers a POST, PUT
or DELETE as a GET: the page is rendered to a write the caller believed was applied. The
routes come from the UI's URL patterns, so a new page must be entered in ``METHODS`` with
the verbs it takes, or this test fails naming it; then each verb it does not take must be
refused with 405 and ``Allow``, and each it takes must reach the view.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from executions.ui import urls as ui_urls
from namespaces.models import MemberRole, Membership
from tests.factories import UserFactory
from tests.integration import security_matrix as matrix
from tests.integration.minted_ids import World, build_world
from tests.integration.test_security_matrix_ui import samples

pytestmark = pytest.mark.django_db(transaction=True)

TRIED = ("GET", "POST", "PUT", "PATCH", "DELETE")
READ = frozenset({"GET"})
FORM = frozenset({"GET", "POST"})
WRITE = frozenset({"POST"})
# Each UI route (by name; the stylesheet's by its pattern) and the verbs of TRIED it takes.
METHODS: dict[str, frozenset[str]] = {
    "index": READ,
    "login": FORM,
    "logout": WRITE,
    "ui-namespace-new": FORM,
    "ui-executions": READ,
    "ui-export": READ,
    "ui-view-save": WRITE,
    "ui-view-delete": WRITE,
    "ui-triage": READ,
    "ui-batch-list": READ,
    "ui-batch-new": FORM,
    "ui-batch-job": READ,
    "ui-batch-progress": READ,
    "ui-batch-rate": WRITE,
    "ui-batch-stop": WRITE,
    "ui-execution": READ,
    "ui-query": FORM,
    "ui-history-download": READ,
    "ui-event-download": READ,
    "ui-action": FORM,
    "ui-workflow": READ,
    "ui-settings": FORM,
    "ui-settings-rate-limits": FORM,
    "ui-settings-rate-counts": READ,
    "ui-settings-search-attributes": FORM,
    "ui-settings-members": FORM,
    "ui-settings-new-person": FORM,
    "ui-settings-api-keys": FORM,
    "ui-schedules": READ,
    "ui-schedule-action": FORM,
    "ui-schedule": READ,
    "ui-task-queues": READ,
    "ui-task-queue": READ,
    "ui-audit": READ,
    "^static/(?P<path>chronicle/.+)$": READ,
}
SAMPLE_PATHS = {"^static/(?P<path>chronicle/.+)$": "/static/chronicle/none.css"}


def ui_routes() -> list[tuple[str, str]]:
    """(name, schema-style template) of every route of the UI's URL patterns."""
    mounted = [p for p in get_resolver().url_patterns if isinstance(p, URLResolver)]
    assert any(p.urlconf_module is ui_urls and str(p.pattern) == "" for p in mounted)  # at the root
    return [
        (pattern.name or str(pattern.pattern), matrix.template(str(pattern.pattern)))
        for pattern in ui_urls.urlpatterns
        if isinstance(pattern, URLPattern)
    ]


def admin_of(world: World) -> Callable[[], Client]:
    """Clients signed in as an admin of B, a fresh one each call (a POST may sign one out)."""
    user = UserFactory.create()
    Membership.objects.create(user=user, namespace=world.b, role=MemberRole.ADMIN)

    def signed_in() -> Client:
        client = Client()
        client.force_login(user)
        return client

    return signed_in


def test_every_ui_route_is_entered_with_its_methods() -> None:
    routes = {name for name, _ in ui_routes()}
    assert routes - set(METHODS) == set(), "enter each new UI route in METHODS with the verbs it takes"
    assert set(METHODS) - routes == set(), "METHODS names a route the UI no longer has"


def test_a_ui_route_refuses_the_verbs_it_does_not_take_with_405_and_allow() -> None:
    world = build_world()
    values = {**samples(world), "action": "terminate"}
    admin, faults = admin_of(world), []
    for name, template in ui_routes():
        url = SAMPLE_PATHS.get(name) or matrix.fill(template, values)
        for method in TRIED:
            answer = admin().generic(method, url)
            if method in METHODS[name]:
                if answer.status_code == 405:
                    faults.append(f"{method} {url} ({name}): 405, but the page takes it")
                continue
            allowed = {verb.strip() for verb in answer.get("Allow", "").split(",")} & set(TRIED)
            if answer.status_code != 405 or allowed != METHODS[name]:
                faults.append(
                    f"{method} {url} ({name}): {answer.status_code} Allow={answer.get('Allow')!r}, "
                    f"documented 405 Allow={sorted(METHODS[name])}"
                )
    assert not faults, "\n".join(faults)
