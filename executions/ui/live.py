"""Live mode of the execution page: a websocket that pushes each new event as it is written.

The kernel writes history in other processes (frontends, shard owners), so an in-memory
channel layer never hears of it. The consumer waits the way the REST history long-poll
does instead: on the process's one LISTEN connection (``matching.longpoll.hub``) for the
run's history notification, re-checking on the same short safety interval, since a
NOTIFY can be lost. Each wake-up reads the events after the last one sent and pushes them
as rendered table rows, with the run's status, its pending activities and a redrawn
timeline; when the run has closed and every event is sent, it says so and closes.

The socket is authenticated by the session (``AuthMiddlewareStack``) and checked like a
page: an anonymous visitor, a non-member or a run outside the namespace is refused at the
handshake, and membership is checked again before every push.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import connection, transaction
from django.template.loader import render_to_string

from chronicle.conf import engine_settings
from chronicle.db import listen_conninfo
from chronicle.errors import ChronicleError
from executions import selectors
from executions.ui import history_view, timeline
from executions.ui.access import Access, member_access
from executions.ui.panels import EVENTS_PAGE_SIZE
from history.models import WorkflowExecution
from matching.longpoll import hub

PATH = "ws/ui/ns/<str:namespace>/workflows/<path:workflow_id>/runs/<str:run_id>/"


def _query_int(scope: dict[str, Any], name: str) -> int:
    values = parse_qs(scope.get("query_string", b"").decode()).get(name) or ["0"]
    try:
        return max(0, int(values[0]))
    except ValueError:
        return 0


@dataclass
class Watch:
    """One socket's view of one run: who watches and the last event it was sent."""

    user_pk: int
    access: Access
    ex: WorkflowExecution
    first_shown: int
    after: int
    closed: bool = False

    @classmethod
    def open(cls, scope: dict[str, Any]) -> Watch | None:
        """The watch the handshake asks for, or None when the user may not see that run."""
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            return None
        route = scope["url_route"]["kwargs"]
        access = member_access(user.pk, route["namespace"])
        if access is None:
            return None
        try:
            ex = selectors.execution_get(access.namespace, route["workflow_id"], route["run_id"])
        except ChronicleError:
            return None
        return cls(user.pk, access, ex, _query_int(scope, "first") or 1, _query_int(scope, "after"))

    def still_allowed(self) -> bool:
        return member_access(self.user_pk, self.access.namespace.name) is not None

    def next_update(self) -> dict[str, Any] | None:
        """The events after the last one sent, rendered, or None when there are none yet.

        The run and its events are read in one snapshot, so the status sent is the one
        those events end at (a close between the two reads would otherwise send the close
        event under a running status), and ``closed`` is only set after the last page went out.
        """
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self.ex.refresh_from_db()
            events, more = history_view.rows_after(self.ex, self.after)
        if not events:
            self.closed = not self.ex.is_running
            return None
        self.after = events[-1]["event_id"]
        self.closed = not self.ex.is_running and more is None
        return self._render(events)

    def _render(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        ex, ns = self.ex, self.access.namespace.name
        rows = [
            render_to_string("ui/_event_row.html", {"e": e, "access": self.access, "ex": ex, "ns": ns})
            for e in events
        ]
        described = selectors.execution_describe(ex)
        drawn = timeline.build(
            ex,
            described["pending_activities"],
            namespace=ns,
            shown=(self.first_shown, self.after),
            page_size=EVENTS_PAGE_SIZE,
        )
        return {
            "type": "events",
            "rows": rows,
            "last_event_id": self.after,
            "status": ex.status,
            "running": ex.is_running,
            "pending": drawn.pending_summary,
            "timeline": render_to_string("ui/_timeline.html", {"timeline": drawn, "ex": ex}),
        }


class ExecutionLiveConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    """Pushes a run's new events to its execution page until the run closes."""

    watch: Watch | None = None
    pusher: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.watch = await database_sync_to_async(Watch.open)(self.scope)
        if self.watch is None:
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        await self.accept()
        self.pusher = asyncio.get_running_loop().create_task(self._push(self.watch))

    async def disconnect(self, code: int) -> None:
        if self.pusher is not None:
            self.pusher.cancel()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page sends nothing; anything it sends is ignored."""

    async def _push(self, watch: Watch) -> None:
        """Send what is new, then wait for the run's history notification (as the REST
        history long-poll does) or the safety re-check, until the run closes."""
        recheck = engine_settings().safety_recheck_seconds
        run_id = str(watch.ex.run_id)
        hub.ensure_listening(await database_sync_to_async(listen_conninfo)())
        while True:
            if not await database_sync_to_async(watch.still_allowed)():
                await self.close(code=4403)
                return
            # Subscribed before the read: an event appended while it reads wakes the wait.
            woken = hub.subscribe(run_id)
            try:
                update = await database_sync_to_async(watch.next_update)()
                if update is not None:
                    await self.send_json(update)
                if watch.closed:
                    await self.send_json({"type": "closed", "status": watch.ex.status})
                    await self.close(code=1000)
                    return
                if update is None:
                    with suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), recheck)
            finally:
                hub.unsubscribe(run_id, woken)
