"""A superuser creates a namespace from the UI in a real browser against the real stack:
the header's link, the form, and the new namespace's settings page with its role in the
switcher."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from playwright.sync_api import expect

from tests.browser.conftest import BrowserTenant, OpenPage, sign_in
from tests.factories import UserFactory


def test_a_superuser_creates_a_namespace_and_lands_on_its_settings(
    open_page: OpenPage,
    browser_tenant: BrowserTenant,
    committed: Callable[[], AbstractContextManager[None]],
) -> None:
    username, name = f"root-{uuid.uuid4().hex[:6]}", f"made-in-ui-{uuid.uuid4().hex[:6]}"
    with committed():
        UserFactory(username=username, password="root password", is_superuser=True, is_staff=True)
    page = open_page(None)
    sign_in(page, browser_tenant.stack.url, username, "root password")

    page.get_by_role("link", name="New namespace").click()
    expect(page.get_by_role("heading", name="New namespace")).to_be_visible()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Retention of closed runs, in days (empty: the default)").fill("11")
    page.get_by_label("Reason").fill("a new team")
    expect(page.get_by_label("Make me its admin")).to_be_checked()
    page.get_by_role("button", name="Create the namespace").click()

    expect(page).to_have_url(f"{browser_tenant.stack.url}/ns/{name}/settings/")
    expect(page.locator("#messages")).to_contain_text(f"Namespace {name} created.")
    expect(page.get_by_label("Retention days")).to_have_value("11")
    expect(page.locator("#ns-switch")).to_contain_text(f"{name} (admin)")

    # a tenant's admin sees no such link, and the page refuses them
    admin = open_page("admin")
    admin.goto(browser_tenant.url())
    expect(admin.get_by_role("link", name="New namespace")).to_have_count(0)
    response = admin.goto(f"{browser_tenant.stack.url}/namespaces/new/")
    assert response is not None and response.status == 403
