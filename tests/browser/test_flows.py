"""Operator flows in a real browser: sign in, find, open, reset, terminate, roles, keyboard, dark mode."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD, BrowserTenant, OpenPage, sign_in


def test_sign_in_through_the_form_lands_on_the_namespace_list(
    open_page: OpenPage, browser_tenant: BrowserTenant
) -> None:
    page = open_page(None)
    page.goto(browser_tenant.url())
    expect(page).to_have_url(re.compile(r"/login/\?next="))
    page.get_by_label("Password").fill("not the password")
    page.get_by_label("Username").fill(browser_tenant.usernames["viewer"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("did not match")

    sign_in(page, browser_tenant.stack.url, browser_tenant.usernames["viewer"], PASSWORD)
    expect(page.get_by_role("link", name=re.compile(browser_tenant.namespace))).to_be_visible()
