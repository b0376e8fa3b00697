"""The security matrix of the operator UI: every namespace page, action and live channel,
tried as an outsider.

The pages come from Django's URL resolver (every route under ``ns/<namespace>/``), so a
new page is in the matrix the day it is added; a path parameter without a sample value
fails the test. At B's namespace and B's ids (``tests.integration.minted_ids``):

* an anonymous visitor: GET and POST are sent to the login page (302), or refused (403);
* a member of A only (an admin there): GET and POST answer 404, "no such page, or not
  yours" (403 where the page refuses before looking);
* a viewer of B: every POST is refused (403) but the ones a viewer may make (saving
  and deleting a list view of their own: ``VIEWER_MAY_POST``) and those of pages that
  read on a POST (``READS_ON_POST``), which must change nothing;
* an operator of B posting without the CSRF token: 403;
* the live channel of B's run: refused at the handshake for an anonymous visitor and for a
  member of A only.

Every row of B is the same afterwards, and no outsider's answer carries B's data.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.test import Client

from executions.models import EXECUTION_ACTIONS
from executions.ui import schedules
from executions.ui.live import ExecutionLiveConsumer
from executions.ui.urls import websocket_urlpatterns
from namespaces.models import MemberRole, Membership
from tests.factories import UserFactory
from tests.integration import security_matrix as matrix
from tests.integration.minted_ids import BIG_INPUT, JOB, QUEUE, SID, WID, World, build_world

pytestmark = pytest.mark.django_db(transaction=True)  # the live consumer reads on its own thread

# Page parameters that name one of several verbs: every verb is tried.
VERBS = {"ui-action": sorted(EXECUTION_ACTIONS), "ui-schedule-action": sorted(schedules.ACTIONS)}
# What a viewer may post: their own list views.
VIEWER_MAY_POST = {"ui-view-save", "ui-view-delete"}
# Pages that read on a POST (the query form runs a read-only query): a viewer's POST there
# changes nothing, which the rows check proves. (Read-only pages refuse a POST: 405.)
READS_ON_POST = {"ui-query"}
NOT_FOUND = {403, 404}


def ui_pages() -> list[tuple[str, str]]:
    """(route name, schema-style template) of every page inside a namespace."""
    return [
        (pattern.name or route, matrix.template(route))
        for route, pattern in matrix.resolver_routes()
        if route.startswith("ns/<str:namespace>/")
    ]


def samples(world: World) -> dict[str, str]:
    return {
        "namespace": world.b.name,
        "workflow_id": WID,
        "run_id": str(world.run_b.run_id),
        "schedule_id": SID,
        "job_id": JOB,
        "view_id": str(world.view_b.pk),
        "event_id": "1",
        "task_queue": QUEUE,
    }


def urls(world: World) -> list[tuple[str, str]]:
    """(route name, URL at B) for every page and verb."""
    values = samples(world)
    found = []
    for name, path in ui_pages():
        for verb in VERBS.get(name, [""]):
            missing = [p for p in matrix.parameters(path) if p not in values and p != "action"]
            assert not missing, f"{name}: no sample value for {missing}: add one to samples()"
            found.append((name, matrix.fill(path, {**values, "action": verb})))
    return found


def signed_in(world: World, role: str | None, *, csrf: bool = False) -> Client:
    """A client signed in as a new user with ``role`` in B (None: an admin of A only)."""
    user = UserFactory.create()
    if role is None:
        Membership.objects.create(user=user, namespace=world.a, role=MemberRole.ADMIN)
    else:
        Membership.objects.create(user=user, namespace=world.b, role=role)
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


FORM = {"reason": "r", "signal_name": "s", "name": "v", "query": "", "rps": "5", "username": "x"}


def test_every_namespace_page_refuses_outsiders(capsys: pytest.CaptureFixture[str]) -> None:
    world = build_world()
    markers = {
        "other workflow": "other-b",
        "payload": BIG_INPUT["data"][:200],
        "key prefix": world.key_b.prefix,
    }
    clients = {
        "anonymous": Client(),
        "member of A only": signed_in(world, None),
        "viewer of B": signed_in(world, MemberRole.VIEWER),
        "operator of B without CSRF": signed_in(world, MemberRole.OPERATOR, csrf=True),
    }
    before = matrix.rows(world.b)
    tried, violations = 0, []
    for name, url in urls(world):
        cases: list[tuple[str, str, set[int]]] = [
            ("anonymous", "GET", {302}),
            ("anonymous", "POST", {302, 403}),
            ("member of A only", "GET", NOT_FOUND | {405}),  # 405: a POST-only page, said before looking
            ("member of A only", "POST", NOT_FOUND | {405}),
            ("operator of B without CSRF", "POST", {403}),
        ]
        if name in READS_ON_POST:
            cases.append(("viewer of B", "POST", {200, 400, 403}))
        elif name not in VIEWER_MAY_POST:
            cases.append(("viewer of B", "POST", {403, 404, 405}))
        for who, method, allowed in cases:
            tried += 1
            client = clients[who]
            form = {**FORM, "request_id": str(uuid.uuid4())}
            response = client.post(url, form) if method == "POST" else client.get(url)
            body = b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[attr-defined]
            text = body.decode(errors="replace")
            if response.status_code not in allowed:
                violations.append(
                    f"{method} {url} [{who}]: {response.status_code}, documented {sorted(allowed)}"
                )
            elif response.status_code == 302 and not response["Location"].startswith("/login/"):
                violations.append(
                    f"{method} {url} [{who}]: sent to {response['Location']}, not the login page"
                )
            elif who != "viewer of B" and (leaked := [m for m, mark in markers.items() if mark in text]):
                violations.append(f"{method} {url} [{who}]: the page shows B's {', '.join(leaked)}")
    if matrix.rows(world.b) != before:
        violations.append("refused UI calls changed B's rows")
    with capsys.disabled():
        print(f"\nUI security matrix: {tried} requests tried, {len(violations)} violations")
    assert violations == [], "\n".join(violations)


def test_the_live_channel_of_a_run_refuses_anonymous_and_outside_sockets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def no_pushes(self: ExecutionLiveConsumer, watch: Any) -> None:
        """Only the handshake is tested: an accepted socket sends nothing here."""

    monkeypatch.setattr(ExecutionLiveConsumer, "_push", no_pushes)
    world = build_world()
    path = f"/ws/ui/ns/{world.b.name}/workflows/{WID}/runs/{world.run_b.run_id}/"
    assert not _handshake(None, path)
    assert not _handshake(signed_in(world, None), path)
    assert _handshake(signed_in(world, MemberRole.VIEWER), path)  # the check can pass


live_app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
Communicator: Any = ApplicationCommunicator  # asgiref's test helper is untyped


def _handshake(client: Client | None, path: str) -> bool:
    """Whether the live socket at ``path`` accepts the handshake of ``client``'s session."""
    cookie = [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())] if client else []
    scope = {"type": "websocket", "path": path, "query_string": b"first=1&after=1", "headers": cookie}

    async def attempt() -> bool:
        socket = Communicator(live_app, {**scope, "subprotocols": []})
        await socket.send_input({"type": "websocket.connect"})
        reply = await socket.receive_output(timeout=10)
        await socket.send_input({"type": "websocket.disconnect", "code": 1000})
        await socket.wait(timeout=10)
        return bool(reply["type"] == "websocket.accept")

    return async_to_sync(attempt)()
