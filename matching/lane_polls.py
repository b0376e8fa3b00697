"""The worker's long-polls for workflow and activity tasks, on the lean lane.

A worker's polls are the other half of its calls. As async Django views each paid for
Django's request handling (the handler, the middleware, URL resolution, request and
response objects): about a millisecond a poll, a tenth of a workflow's frontend CPU. Here
a poll is what it always was, in the same order: the method (405), the body decoded by
its struct :class:`PollRequest` with the same vetting as every lane body
(:func:`chronicle.lane.decode_body`: 413, malformed JSON, NUL, nesting, each field of its
type and length, none unknown), the path (400), the key and the tenancy gate with the worker role and
the rate (401/404/403/429), then the claim (:func:`matching.dispatch.poll_batch`) and, if
nothing is there, a wait on the process's wake-ups with a safety re-check, to the caller's
timeout capped by the server's. The answer is one task, ``{"tasks": [...]}`` when the
body asked for ``max_tasks``, or 204.

A waiting poll holds neither a thread nor a database connection: it waits on the event
loop between its trips to the API's pool. A poll whose worker goes away is given up
(:func:`chronicle.lane_asgi.waiting`), as Django gave up the async view: it stops
waiting, and claims no task for a worker that would never receive it.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import msgspec

from chronicle.conf import engine_settings
from chronicle.db import listen_conninfo
from chronicle.errors import ChronicleError, ErrorCode
from chronicle.lane import UNSET, Body, Call, Reply, Seconds, decode_body, encode, require_method
from chronicle.lane_asgi import Handler, Trips, waiting
from history.kernel.versioning import WorkerVersionStamp, dispatch_build_id
from history.kernel.wakeups import task_wakeup_key
from history.models import TaskKind
from matching.dispatch import MAX_TASKS_PER_POLL, DispatchThrottled, known_unlimited, poll_batch
from matching.lane_bodies import WorkerVersion
from matching.longpoll import Wakeup, hub
from matching.sync_match import HANDOFF_SECONDS, WaitingPoll, waiting_polls
from namespaces.auth import access_namespace, api_key_from_header
from namespaces.models import Namespace

NO_TASK = Reply(204, b"")
# A queue's name as the task rows hold it (the column's width).
MAX_TASK_QUEUE_LENGTH = 1000
# A poll with less time left than this is not offered to starts: the task could miss it.
MIN_MATCH_SECONDS = 1.0
# The poll endpoints, for the OpenAPI schema (:mod:`matching.lane_schema`).
POLL_ENDPOINTS = [
    (
        "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/workflow-tasks/poll",
        "post",
        "Poll workflow task",
    ),
    (
        "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/activity-tasks/poll",
        "post",
        "Poll activity task",
    ),
]


class PollRequest(Body, kw_only=True):
    """The body of a long-poll for a workflow or activity task."""

    # One description: this struct decodes and checks the body, and the schema's
    # ``PollRequest`` is generated from it (:mod:`matching.lane_schema`). A field it lacks,
    # a value not of its type, an identity past its length: each a 400, nothing claimed.
    blank_allowed: ClassVar[frozenset[str]] = frozenset({"identity"})
    identity: Annotated[str, msgspec.Meta(max_length=1000, description="the worker's identity")] = ""
    timeout: Annotated[
        Seconds, msgspec.Meta(description="seconds to wait, capped by the server's poll timeout (0: that)")
    ] = 0.0
    # null is "no build", as for the token calls' worker_version_stamp.
    worker_version_capabilities: Annotated[
        WorkerVersion | None,
        msgspec.Meta(
            description="the worker's build (null: none); with use_versioning it takes only tasks "
            "of runs pinned to it"
        ),
    ] = None
    max_tasks: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=MAX_TASKS_PER_POLL,
                description="take up to this many tasks (the worker's free slots); the answer is then "
                "{tasks: [...]}, the first waited for, the rest those visible at once",
            ),
        ]
        | msgspec.UnsetType
    ) = UNSET


@dataclass(frozen=True)
class Poll:
    """One poll as its body asked for it."""

    kind: str
    task_queue: str
    identity: str
    worker_version: WorkerVersionStamp | None
    max_tasks: int
    batch: bool
    timeout: float

    @classmethod
    def read(cls, call: Call, kind: str) -> Poll:
        body = decode_body(call.body, PollRequest)
        if len(call.params["task_queue"]) > MAX_TASK_QUEUE_LENGTH:
            message = f"the task queue's name is longer than {MAX_TASK_QUEUE_LENGTH} characters"
            raise ChronicleError(ErrorCode.INVALID_ARGUMENT, message)
        limit = engine_settings().poll_timeout_seconds
        version = body.worker_version_capabilities
        asked = body.max_tasks  # absent: UNSET, None once decoded
        return cls(
            kind=kind,
            task_queue=call.params["task_queue"],
            identity=body.identity,
            worker_version=version.stamp() if version is not None else None,
            max_tasks=asked if isinstance(asked, int) else 1,
            batch=isinstance(asked, int),
            timeout=min(body.timeout or limit, limit),
        )

    def claim(self, namespace: Namespace) -> list[dict[str, Any]]:
        """Take what is there for this poll (nothing while the queue's dispatch is throttled,
        which ``DispatchThrottled`` says, with how long to wait)."""
        queue, version = self.task_queue, self.worker_version
        return poll_batch(namespace, queue, self.kind, self.identity, version, max_tasks=self.max_tasks)

    def answer(self, tasks: list[dict[str, Any]]) -> Reply:
        if not tasks:
            return NO_TASK
        return Reply(200, encode({"tasks": tasks} if self.batch else tasks[0]))


def _admit(call: Call) -> tuple[Namespace, str]:
    """The key, the tenancy gate with the worker role and the rate; and the LISTEN conninfo."""
    key = api_key_from_header(call.authorization)
    return access_namespace(key, call.params["namespace"], "worker"), listen_conninfo()


async def poll(call: Call, trips: Trips, kind: str) -> Reply:
    """Answer a poll with what its queue has, waiting for it up to the poll's timeout."""
    require_method(call, "POST")
    call.refuse_nul_in_path()
    wanted = Poll.read(call, kind)
    namespace, conninfo = await trips.run(_admit, call)
    hub.ensure_listening(conninfo)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wanted.timeout
    recheck = engine_settings().safety_recheck_seconds
    build_id = dispatch_build_id(wanted.worker_version)
    wake_key = task_wakeup_key(namespace.id, kind, wanted.task_queue, build_id)
    while True:
        # Subscribed before the claim: a task added while it runs wakes this poll.
        woken = hub.subscribe(wake_key)
        try:
            try:
                tasks = await trips.run(wanted.claim, namespace)
            except DispatchThrottled as throttled:
                await asyncio.sleep(min(throttled.wait, max(0.0, deadline - loop.time())))
                tasks = []
            remaining = deadline - loop.time()
            if not tasks and remaining > 0:
                offer = _offer(wanted, namespace, wake_key, build_id, remaining)
                matched = await _wait_for_task(woken, offer, wake_key, min(recheck, remaining))
                tasks = [matched] if matched is not None else []
            if tasks or deadline - loop.time() <= 0:
                if woken.is_set():
                    # The wake-up was for a task this poll did not take: pass it on.
                    hub.wake(wake_key, 1)
                return wanted.answer(tasks)
        finally:
            hub.unsubscribe(wake_key, woken)


def _offer(
    wanted: Poll, namespace: Namespace, key: str, build_id: str, remaining: float
) -> WaitingPoll | None:
    """Offer this waiting poll to starts in this process (:mod:`matching.sync_match`), when
    it may take a task that way: a workflow-task poll, unversioned, of a queue without a
    dispatch limit, with time left to receive it."""
    if (
        wanted.kind != TaskKind.WORKFLOW
        or build_id
        or remaining < MIN_MATCH_SECONDS
        or not known_unlimited(namespace, wanted.task_queue)
    ):
        return None
    return waiting_polls.register(key, wanted.identity)


async def _wait_for_task(
    woken: Wakeup, offer: WaitingPoll | None, key: str, timeout: float
) -> dict[str, Any] | None:
    """Wait for a wake-up (then the caller claims) or, if offered, a task a start handed
    over; the task, or None."""
    if offer is None:
        with suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), timeout)
        return None
    waiter: asyncio.Future[Any] = asyncio.ensure_future(woken.wait())
    either: set[asyncio.Future[Any]] = {waiter, offer.delivered}
    try:
        await asyncio.wait(either, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        withdrawn = waiting_polls.withdraw(key, offer)
    if withdrawn:
        return None
    with suppress(TimeoutError):  # taken: the start's task is on its way once it commits
        return await asyncio.wait_for(offer.delivered, HANDOFF_SECONDS)
    return None


async def poll_workflow_task(call: Call, trips: Trips) -> Reply:
    return await poll(call, trips, TaskKind.WORKFLOW)


async def poll_activity_task(call: Call, trips: Trips) -> Reply:
    return await poll(call, trips, TaskKind.ACTIVITY)


HANDLERS: dict[str, Handler] = {
    "workflow-tasks/poll": waiting(poll_workflow_task),
    "activity-tasks/poll": waiting(poll_activity_task),
}
