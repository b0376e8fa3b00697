"""The client's hot calls on the lean lane: start, signal-with-start, signal, history.

A workflow's client makes these calls for every run (start, often eager; signals; the
result wait, a history long-poll for the close event), so they leave DRF as the worker's
token calls did (:mod:`matching.lane`): the key from the per-process cache, the tenancy
gate with the client role, the body decoded and validated once by its struct
(:mod:`executions.lane_bodies`), the kernel call, and the answer encoded once. The same
URLs, JSON, status codes, error bodies and order of checks as the DRF views they replace
(key 401, method 405, NUL in the path 400, namespace and role 404/403, rate 429, body or
query 413/400); Django's URLconf no longer lists these calls.

The history long-poll waits for a notification on the event loop, between trips to the
API's pool for its reads: a waiting client holds neither a thread nor a connection.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from chronicle.conf import engine_settings
from chronicle.db import listen_conninfo
from chronicle.errors import ChronicleError, ErrorCode, invalid
from chronicle.lane import EMPTY, Call, Reply, decode_body, encode, require_method
from chronicle.lane_asgi import Handler, Route, Trips, one_trip, waiting
from executions import selectors
from executions.lane_bodies import (
    HistoryParams,
    SignalRequest,
    SignalWithStartRequest,
    StartWorkflowRequest,
    history_params,
)
from executions.lane_updates import ROUTES as UPDATE_ROUTES
from history import kernel
from history.kernel.wakeups import close_wakeup_key, task_wakeup_key
from history.models import ExecutionStatus, TaskKind
from matching.longpoll import hub
from matching.sync_match import waiting_polls
from namespaces.auth import access_namespace, api_key_from_header
from namespaces.models import ApiKey, Namespace

NS = r"/api/v1/namespaces/(?P<namespace>[^/]+)/"
RUN = NS + r"workflows/(?P<workflow_id>[^/]+)(?:/runs/(?P<run_id>[^/]+))?/"


def _gate(call: Call, *methods: str) -> tuple[ApiKey, Namespace]:
    """The DRF views' first checks, in their order: key, method, path, namespace and role."""
    key = api_key_from_header(call.authorization)
    require_method(call, *methods)
    call.refuse_nul_in_path()
    return key, access_namespace(key, call.params["namespace"], "client")


@dataclass
class Started:
    """A start's answer and, when its caller asked to wait for the run's close, the read
    that waits for it."""

    answer: dict[str, Any]
    status: int
    wait_for_close: float = 0.0
    read: CloseRead | None = None
    look_first: bool = True

    @classmethod
    def of(cls, namespace: Namespace, body: StartWorkflowRequest, result: kernel.StartResult) -> Started:
        answer: dict[str, Any] = {"run_id": result.run_id, "started": result.started}
        status = 201 if result.started else 200
        if body.wait_for_close <= 0:
            return cls(answer, status)
        # A run this call created runs, and its close will be notified: the wait needs no
        # first look. A run found (a retried start, an existing run used) is looked at.
        running = selectors.RunClose(uuid.UUID(str(result.run_id)), ExecutionStatus.RUNNING, None, None)
        read = CloseRead(namespace, body.workflow_id, running, conninfo=listen_conninfo())
        return cls(answer, status, body.wait_for_close, read, look_first=not result.created)


def _start(call: Call) -> Started:
    """Start a run; with ``request_eager_execution`` (a key with the worker role too) the
    answer carries the run's first workflow task."""
    key, ns = _gate(call, "POST")
    body = decode_body(call.body, StartWorkflowRequest)
    if body.request_eager_execution and "worker" not in key.roles:
        raise ChronicleError(ErrorCode.PERMISSION_DENIED, "eager start needs the 'worker' role")
    if body.request_eager_execution and body.wait_for_close > 0:
        # The caller would hold the run's first task while waiting for the run to close.
        message = "request_eager_execution and wait_for_close exclude each other"
        raise invalid(message, fields={"wait_for_close": [message]})
    fields = body.start_fields()
    poll = None if body.request_eager_execution else waiting_polls.take(_first_task_key(ns, body.task_queue))
    if poll is not None:
        fields["first_task_to"] = poll.identity  # sync match: see matching.sync_match
    try:
        result = kernel.start_workflow_execution(ns, kernel.StartRequest(**fields))
    except BaseException:
        if poll is not None:
            poll.deliver(None)
        raise
    started = Started.of(ns, body, result)
    if poll is not None:
        poll.deliver(result.eager_workflow_task)
    elif result.eager_workflow_task is not None:
        started.answer["eager_workflow_task"] = result.eager_workflow_task
    return started


def _first_task_key(ns: Namespace, task_queue: str) -> str:
    """The wake-up key of the polls that may take a new run's first task: unversioned ones
    of its queue (a versioned queue's run is pinned, and started the usual way)."""
    return task_wakeup_key(ns.id, TaskKind.WORKFLOW, task_queue, "")


def _signal_with_start(call: Call) -> Started:
    _, ns = _gate(call, "POST")
    body = decode_body(call.body, SignalWithStartRequest)
    values = body.start_fields()
    signal = (values.pop("signal_name"), values.pop("signal_input"), values.get("request_id", ""))
    result = kernel.start_workflow_execution(ns, kernel.StartRequest(**values), signal=signal)
    started = Started.of(ns, body, result)
    started.status = 200
    return started


async def _started_answer(started: Started, trips: Trips) -> Reply:
    """The start's answer; if its caller asked, held until the run closes (or the wait
    ends) and carrying the close page under ``close``: a caller that wants the result
    then makes one call, not two."""
    read = started.read
    if read is not None:
        await _wait(read, started.wait_for_close, trips, look_first=started.look_first)
        if not read.waits():
            started.answer["close"] = read.page()
    return Reply(started.status, encode(started.answer))


async def start(call: Call, trips: Trips) -> Reply:
    return await _started_answer(await trips.run(_start, call), trips)


async def signal_with_start(call: Call, trips: Trips) -> Reply:
    return await _started_answer(await trips.run(_signal_with_start, call), trips)


def signal(call: Call) -> Reply:
    _, ns = _gate(call, "POST")
    body = decode_body(call.body, SignalRequest)
    kernel.signal_workflow_execution(
        ns, workflow_id=call.params["workflow_id"], run_id=call.params.get("run_id"), **body.fields()
    )
    return Reply(200, EMPTY)


@dataclass
class HistoryRead:
    """One history read: the run, what was asked, and the last page read.

    Each look reads the run's status and the page in one statement
    (``selectors.history_read``), so a page that says the run closed holds its close event
    (a follower stops on it) with no second read. Its methods run on the pool; between
    them, a long-poll waits on the event loop.
    """

    execution: selectors.RunKey  # the run as the last look saw it
    params: HistoryParams
    events: list[dict[str, Any]]
    cursor: int | None = None
    conninfo: str = ""  # the LISTEN connection's, read on the pool when the read may wait

    @classmethod
    def first(cls, ns: Namespace, workflow_id: str, run_id: str | None, params: HistoryParams) -> HistoryRead:
        """The run (404 unless it is in ``ns``) and its first page."""
        page = _history_read(ns.pk, workflow_id, run_id, params)
        return cls(page.run, params, page.events, page.cursor)

    def wakeup_key(self) -> str:
        return str(self.execution.run_id)

    def waits(self) -> bool:
        """Whether the answer is still to come: the run runs and has nothing new yet."""
        return self.execution.status == ExecutionStatus.RUNNING and not self.events

    def look(self) -> bool:
        """Read the run and its page again; True once the page has events."""
        ex = self.execution
        page = _history_read(ex.namespace_id, ex.workflow_id, ex.run_id, self.params)
        self.execution, self.events, self.cursor = page.run, page.events, page.cursor
        return bool(self.events)

    def take(self, detail: str) -> None:
        """A history read wants every event, which no notification carries: it reads them."""

    async def answer(self, trips: Trips) -> Reply:
        """After a wait: the last look's page if it found something; else a last look, as
        the wait may have ended well after the look before it."""
        if self.waits():
            return await trips.run(self._page)
        return self.reply()

    def _page(self) -> Reply:
        self.look()
        return self.reply()

    def reply(self) -> Reply:
        ex = self.execution
        return Reply(
            200, encode(_history_page(self.events, self.cursor, ex.status, ex.run_id, ex.new_run_id))
        )


@dataclass
class CloseRead:
    """A close-only read (what ``result()`` sends): the run and, once it closed, its close
    event, each look one fixed statement (``selectors.run_close``) and the answer built
    from the last look without another trip."""

    namespace: Namespace
    workflow_id: str
    run: selectors.RunClose
    conninfo: str = ""

    def wakeup_key(self) -> str:
        """The run's close notification, not each new event's."""
        return close_wakeup_key(self.run.run_id)

    def waits(self) -> bool:
        return not self.run.closed

    def look(self) -> bool:
        self.run = selectors.run_close(self.namespace, self.workflow_id, str(self.run.run_id))
        return self.run.closed

    def take(self, detail: str) -> None:
        """The close as its notification carried it (``wakeups.close_wakeup_payload``):
        committed before it was sent, so it stands for the read it saves."""
        close = json.loads(detail)
        new_run_id = close["new_run_id"]
        self.run = selectors.RunClose(
            self.run.run_id, close["status"], uuid.UUID(new_run_id) if new_run_id else None, close["event"]
        )

    async def answer(self, trips: Trips) -> Reply:
        return self.reply()

    def reply(self) -> Reply:
        return Reply(200, encode(self.page()))

    def page(self) -> dict[str, Any]:
        """The close page, from the last look."""
        run = self.run
        events = [run.close_event] if run.close_event is not None else []
        return _history_page(events, None, run.status, run.run_id, run.new_run_id)


def _history_read(
    namespace_id: uuid.UUID, workflow_id: str, run_id: str | uuid.UUID | None, params: HistoryParams
) -> selectors.HistoryPage:
    return selectors.history_read(
        namespace_id, workflow_id, run_id, after_event_id=params.after_event_id, page_size=params.page_size
    )


def _history_page(
    events: list[dict[str, Any]], cursor: int | None, status: str, run_id: object, new_run_id: object
) -> dict[str, Any]:
    return {
        "events": events,
        "next_after_event_id": cursor,
        "status": status,
        "run_id": str(run_id),
        "new_run_id": str(new_run_id) if new_run_id else None,
    }


def _read_history(call: Call) -> Reply | tuple[HistoryParams, HistoryRead | CloseRead]:
    """The gate, the query, the run and the first read; for a read that does not wait, its
    answer too, built here: one trip to the pool."""
    _, ns = _gate(call, "GET", "HEAD")
    params = history_params(call.query)
    path_run_id = call.params.get("run_id")
    query_run_id = str(params.run_id) if params.run_id is not None else None
    if path_run_id is not None and query_run_id is not None and query_run_id != path_run_id:
        raise invalid("run_id in the query differs from the run in the path")
    run_id = path_run_id or query_run_id
    workflow_id = call.params["workflow_id"]
    read: HistoryRead | CloseRead
    if params.history_event_filter_type == "CLOSE_EVENT":
        read = CloseRead(ns, workflow_id, selectors.run_close(ns, workflow_id, run_id))
    else:
        read = HistoryRead.first(ns, workflow_id, run_id, params)
    if not params.wait_new_event:
        return read.reply()
    read.conninfo = listen_conninfo()
    return params, read


async def history(call: Call, trips: Trips) -> Reply:
    """Page through a run's history; with ``wait_new_event``, wait for new events (or, for
    ``CLOSE_EVENT``, for the close) up to the caller's timeout capped by the server's."""
    first = await trips.run(_read_history, call)
    if isinstance(first, Reply):
        return first
    params, read = first
    await _wait(read, params.timeout or engine_settings().history_wait_seconds, trips)
    return await read.answer(trips)


async def _wait(
    read: HistoryRead | CloseRead, seconds: float, trips: Trips, *, look_first: bool = True
) -> None:
    """Wait while ``read`` waits, up to ``seconds`` capped by the server's history wait.

    Each round looks again once its wait is registered, so a notification sent while it
    reads is not missed. Without ``look_first`` the first round only waits: for a run whose
    start has just been answered by this process, whose close cannot have been notified
    before the wait began but in a window of one event-loop turn, and even then the safety
    re-check finds it.
    """
    if not read.waits():
        return
    hub.ensure_listening(read.conninfo)
    limit = engine_settings().history_wait_seconds
    deadline = time.monotonic() + float(min(seconds, limit))
    recheck = engine_settings().safety_recheck_seconds
    look = partial(trips.run, read.look)
    ready = look if look_first else None
    while read.waits() and (remaining := deadline - time.monotonic()) > 0:
        await hub.wait(read.wakeup_key(), min(remaining, recheck), ready=ready, detail=read.take)
        ready = look


def _always(handler: Handler) -> Callable[[re.Match[str]], Handler]:
    return lambda match: handler


_RUN_CALLS: dict[str, Handler] = {"signal": one_trip(signal), "history": waiting(history)}
ROUTES = [
    # POST only: the list (GET) of the same URL stays a DRF view.
    # A start may wait for its run's close (``wait_for_close``): given up if its caller goes.
    Route(re.compile(NS + r"workflows\Z"), _always(waiting(start)), methods=frozenset({"POST"})),
    Route(re.compile(NS + r"signal-with-start\Z"), _always(waiting(signal_with_start))),
    Route(re.compile(RUN + r"(?P<call>signal|history)\Z"), lambda match: _RUN_CALLS[match["call"]]),
    *UPDATE_ROUTES,
]
