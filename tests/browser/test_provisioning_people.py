"""A tenant admin adds a person who has no account yet, in a real browser against the real
stack; the person then signs in with the one-time password they were given."""

from __future__ import annotations

import uuid

from playwright.sync_api import expect

from tests.browser.conftest import BrowserTenant, OpenPage, sign_in


def test_an_admin_adds_a_new_person_who_then_signs_in(
    open_page: OpenPage, browser_tenant: BrowserTenant
) -> None:
    username = f"new-{uuid.uuid4().hex[:6]}"
    page = open_page("admin")
    page.goto(browser_tenant.url("settings/members/"))
    page.get_by_role("link", name="Add a person who has no account yet").click()
    page.get_by_label("Username").fill(username)
    page.get_by_label("Role").select_option("operator")
    page.get_by_label("Reason").fill("joined the on-call rota")
    page.get_by_role("button", name="Create the account").click()
    expect(page.get_by_role("status")).to_contain_text(f"{username} can sign in now")
    password = page.locator("#one-time-password").inner_text().strip()
    assert len(password) >= 12

    page.goto(browser_tenant.url("settings/members/"))
    expect(page.get_by_role("cell", name=username, exact=True)).to_be_visible()

    newcomer = open_page(None)
    sign_in(newcomer, browser_tenant.stack.url, username, password)
    response = newcomer.goto(browser_tenant.url())
    assert response is not None and response.status == 200  # a member now, not sent to sign in
    assert newcomer.url == browser_tenant.url()
