"""Live history and namespace rate limits in a real browser, written against the page hooks.

Live mode: ``<tbody id="event-rows">`` gains rows over the websocket; ``#live-toggle`` and
``#live-state`` show the mode. Rate limits: ``/ns/<namespace>/settings/rate-limits/`` with
"Requests per second", "Reason", a "Save rate limits" button and ``#effective-request-rps``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from namespaces.models import MemberRole, Namespace
from tests.browser.conftest import BrowserTenant, OpenPage, StartedRun, post_form, run_url
from tests.factories import MembershipFactory, NamespaceFactory

Committed = Callable[[], AbstractContextManager[None]]


def test_a_signal_sent_through_the_api_appears_live_without_a_reload(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: Callable[..., StartedRun]
) -> None:
    run = run_factory(prefix="live")
    page = open_page("viewer")
    page.goto(run_url(browser_tenant, run))
    assert page.locator("tbody#event-rows").count() == 1, "the history table has no #event-rows"
    expect(page.get_by_label("Live")).to_be_checked()
    expect(page.locator("#live-state")).to_have_text("connected")
    rows_before = page.locator("#event-rows > tr").count()
    page.evaluate("window.__sameDocument = true")

    response = browser_tenant.api.post(
        f"/workflows/{run.workflow_id}/signal", {"signal_name": "approve", "input": [{"by": "ops"}]}
    )
    assert response.status_code == 200, response.text

    signaled = page.locator("#event-rows > tr[id^='event-']", has_text="WorkflowExecutionSignaled")
    expect(signaled).to_have_count(1)
    assert page.locator("#event-rows > tr").count() > rows_before
    assert page.evaluate("window.__sameDocument") is True, "the page reloaded"


def rate_limited_namespace(tenant: BrowserTenant, committed: Committed) -> str:
    """A namespace of its own (so the change cannot throttle other tests), with admin and viewer."""
    users = get_user_model().objects
    with committed():
        namespace = NamespaceFactory(name=f"limits-{uuid.uuid4().hex[:8]}", request_rps=2400.0)
        for role in (MemberRole.ADMIN, MemberRole.VIEWER):
            MembershipFactory(user=users.get(username=tenant.usernames[role]), namespace=namespace, role=role)
    return str(namespace.name)


def saved_request_rps(name: str, committed: Committed) -> float:
    with committed():
        return Namespace.objects.get(name=name).request_rps


def test_an_admin_changes_requests_per_second_and_a_viewer_is_refused(
    open_page: OpenPage, browser_tenant: BrowserTenant, committed: Committed
) -> None:
    name = rate_limited_namespace(browser_tenant, committed)
    url = f"{browser_tenant.stack.url}/ns/{name}/settings/rate-limits/"

    admin = open_page("admin")
    opened = admin.goto(url)
    assert opened is not None and opened.status == 200
    admin.get_by_label("Requests per second").fill("750")
    admin.get_by_label("Reason").fill("batch import this week")
    admin.get_by_role("button", name="Save rate limits").click()
    expect(admin.locator("#effective-request-rps")).to_contain_text("750")
    assert saved_request_rps(name, committed) == 750.0

    viewer = open_page("viewer")
    viewer.goto(url)
    expect(viewer.get_by_label("Requests per second")).to_be_visible()
    expect(viewer.locator("#effective-request-rps")).to_contain_text("750")
    expect(viewer.get_by_role("button", name="Save rate limits")).to_have_count(0)
    refused = post_form(viewer, url, request_rps="1", reason="viewer try")
    assert refused.status == 403
    assert saved_request_rps(name, committed) == 750.0
