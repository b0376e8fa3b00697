"""Operator flows in a real browser: sign in, find, open, reset, terminate, roles, keyboard, dark mode."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from namespaces.models import MemberRole
from tests.browser.conftest import (
    PASSWORD,
    BrowserTenant,
    OpenPage,
    StartedRun,
    post_form,
    run_url,
    sign_in,
)
from tests.factories import MembershipFactory, NamespaceFactory

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
    # The namespace list, or (for a member of one namespace) straight to that namespace's list.
    named = re.compile(browser_tenant.namespace)
    listed = page.get_by_role("link", name=named).or_(page.get_by_role("heading", level=1, name=named))
    expect(listed.first).to_be_visible()


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
    expect(page.get_by_role("button", name="Reset to event 4")).to_be_visible()
    page.get_by_label("Reason").fill("charge went to the wrong account")
    page.get_by_role("button", name=re.compile(r"\breset\b", re.I)).click()

    expect(page).not_to_have_url(re.compile(re.escape(run.run_id) + "/$"))
    new_run_id = re.search(r"/runs/([0-9a-f-]{36})/", page.url)
    assert new_run_id is not None and new_run_id.group(1) != run.run_id
    expect(page.get_by_role("heading", level=1)).to_contain_text("Running")
    expect(page.locator("#reset-from")).to_contain_text("at event 4")
    expect(page.get_by_role("cell", name="charge went to the wrong account")).to_be_visible()

    page.locator("#reset-from").get_by_role("link", name=run.run_id).click()
    expect(page).to_have_url(re.compile(re.escape(run.run_id)))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Terminated")
    expect(page.locator("#reset-into").get_by_role("link", name=new_run_id.group(1))).to_be_visible()


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
    page.keyboard.press("Tab")  # the skip link, past the header's links
    page.keyboard.press("Enter")

    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.name") == "q":
            break
    else:
        raise AssertionError("the query box was not reached within 10 Tab presses after the skip link")
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


# Each element's text colour and the first opaque background behind it, as the browser paints them.
COLOURS_JS = """selectors => selectors.map(selector => {
  const element = document.querySelector(selector);
  if (!element) return [selector, null, null];
  const clear = colour => /rgba\\(.*, 0\\)$|transparent/.test(colour);
  let behind = element, background = getComputedStyle(behind).backgroundColor;
  while (clear(background) && behind.parentElement) {
    behind = behind.parentElement;
    background = getComputedStyle(behind).backgroundColor;
  }
  return [selector, getComputedStyle(element).color, background];
})"""
TEXT_SAMPLES = [
    "body",
    "header .muted",
    "main a",
    "th",
    "td code",
    "td .badge.status-Running",
    "td .badge.status-Terminated",
    "button[type=submit]",
]


def luminance(css_colour: str) -> float:
    red, green, blue = (int(part) / 255 for part in re.findall(r"\d+(?:\.\d+)?", css_colour)[:3])

    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.03928 else ((channel + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(foreground: str, background: str) -> float:
    lighter, darker = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_text_keeps_aa_contrast_in_both_colour_schemes(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run_factory(prefix="running")
    ended = run_factory(prefix="ended")
    browser_tenant.api.post(f"/workflows/{ended.workflow_id}/terminate", {"reason": "contrast sample"})
    for scheme in ("light", "dark"):
        page = open_page("operator", color_scheme=scheme)
        page.goto(browser_tenant.url())
        expect(page.locator("td .badge.status-Terminated").first).to_be_visible()
        for selector, colour, behind in page.evaluate(COLOURS_JS, TEXT_SAMPLES):
            assert colour is not None, f"{selector} not on the page"
            ratio = contrast(colour, behind)
            assert ratio >= 4.5, f"{scheme}: {selector} {colour} on {behind} is {ratio:.2f}:1"


def test_the_namespace_switcher_shows_the_current_namespace_and_moves_to_another(
    open_page: OpenPage, browser_tenant: BrowserTenant, committed: Callable[[], AbstractContextManager[None]]
) -> None:
    with committed():
        other = NamespaceFactory(name=f"other-{uuid.uuid4().hex[:8]}")
        user = get_user_model().objects.get(username=browser_tenant.usernames["operator"])
        MembershipFactory(user=user, namespace=other, role=MemberRole.VIEWER)
    page = open_page("operator")
    page.goto(f"{browser_tenant.stack.url}/")
    switcher = page.get_by_role("combobox", name="Namespace")
    expect(switcher.locator("option:checked")).to_have_text("Choose a namespace…")

    switcher.select_option(browser_tenant.namespace)
    expect(page).to_have_url(browser_tenant.url())
    expect(switcher.locator("option:checked")).to_have_text(f"{browser_tenant.namespace} (operator)")

    switcher.focus()
    switcher.select_option(other.name)
    expect(page).to_have_url(f"{browser_tenant.stack.url}/ns/{other.name}/")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Workflows in {other.name}")
