"""Browser tests: Playwright drives the system's Chromium against a real stack.

One Chromium for the package (all of a session's browser tests). Each role (viewer,
operator, admin) signs in once through the real sign-in form; its storage state (the
session cookie) is kept and every test opens a fresh browser context from it, so tests do
not share pages, history or open sockets.

The namespace, its API keys and the users are created through the factories and
committed, because the server processes of the ``stack`` fixture read them from the test
database. Chromium is launched from ``/usr/bin/chromium`` (``CHRONICLE_CHROMIUM``
overrides the path); Playwright's own browser downloads are never used.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import (
    APIResponse,
    Browser,
    BrowserContext,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from namespaces.models import MemberRole, Namespace
from tests.conftest import Api, ScriptedWorker, Stack, Tenant, command
from tests.factories import MembershipFactory, UserFactory

CHROMIUM = os.environ.get("CHRONICLE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update"]
VIEWPORT = {"width": 1280, "height": 800}
PASSWORD = "correct horse battery staple"
ROLES = (MemberRole.VIEWER, MemberRole.OPERATOR, MemberRole.ADMIN)
TIMEOUT_MS = 15_000

expect.set_options(timeout=TIMEOUT_MS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/browser carries the ``browser`` mark (``pytest -m browser``)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def committed(django_db_blocker: Any) -> Callable[[], AbstractContextManager[None]]:
    """Write to the test database outside a test transaction, so the stack's processes see it.

    Playwright's sync API runs an event loop in this thread, which makes Django's
    async-safety guard refuse ORM calls; the guard is lifted only inside this block. In
    that loop's context Django hands out connections of their own, so the block closes
    them again: left open, they would keep the test database from being dropped.
    """

    @contextmanager
    def block() -> Iterator[None]:
        previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        try:
            with django_db_blocker.unblock():
                try:
                    yield
                finally:
                    connections.close_all()
        finally:
            if previous is None:
                del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
            else:
                os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous

    return block


@dataclass(frozen=True)
class BrowserTenant:
    """The namespace the browser tests work in, its REST API and one user per role."""

    stack: Stack
    tenant: Tenant
    usernames: dict[str, str]

    @property
    def namespace(self) -> str:
        return self.tenant.namespace

    @property
    def api(self) -> Api:
        return Api(self.stack, self.tenant)

    def url(self, path: str = "") -> str:
        return f"{self.stack.url}/ns/{self.namespace}/{path}"


@pytest.fixture(scope="session")
def browser_tenant(
    stack: Stack, make_tenant: Callable[..., Tenant], committed: Callable[[], AbstractContextManager[None]]
) -> BrowserTenant:
    tenant = make_tenant()
    with committed():
        namespace = Namespace.objects.get(name=tenant.namespace)
        usernames = {}
        for role in ROLES:
            user = UserFactory(username=f"{role}-{uuid.uuid4().hex[:6]}", password=PASSWORD)
            MembershipFactory(user=user, namespace=namespace, role=role)
            usernames[str(role)] = user.username
    return BrowserTenant(stack, tenant, usernames)


@pytest.fixture(scope="package")
def playwright_driver() -> Iterator[Playwright]:
    """Playwright for this package only: while it runs, its event loop is the thread's
    running loop, and Django refuses ORM calls from every later test in the session."""
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}: install the chromium package")
    chromium = playwright_driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


def sign_in(page: Page, base_url: str, username: str, password: str = PASSWORD) -> None:
    """Sign in through the real form, as a person would."""
    page.goto(f"{base_url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


@pytest.fixture(scope="package")
def storage_states(browser: Browser, browser_tenant: BrowserTenant) -> dict[str, Any]:
    """One sign-in per role; the resulting cookies are reused by every test's context."""
    states: dict[str, Any] = {}
    for role, username in browser_tenant.usernames.items():
        context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        sign_in(context.new_page(), browser_tenant.stack.url, username)
        states[role] = context.storage_state()
        context.close()
    return states


OpenPage = Callable[..., Page]


@pytest.fixture
def open_page(browser: Browser, storage_states: dict[str, Any]) -> Iterator[OpenPage]:
    """``open_page(role, color_scheme="light")``: a signed-in page in a fresh context."""
    contexts: list[BrowserContext] = []

    def open_as(role: str | None, *, color_scheme: str = "light") -> Page:
        context = browser.new_context(
            viewport=VIEWPORT,  # type: ignore[arg-type]
            color_scheme=color_scheme,  # type: ignore[arg-type]
            storage_state=storage_states[role] if role else None,
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield open_as
    for context in contexts:
        context.close()


@dataclass(frozen=True)
class StartedRun:
    workflow_id: str
    run_id: str
    task_queue: str


def started_run(
    tenant: BrowserTenant, *, prefix: str = "order", complete_first_task: bool = True
) -> StartedRun:
    """A running workflow started through the REST API whose first workflow task a worker completed.

    The worker schedules one activity, so the run stays open with a ``WorkflowTaskCompleted``
    event to reset to.
    """
    api = tenant.api
    workflow_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    task_queue = f"q-{uuid.uuid4().hex[:8]}"
    started = api.start(workflow_id, task_queue)
    if complete_first_task:
        worker = ScriptedWorker(api, task_queue, identity="browser-test-worker")
        task = worker.poll_workflow_task()
        schedule = command(
            "ScheduleActivityTask", activity_id="a1", activity_type="Charge", start_to_close_timeout=60
        )
        response = worker.complete_workflow_task(task, schedule)
        assert response.status_code == 200, response.text
    return StartedRun(workflow_id, str(started["run_id"]), task_queue)


@pytest.fixture
def run_factory(browser_tenant: BrowserTenant) -> Callable[..., StartedRun]:
    def make(**options: Any) -> StartedRun:
        return started_run(browser_tenant, **options)

    return make


def run_url(tenant: BrowserTenant, run: StartedRun, suffix: str = "") -> str:
    """The UI page of ``run`` (``suffix`` names an action page such as ``"terminate/"``)."""
    return tenant.url(f"workflows/{run.workflow_id}/runs/{run.run_id}/{suffix}")


def post_form(page: Page, url: str, **fields: str) -> APIResponse:
    """POST a form with the page's cookies and CSRF token, as a hand-made request would."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    return page.request.post(url, form={"csrfmiddlewaretoken": token, **fields}, max_redirects=0)
