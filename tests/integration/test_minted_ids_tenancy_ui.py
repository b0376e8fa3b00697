"""Ids minted in one namespace are unknown in every other one: the UI, its live socket and
the archived-history reader.

The signed-in user is an admin of A and of B, so nothing but the URL's namespace keeps
B's ids out of A's pages. Each of B's ids under an A URL must get the page an id nobody
minted gets there (compared whole, with the CSRF token and fresh request ids masked),
leave B's rows as they were, and still work under B's URL.
"""

from __future__ import annotations

import gzip
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from executions import audit, visibility
from executions.models import AuditAction, AuditEntry
from executions.selectors import schedule_list
from executions.ui.live import ExecutionLiveConsumer
from executions.ui.urls import websocket_urlpatterns
from history.kernel.archival import archive_name, archive_run, archive_storage
from history.models import WorkflowExecution
from namespaces.models import ApiKey, Membership
from tests.factories import UserFactory
from tests.integration.minted_ids import JOB, SID, WID, World, build_world, page, snapshot

RUN = "workflows/{wid}/runs/{run}/"
SCHEDULE = "schedules/{sid}/"
BACKFILL = {"reason": "r", "start_at": "2026-01-01T00:00", "end_at": "2026-01-01T03:00"}

# (method, path under /ns/{namespace}/, form data, the legitimate call's status under B's
# URL or None when it cannot be made here: a query waits for a worker)
CALLS: list[tuple[str, str, dict[str, str], int | None]] = [
    ("GET", RUN, {}, 200),
    ("GET", RUN + "query/", {}, 200),
    ("POST", RUN + "query/", {"query_type": "state"}, None),
    ("GET", RUN + "events/1.json", {}, 200),
    ("GET", RUN + "terminate/", {}, 200),
    ("POST", RUN + "terminate/", {"reason": "r"}, 302),
    ("POST", RUN + "cancel/", {"reason": "r"}, 302),
    ("POST", RUN + "signal/", {"reason": "r", "signal_name": "go"}, 302),
    ("GET", RUN + "reset/", {"point": "first"}, 200),
    ("POST", RUN + "reset/", {"reason": "r", "point": "first"}, 302),
    ("GET", SCHEDULE, {}, 200),
    ("GET", SCHEDULE + "-/pause/", {}, 200),
    ("POST", SCHEDULE + "-/pause/", {"reason": "r"}, 302),
    ("POST", SCHEDULE + "-/unpause/", {"reason": "r"}, 302),
    ("POST", SCHEDULE + "-/trigger/", {"reason": "r"}, 302),
    ("POST", SCHEDULE + "-/backfill/", BACKFILL, 302),
    ("POST", SCHEDULE + "-/delete/", {"reason": "r"}, 302),
    ("GET", "batch/{job}/", {}, 200),
    ("GET", "batch/{job}/progress.json", {}, 200),
    ("POST", "batch/{job}/rate/", {"rps": "7"}, 302),
    ("POST", "batch/{job}/stop/", {"reason": "r"}, 302),
    ("POST", "views/{view}/delete/", {}, 302),
]


@pytest.fixture
def world(db: Any) -> World:
    return build_world()


def _url(namespace: str, template: str, ids: dict[str, str]) -> str:
    return f"/ns/{namespace}/" + template.format(**ids)


@pytest.mark.parametrize(
    ("method", "template", "data", "legit"), CALLS, ids=[f"{c[0]} {c[1]}" for c in CALLS]
)
def test_an_id_of_another_namespace_is_a_page_not_found_and_changes_nothing(
    world: World, method: str, template: str, data: dict[str, str], legit: int | None
) -> None:
    client = world.session()
    b_ids = {"wid": WID, "run": str(world.run_b.run_id), "sid": SID, "job": JOB, "view": str(world.view_b.pk)}
    nobodys = {**b_ids, "run": str(uuid.uuid4()), "sid": "never-minted", "job": "never-minted"}
    nobodys["view"] = str(world.view_b.pk + 1_000_000)
    before = snapshot(world.b)

    foreign = page(client, method, _url(world.a.name, template, b_ids), data)
    unknown = page(client, method, _url(world.a.name, template, nobodys), data)

    assert foreign == unknown
    assert foreign[0] == 404 and world.b.name not in foreign[1]
    assert snapshot(world.b) == before
    if legit is not None:
        status, body = page(client, method, _url(world.b.name, template, b_ids), data)
        assert status == legit, body[:500]


# ---------------------------------------------------------------- page tokens and cursors


def test_an_executions_list_token_of_another_namespace_is_refused_as_a_made_up_one(world: World) -> None:
    client = world.session()
    # The token B's list page hands out for its next page (its default order, one row a page).
    _, token = visibility.page(world.b, "ORDER BY StartTime DESC", page_size=1)
    assert token is not None
    before = snapshot(world.b)

    foreign = page(client, "GET", f"/ns/{world.a.name}/", {"token": token})
    made_up = page(client, "GET", f"/ns/{world.a.name}/", {"token": "bm9ib2R5"})
    assert foreign == made_up
    assert foreign[0] == 400 and "malformed next_page_token" in foreign[1]
    assert snapshot(world.b) == before

    status, body = page(client, "GET", f"/ns/{world.b.name}/", {"token": token})
    assert status == 200 and "malformed" not in body


def test_a_schedule_list_cursor_of_another_namespace_is_refused_as_a_made_up_one(world: World) -> None:
    client = world.session()
    _, cursor = schedule_list(world.b, page_size=1)  # what B's list links to when it has more
    assert cursor is not None

    foreign = page(client, "GET", f"/ns/{world.a.name}/schedules/", {"cursor": cursor})
    made_up = page(client, "GET", f"/ns/{world.a.name}/schedules/", {"cursor": SID})
    assert foreign == made_up == (400, "malformed cursor")

    status, body = page(client, "GET", f"/ns/{world.b.name}/schedules/", {"cursor": cursor})
    assert status == 200 and f"{SID}-2" in body and f"/schedules/{SID}/" not in body


def test_an_audit_log_cursor_of_another_namespace_starts_from_the_newest_as_a_made_up_one(
    world: World,
) -> None:
    for n in range(51):  # one more than a page, so B's log links to an older page
        audit.record(world.b, actor="b", action=AuditAction.QUERY, request_id=f"page-{n}")
    for n in range(3):
        audit.record(world.a, actor="a", action=AuditAction.QUERY, request_id=f"a-{n}")
    client = world.session()
    _, newest_b = page(client, "GET", f"/ns/{world.b.name}/audit/")
    link = re.search(r'href="\?([^"]+)" rel="next"', newest_b)
    assert link is not None
    cursor = dict(p.split("=", 1) for p in link.group(1).replace("&amp;", "&").split("&"))["before"]

    foreign = page(client, "GET", f"/ns/{world.a.name}/audit/?before={cursor}")
    made_up = page(client, "GET", f"/ns/{world.a.name}/audit/", {"before": "2999-01-01T00:00:00+00:00|1"})
    no_cursor = page(client, "GET", f"/ns/{world.a.name}/audit/")
    assert foreign[0] == 200 and foreign[1] == made_up[1] == no_cursor[1]
    assert foreign[1].count('<tr id="audit-') == 3

    older = page(client, "GET", f"/ns/{world.b.name}/audit/?before={cursor}")
    assert older[0] == 200 and older[1].count('<tr id="audit-') == 4  # 54 entries, 50 a page


# ---------------------------------------------------------------- settings: API keys


def test_revoking_a_key_of_another_namespace_is_no_such_key_and_it_stays_live(world: World) -> None:
    client = world.session()
    url = f"/ns/{world.a.name}/settings/api-keys/"
    revoke = {"form": "revoke", "reason": "leaked"}
    foreign = page(client, "POST", url, {**revoke, "key_id": str(world.key_b.pk)})
    unknown = page(client, "POST", url, {**revoke, "key_id": str(world.key_b.pk + 1_000_000)})
    assert foreign == unknown
    assert foreign[0] == 400 and "no such API key in this namespace" in foreign[1]
    assert ApiKey.objects.get(pk=world.key_b.pk).revoked_at is None

    legit = page(
        client, "POST", f"/ns/{world.b.name}/settings/api-keys/", {**revoke, "key_id": str(world.key_b.pk)}
    )
    assert legit[0] == 302 and ApiKey.objects.get(pk=world.key_b.pk).revoked_at is not None


# ---------------------------------------------------------------- the live socket

live_app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
Communicator: Any = ApplicationCommunicator  # asgiref's test helper is untyped


def _handshake(client: Client, url: str) -> bool:
    """Whether the live socket at ``url`` accepts the handshake of ``client``'s session."""
    path, _, query = url.partition("?")
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    scope = {
        "type": "websocket",
        "path": path,
        "query_string": query.encode(),
        "headers": [(b"cookie", cookie)],
    }

    async def attempt() -> bool:
        socket = Communicator(live_app, {**scope, "subprotocols": []})
        await socket.send_input({"type": "websocket.connect"})
        reply = await socket.receive_output(timeout=10)
        await socket.send_input({"type": "websocket.disconnect", "code": 1000})
        await socket.wait(timeout=10)
        return bool(reply["type"] == "websocket.accept")

    return async_to_sync(attempt)()


@pytest.mark.django_db(transaction=True)  # the consumer reads through its own thread
def test_the_live_socket_refuses_a_run_of_another_namespace_as_an_unknown_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def no_pushes(self: ExecutionLiveConsumer, watch: Any) -> None:
        """The handshake is what is tested: an accepted socket sends nothing here, so no
        LISTEN connection outlives the test's event loop."""

    monkeypatch.setattr(ExecutionLiveConsumer, "_push", no_pushes)
    world = build_world()
    both = world.session()
    only_a = Client()
    outsider: User = UserFactory.create()  # a member of A only
    Membership.objects.create(user=outsider, namespace=world.a, role="admin")
    only_a.force_login(outsider)
    run_b = str(world.run_b.run_id)
    live = "/ws/ui/ns/{ns}/workflows/" + WID + "/runs/{run}/?first=1&after=1"

    assert not _handshake(both, live.format(ns=world.a.name, run=run_b))
    assert not _handshake(both, live.format(ns=world.a.name, run=uuid.uuid4()))
    assert not _handshake(only_a, live.format(ns=world.b.name, run=run_b))
    assert _handshake(both, live.format(ns=world.b.name, run=run_b))


# ---------------------------------------------------------------- archived histories


def _archived(namespace: str, workflow_id: str, run_id: str | None = None) -> dict[str, Any]:
    out: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            out.append(text)

        def flush(self) -> None:
            pass

    call_command("archived_history", namespace, workflow_id, run_id=run_id, stdout=Sink())
    return dict(json.loads("".join(out)))


def test_an_archived_run_of_another_namespace_is_no_archived_history(
    world: World, settings: Any, tmp_path: Path
) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "chronicle_archive": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    run_b = str(world.run_b.run_id)
    name = archive_run(world.run_b)
    assert name == archive_name(world.b, WID, run_b)
    with archive_storage().open(name, "rb") as raw, gzip.open(raw, "rt") as lines:
        assert json.loads(lines.readline())["execution"]["namespace"] == world.b.name

    # Ids that lead out of A's directory into B's archive: refused as a run never archived.
    quoted_b = world.b.name
    for workflow_id, run_id in (
        ("x", f"../../{quoted_b}/{WID}/{run_b}"),
        ("..", f"{quoted_b}/{WID}/{run_b}"),
        (WID, run_b),
        (WID, None),
    ):
        with pytest.raises(CommandError, match=f"no archived history for workflow {workflow_id!r}"):
            _archived(world.a.name, workflow_id, run_id)
    with pytest.raises(CommandError, match="no archived history"):
        _archived(world.a.name, "never-ran")

    assert _archived(world.b.name, WID, run_b)["run_id"] == run_b
    assert _archived(world.b.name, WID)["execution"]["namespace"] == world.b.name


def test_form_request_ids_of_another_namespace_do_not_count_as_done_here(world: World) -> None:
    client = world.session()
    audit.record(world.b, actor="b", action=AuditAction.TERMINATE, request_id="form-1", result="terminated")
    run_a = str(WorkflowExecution.objects.get(namespace=world.a, workflow_id=WID).run_id)
    url = f"/ns/{world.a.name}/workflows/{WID}/runs/{run_a}/terminate/"
    status, _ = page(client, "POST", url, {"reason": "r", "request_id": "form-1"})
    assert status == 302
    described = client.get(f"/ns/{world.a.name}/workflows/{WID}/runs/{run_a}/").content.decode()
    assert "Terminated" in described
    assert AuditEntry.objects.filter(namespace=world.a, request_id="form-1").count() == 1
