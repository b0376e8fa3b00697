"""What the UI says back after an action, in a real browser against the real stack."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from namespaces.models import MemberRole
from tests.browser.conftest import BrowserTenant, OpenPage, StartedRun, run_url
from tests.factories import MembershipFactory, NamespaceFactory

RunFactory = Callable[..., StartedRun]
Committed = Callable[[], AbstractContextManager[None]]


def test_terminating_a_run_says_it_was_done(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run = run_factory(prefix="parcel")
    page = open_page("operator")
    page.goto(run_url(browser_tenant, run, "terminate/"))
    page.get_by_label("Reason").fill("duplicate parcel")
    page.get_by_role("button", name="Terminate the workflow").click()
    expect(page.get_by_role("status").filter(has_text="Terminated")).to_have_text(
        f"Terminated {run.workflow_id}."
    )
    page.reload()
    expect(page.locator("#messages")).to_have_count(0)  # said once, not on every visit


def test_a_refused_settings_form_keeps_the_typed_reason(
    open_page: OpenPage, browser_tenant: BrowserTenant, committed: Committed
) -> None:
    with committed():
        namespace = NamespaceFactory(name=f"kept-{uuid.uuid4().hex[:8]}")
        admin_user = get_user_model().objects.get(username=browser_tenant.usernames[MemberRole.ADMIN])
        MembershipFactory(user=admin_user, namespace=namespace, role=MemberRole.ADMIN)
    page = open_page("admin")
    page.goto(f"{browser_tenant.stack.url}/ns/{namespace.name}/settings/rate-limits/")
    page.get_by_label("Requests per second").fill("-5")
    page.get_by_label("Reason").fill("holiday traffic")
    page.get_by_role("button", name="Save rate limits").click()
    expect(page.locator(".error").first).to_be_visible()
    expect(page.get_by_label("Reason")).to_have_value("holiday traffic")
    expect(page.get_by_label("Requests per second")).to_have_value("-5")
