"""Finding a run by its id, reading why it failed, its compact history, and the feedback
the UI gives, in a real browser against the real stack."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from playwright.sync_api import expect

from sdk._runtime.replayer import WorkflowHistory
from sdk.client import Client
from sdk.worker import Replayer, Worker
from tests.browser.conftest import BrowserTenant, OpenPage, StartedRun, run_url
from tests.conftest import ScriptedWorker, command
from tests.e2e.test_sdk_replay import Checkout, bill, reserve

RunFactory = Callable[..., StartedRun]
DECLINED = {"message": "card declined for ord-47", "application_failure_info": {"type": "CardDeclined"}}


def failed_by_activity(tenant: BrowserTenant, workflow_id: str) -> StartedRun:
    """A run failed the way the SDK fails it: "Activity task failed" around the card error."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    run_id = str(tenant.api.start(workflow_id, queue, workflow_type="Payment")["run_id"])
    worker = ScriptedWorker(tenant.api, queue, identity="browser-test-worker")
    schedule = command(
        "ScheduleActivityTask",
        activity_id="a1",
        activity_type="Charge",
        start_to_close_timeout=60,
        retry_policy={"maximum_attempts": 1},
    )
    assert worker.complete_workflow_task(worker.poll_workflow_task(), schedule).status_code == 200
    assert worker.activity("fail", worker.poll_activity_task(), failure=DECLINED).status_code == 200
    wrapper = {
        "message": "Activity task failed",
        "activity_failure_info": {"activity_type": "Charge", "activity_id": "a1", "started_event_id": 6},
        "cause": DECLINED,
    }
    fail = command("FailWorkflowExecution", failure=wrapper)
    assert worker.complete_workflow_task(worker.poll_workflow_task(), fail).status_code == 200
    return StartedRun(workflow_id, run_id, queue)


def test_a_bare_workflow_id_url_opens_the_latest_run(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run = run_factory(prefix="payment-ord")
    page = open_page("viewer")
    page.goto(browser_tenant.url(f"workflows/{run.workflow_id}/"))
    expect(page).to_have_url(re.compile(re.escape(f"/runs/{run.run_id}/")))
    expect(page.get_by_role("heading", level=1)).to_contain_text(run.workflow_id)


def test_a_workflow_id_typed_in_the_search_box_opens_its_run(
    open_page: OpenPage, browser_tenant: BrowserTenant, run_factory: RunFactory
) -> None:
    run = run_factory(prefix="payment-ord")
    page = open_page("viewer")
    page.goto(browser_tenant.url())
    page.get_by_label("Visibility query").fill(run.workflow_id)
    page.get_by_label("Visibility query").press("Enter")
    expect(page).to_have_url(re.compile(re.escape(f"/runs/{run.run_id}/")))

    page.goto(browser_tenant.url())
    page.get_by_label("Visibility query").fill(run.workflow_id[:-2])
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("Read as an id")).to_be_visible()
    page.get_by_role("link", name=run.workflow_id).click()
    expect(page).to_have_url(re.compile(re.escape(run.run_id)))


def test_a_failed_run_and_triage_show_the_root_cause(
    open_page: OpenPage, browser_tenant: BrowserTenant
) -> None:
    run = failed_by_activity(browser_tenant, f"payment-ord-{uuid.uuid4().hex[:6]}")
    page = open_page("viewer")
    page.goto(run_url(browser_tenant, run))
    cause = page.get_by_role("group", name="Root cause")
    expect(cause).to_contain_text("card declined for ord-47")
    expect(cause).to_contain_text("activity Charge (a1), attempt 1")

    page.goto(browser_tenant.url("triage/"))
    by_cause = page.locator("table", has=page.get_by_role("columnheader", name="Root cause"))
    expect(by_cause.get_by_role("link", name="card declined for ord-<n>")).to_be_visible()
    expect(by_cause).not_to_contain_text("Activity task failed")


def test_the_compact_history_filters_and_downloads_a_replayable_history(
    open_page: OpenPage, browser_tenant: BrowserTenant, tmp_path: Path
) -> None:
    run = failed_by_activity(browser_tenant, f"history-{uuid.uuid4().hex[:6]}")
    page = open_page("viewer")
    page.goto(run_url(browser_tenant, run))
    failed_line = page.locator("#event-7")
    expect(failed_line).to_contain_text("ActivityTaskFailed")
    expect(failed_line).to_contain_text("Charge (a1) · card declined for ord-47")
    expect(failed_line.locator("pre")).to_be_hidden()  # the JSON waits behind the line
    failed_line.locator("summary").click()
    expect(failed_line.locator("pre")).to_contain_text('"CardDeclined"')

    page.get_by_role("navigation", name="Event categories").get_by_role(
        "link", name="Activities", exact=True
    ).click()
    expect(page.locator("#event-rows tr")).to_have_count(3)  # scheduled, started, failed
    expect(page.locator("#event-1")).to_have_count(0)

    with page.expect_download() as download:
        page.get_by_role("link", name="Download history (JSON)").click()
    saved = tmp_path / "history.json"
    download.value.save_as(saved)
    history = WorkflowHistory.from_json(saved.read_text())
    assert history.run_id == run.run_id
    assert [e["event_type"] for e in history.events] == browser_tenant.api.event_types(run.workflow_id)
    assert json.loads(saved.read_text())["events"][0]["attributes"]["workflow_type"]["name"] == "Payment"


def test_a_missing_page_is_a_styled_404_with_the_way_back(
    open_page: OpenPage, browser_tenant: BrowserTenant
) -> None:
    page = open_page("viewer")
    response = page.goto(browser_tenant.url("workflows/no-such-order/"))
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Nothing here")
    page.get_by_role("link", name=f"Workflows in {browser_tenant.namespace}").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Workflows in")


def _checkout_run(tenant: BrowserTenant) -> str:
    """Run the replay suite's Checkout workflow on a real SDK worker; its workflow id.

    In a thread of its own: Playwright's sync API keeps an event loop in the test's thread.
    """

    async def scenario() -> str:
        client = await Client.connect(
            tenant.stack.url, namespace=tenant.namespace, api_key=tenant.tenant.keys["all"]
        )
        queue = f"q-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[Checkout], activities=[reserve, bill]):
            handle = await client.start_workflow(
                Checkout.run, "book", id=f"checkout-{uuid.uuid4().hex[:6]}", task_queue=queue
            )
            # Bounded: a hung run must fail the test, not hang the thread join after it.
            assert await asyncio.wait_for(handle.result(), 60) == "reserved book, billed book"
        await client.close()
        return handle.id

    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, scenario()).result()


def test_the_downloaded_history_replays_on_the_code_that_wrote_it(
    open_page: OpenPage, browser_tenant: BrowserTenant, tmp_path: Path
) -> None:
    workflow_id = _checkout_run(browser_tenant)
    page = open_page("viewer")
    page.goto(browser_tenant.url(f"workflows/{workflow_id}/"))
    with page.expect_download() as download:
        page.get_by_role("link", name="Download history (JSON)").click()
    saved = tmp_path / "checkout.json"
    download.value.save_as(saved)
    history = WorkflowHistory.from_json(saved.read_text())
    assert Replayer(workflows=[Checkout]).replay_workflow(history).replay_failure is None
