"""Operator flows in a real browser: sign in, find, open, reset, terminate, roles, keyboard, dark mode."""

from __future__ import annotations

import re
from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.browser.conftest import (
    PASSWORD,
    BrowserTenant,
    OpenPage,
    StartedRun,
    post_form,
    run_url,
    sign_in,
)

RunFactory = Callable[..., StartedRun]


def test_sign_in_through_the_form_lands_on_the_namespace_list(
    open_page: OpenPage, browser_tenant: BrowserTenant
) -> None:
    page = open_page(None)
    page.goto(browser_tenant.url())
    expect(page).to_have_url(re.compile(r"/login/\?next="))
    page.get_by_label("Username").fill(browser_tenant.usernames["viewer"])
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("did not match")

    sign_in(page, browser_tenant.stack.url, browser_tenant.usernames["viewer"], PASSWORD)
    expect(page.get_by_role("link", name=re.compile(browser_tenant.namespace))).to_be_visible()


def test_find_a_run_with_a_visibility_query_and_open_it(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    wanted, other = run_factory(prefix="invoice"), run_factory(prefix="invoice")
    page = open_page("viewer")
    page.goto(browser_tenant.url())

    page.get_by_label("Visibility query").fill(f'WorkflowId = "{wanted.workflow_id}"')
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("link", name=wanted.workflow_id)).to_be_visible()
    expect(page.get_by_role("link", name=other.workflow_id)).to_have_count(0)

    page.get_by_role("link", name=wanted.workflow_id).click()
    expect(page).to_have_url(re.compile(re.escape(wanted.run_id)))
    expect(page.get_by_role("heading", level=1)).to_contain_text(wanted.workflow_id)
    expect(page.locator("#event-4")).to_contain_text("WorkflowTaskCompleted")


def test_reset_to_a_chosen_event_with_a_reason_lands_on_the_new_run(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run = run_factory(prefix="order")
    page = open_page("operator")
    page.goto(run_url(browser_tenant, run))

    page.locator("#event-4").get_by_role("link", name="Reset from here").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Reset")
    expect(page.get_by_text("Reset to event")).to_be_visible()
    page.get_by_label("Reason").fill("charge went to the wrong account")
    page.get_by_role("button", name=re.compile(r"\breset\b", re.I)).click()

    expect(page).not_to_have_url(re.compile(re.escape(run.run_id) + "/$"))
    new_run_id = re.search(r"/runs/([0-9a-f-]{36})/", page.url)
    assert new_run_id is not None and new_run_id.group(1) != run.run_id
    expect(page.get_by_role("heading", level=1)).to_contain_text("Running")
    expect(page.get_by_text("at event 4")).to_be_visible()
    expect(page.get_by_role("cell", name="charge went to the wrong account")).to_be_visible()

    page.get_by_role("link", name=run.run_id).click()
    expect(page).to_have_url(re.compile(re.escape(run.run_id)))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Terminated")
    expect(page.get_by_role("link", name=new_run_id.group(1))).to_be_visible()


def test_terminate_another_run_and_see_its_status_change(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run = run_factory(prefix="shipment")
    page = open_page("operator")
    page.goto(run_url(browser_tenant, run))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Running")

    page.get_by_role("link", name="Terminate").click()
    page.get_by_label("Reason").fill("customer withdrew the order")
    page.get_by_role("button", name=re.compile(r"\bterminate\b", re.I)).click()

    expect(page).to_have_url(run_url(browser_tenant, run))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Terminated")
    expect(page.locator("tr", has_text="WorkflowExecutionTerminated")).to_have_count(1)
    assert browser_tenant.api.describe(run.workflow_id)["status"] == "Terminated"


def test_a_viewer_sees_no_action_buttons_and_a_direct_post_is_refused(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run = run_factory(prefix="refund")
    viewer = open_page("viewer")
    viewer.goto(run_url(browser_tenant, run))
    expect(viewer.locator("#event-4")).to_be_visible()
    for action in ("Signal", "Cancel", "Terminate", "Reset", "Reset from here"):
        expect(viewer.get_by_role("link", name=action, exact=True)).to_have_count(0)
        expect(viewer.get_by_role("button", name=action, exact=True)).to_have_count(0)

    terminate = run_url(browser_tenant, run, "terminate/")
    assert viewer.request.get(terminate).status == 403
    refused = post_form(viewer, terminate, reason="not allowed", request_id="viewer-try")
    assert refused.status == 403
    assert browser_tenant.api.describe(run.workflow_id)["status"] == "Running"

    # The same hand-made request from an operator goes through: the refusal above is the role's.
    operator = open_page("operator")
    operator.goto(run_url(browser_tenant, run))
    accepted = post_form(operator, terminate, reason="allowed", request_id="operator-try")
    assert accepted.status == 302
    assert browser_tenant.api.describe(run.workflow_id)["status"] == "Terminated"


def test_the_query_box_is_reachable_by_keyboard_and_submits_with_enter(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run = run_factory(prefix="payment")
    page = open_page("viewer")
    page.goto(browser_tenant.url())

    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.name") == "q":
            break
    else:
        raise AssertionError("the query box was not reached within 10 Tab presses")
    page.keyboard.type(f'WorkflowId = "{run.workflow_id}"')
    page.keyboard.press("Enter")

    expect(page).to_have_url(re.compile(r"[?&]q=WorkflowId"))
    expect(page.get_by_role("link", name=run.workflow_id)).to_be_visible()


def test_the_skip_link_is_the_first_stop_and_moves_focus_to_the_content(
    open_page: OpenPage, browser_tenant: BrowserTenant
) -> None:
    page = open_page("viewer")
    page.goto(browser_tenant.url())
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile("#content$"))


def background(page: Page) -> str:
    return str(page.evaluate("getComputedStyle(document.body).backgroundColor"))


def test_dark_mode_renders_with_a_different_background(
    open_page: OpenPage, browser_tenant: BrowserTenant
) -> None:
    light, dark = open_page("viewer"), open_page("viewer", color_scheme="dark")
    light.goto(browser_tenant.url())
    dark.goto(browser_tenant.url())
    assert background(light) == "rgb(255, 255, 255)"
    assert background(dark) != background(light)
    assert str(dark.evaluate("getComputedStyle(document.body).color")) != str(
        light.evaluate("getComputedStyle(document.body).color")
    )
