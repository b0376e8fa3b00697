"""Write the README's screenshots to ``docs/screenshots/`` (1280×800, light plus one dark).

Not collected by default (the file name does not start with ``test_``), so CI never
rewrites the committed images; ``make screenshots`` runs it on purpose. It reuses the
browser suite's fixtures, so the pictures show the real stack with real runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import BrowserTenant, OpenPage, StartedRun
from tests.browser.test_run_page import failed_by_activity

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def save(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def test_capture_main_pages(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: Callable[..., StartedRun]
) -> None:
    runs = [run_factory(prefix=prefix) for prefix in ("order", "invoice", "refund", "shipment")]
    run_factory(prefix="payment", complete_first_task=False)
    api = browser_tenant.api
    api.post(f"/workflows/{runs[1].workflow_id}/signal", {"signal_name": "approve", "input": [{"by": "ops"}]})
    api.post(f"/workflows/{runs[2].workflow_id}/terminate", {"reason": "duplicate order"})

    anonymous = open_page(None)
    anonymous.goto(f"{browser_tenant.stack.url}/login/")
    save(anonymous, "sign-in")

    page = open_page("operator")
    page.goto(browser_tenant.url())
    expect(page.get_by_role("link", name=runs[0].workflow_id)).to_be_visible()
    save(page, "executions")

    page.goto(browser_tenant.url(f"workflows/{runs[1].workflow_id}/runs/{runs[1].run_id}/"))
    save(page, "execution")

    page.goto(browser_tenant.url(f"workflows/{runs[1].workflow_id}/runs/{runs[1].run_id}/reset/?point=4"))
    save(page, "reset")

    admin = open_page("admin")
    admin.goto(browser_tenant.url("settings/rate-limits/"))
    save(admin, "rate-limits")

    failed = failed_by_activity(browser_tenant, "payment-ord-47")
    page.goto(browser_tenant.url(f"workflows/{failed.workflow_id}/"))
    save(page, "execution-failed")
    page.goto(browser_tenant.url("triage/"))
    save(page, "triage")

    dark = open_page("operator", color_scheme="dark")
    dark.goto(browser_tenant.url(f"workflows/{runs[1].workflow_id}/runs/{runs[1].run_id}/"))
    save(dark, "execution-dark")
