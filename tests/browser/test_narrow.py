"""At phone width (390 px) the pages people open from a link fit the screen: nothing
scrolls sideways but the wide tables inside their own box."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests.browser.conftest import BrowserTenant, OpenPage, StartedRun, run_url

RunFactory = Callable[..., StartedRun]
PHONE = {"width": 390, "height": 844}


def overflow(page: Page) -> int:
    """How many pixels the document is wider than the window."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


# The outermost elements reaching past the window's right edge, to name in a failure.
WIDE_JS = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter(e => !(e.parentElement && e.parentElement.getBoundingClientRect().right > window.innerWidth + 1))
  .slice(0, 5).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className)"""


@pytest.mark.parametrize("where", ["list", "run", "stuck"])
def test_pages_fit_a_phone_screen(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory, where: str
) -> None:
    run = run_factory(prefix="narrow-order-with-a-long-workflow-id")
    page = open_page("operator")
    page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    urls = {
        "list": browser_tenant.url(),
        "run": run_url(browser_tenant, run),
        "stuck": browser_tenant.url("?view=stuck"),
    }
    page.goto(urls[where])
    wide = page.evaluate(WIDE_JS)
    assert overflow(page) <= 0, f"the {where} page is {overflow(page)} px wider than 390 px: {wide}"
