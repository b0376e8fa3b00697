"""Workflow Update on the lean lane: send an update, poll for its outcome, update-with-start.

``POST workflows/{id}[/runs/{run}]/update`` admits an update (or finds the one with its
``update_id``) and holds the answer until the update reaches the stage the caller waits
for (``wait_stage``: ADMITTED, ACCEPTED or COMPLETED) or the server's wait ends, whichever
comes first; the answer names the stage reached, so a caller that got less polls
``GET workflows/{id}[/runs/{run}]/updates/{update_id}`` (the same wait) until it has it.
``POST update-with-start`` starts the workflow (or uses the running one, as its
``id_conflict_policy`` says) and sends the update in one call.

The wait is the history long-poll's: on the event loop in the process's LISTEN hub, on the
update's key, with a look (one trip to the pool) each time it is woken or the safety interval
passes. Updates go through the same gate as signals (the client role and the namespace's
request rate) and count toward the run's signal limit (:mod:`history.kernel.updates`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import parse_qsl

import msgspec

from chronicle.conf import engine_settings
from chronicle.db import listen_conninfo
from chronicle.errors import invalid
from chronicle.lane import Call, Reply, Seconds, convert, decode_body, encode, require_method
from chronicle.lane_asgi import Handler, Route, Trips, waiting
from executions.lane_bodies import ClientBody, OptionalText, StartWorkflowRequest, Text
from history import kernel
from history.kernel.updates import status_of, wakeup_key
from matching.longpoll import hub
from namespaces.auth import access_namespace, api_key_from_header
from namespaces.models import Namespace

NS = r"/api/v1/namespaces/(?P<namespace>[^/]+)/"
RUN = NS + r"workflows/(?P<workflow_id>[^/]+)(?:/runs/(?P<run_id>[^/]+))?/"
Stage = Annotated[
    Literal["ADMITTED", "ACCEPTED", "COMPLETED"],
    msgspec.Meta(description="the stage the answer waits for (Temporal's WorkflowUpdateStage)"),
]
WAIT_HELP = "seconds to hold the answer for the stage, capped by the server's history wait"


class UpdateFields(ClientBody, kw_only=True):
    """An update's request: Temporal's ``meta{update_id, identity}`` and ``input{name, args, header}``."""

    blank_allowed: ClassVar[frozenset[str]] = frozenset({"update_id", "identity", "first_execution_run_id"})
    name: Text
    args: list[Any] = msgspec.field(default_factory=list)
    update_id: Annotated[str, msgspec.Meta(max_length=1000, description="default: a new UUID")] = ""
    header: dict[str, Any] = msgspec.field(default_factory=dict)
    identity: OptionalText = ""
    wait_stage: Stage = "COMPLETED"
    timeout: Annotated[Seconds, msgspec.Meta(description=WAIT_HELP)] | None = None

    def request(self) -> kernel.UpdateRequest:
        return kernel.UpdateRequest(self.update_id, self.name, self.args, self.header, self.identity)


class UpdateWorkflowRequest(UpdateFields, kw_only=True):
    first_execution_run_id: Annotated[
        str, msgspec.Meta(max_length=100, description="refuse unless the run belongs to this chain")
    ] = ""


class UpdateWithStartRequest(ClientBody, kw_only=True):
    start: StartWorkflowRequest
    update: UpdateFields


class UpdatePollParams(msgspec.Struct, kw_only=True):
    wait_stage: Stage = "COMPLETED"
    timeout: Annotated[Seconds, msgspec.Meta(description=WAIT_HELP)] | None = None


class UpdateOutcome(msgspec.Struct, kw_only=True):
    """Where an update stands: its stage and, once COMPLETED, ``{"success": payload}`` or
    ``{"failure": {...}}`` (a rejection is completed with its failure)."""

    update_id: str
    workflow_id: str
    run_id: str
    stage: Literal["ADMITTED", "ACCEPTED", "COMPLETED"]
    outcome: dict[str, Any] | None = None


class UpdateWithStartOutcome(msgspec.Struct, kw_only=True):
    run_id: str
    started: bool
    update: UpdateOutcome


def _gate(call: Call, *methods: str) -> Namespace:
    """The client calls' checks, in their order: key, method, path, namespace, role and rate."""
    key = api_key_from_header(call.authorization)
    require_method(call, *methods)
    call.refuse_nul_in_path()
    return access_namespace(key, call.params["namespace"], "client")


@dataclass
class UpdateWait:
    """One caller's wait for an update to reach ``stage``: each look one read of the update."""

    namespace: Namespace
    workflow_id: str
    status: kernel.UpdateStatus
    stage: str
    conninfo: str = ""

    def waits(self) -> bool:
        return not self.status.reached(self.stage)

    def wakeup_key(self) -> str:
        return wakeup_key(self.status.row_id)

    def look(self) -> bool:
        update, run = kernel.find_update(
            self.namespace, self.workflow_id, self.status.run_id, self.status.update_id
        )
        self.status = status_of(update, run)
        return not self.waits()

    async def wait(self, seconds: float | None, trips: Trips) -> None:
        """Wait while the update has not reached the stage, up to ``seconds`` capped by the
        server's wait; each round looks once subscribed, so no notification is missed."""
        if not self.waits():
            return
        hub.ensure_listening(self.conninfo)
        limit = engine_settings().history_wait_seconds
        deadline = time.monotonic() + float(min(seconds if seconds is not None else limit, limit))
        recheck = engine_settings().safety_recheck_seconds
        look = partial(trips.run, self.look)
        while self.waits() and (remaining := deadline - time.monotonic()) > 0:
            await hub.wait(self.wakeup_key(), min(remaining, recheck), ready=look)


def _admit(call: Call) -> tuple[UpdateWait, float | None]:
    ns = _gate(call, "POST")
    body = decode_body(call.body, UpdateWorkflowRequest)
    status = kernel.update_workflow_execution(
        ns,
        workflow_id=call.params["workflow_id"],
        run_id=call.params.get("run_id"),
        request=body.request(),
        first_execution_run_id=body.first_execution_run_id,
    )
    return UpdateWait(
        ns, call.params["workflow_id"], status, body.wait_stage, listen_conninfo()
    ), body.timeout


async def update(call: Call, trips: Trips) -> Reply:
    wait, seconds = await trips.run(_admit, call)
    await wait.wait(seconds, trips)
    return Reply(200, encode(wait.status.as_dict()))


def _find(call: Call) -> tuple[UpdateWait, float | None]:
    ns = _gate(call, "GET")
    values = {k: v for k, v in parse_qsl(call.query.decode(errors="replace")) if v != ""}
    params = convert(
        {k: v for k, v in values.items() if k in UpdatePollParams.__struct_fields__}, UpdatePollParams
    )
    workflow_id = call.params["workflow_id"]
    found, run = kernel.find_update(ns, workflow_id, call.params.get("run_id"), call.params["update_id"])
    wait = UpdateWait(ns, workflow_id, status_of(found, run), params.wait_stage, listen_conninfo())
    return wait, params.timeout


async def poll_update(call: Call, trips: Trips) -> Reply:
    wait, seconds = await trips.run(_find, call)
    await wait.wait(seconds, trips)
    return Reply(200, encode(wait.status.as_dict()))


def _start_and_admit(call: Call) -> tuple[UpdateWait, float | None, dict[str, Any]]:
    ns = _gate(call, "POST")
    body = decode_body(call.body, UpdateWithStartRequest)
    start = body.start
    if not start.id_conflict_policy:
        message = "update-with-start needs an id_conflict_policy (USE_EXISTING, FAIL or TERMINATE_EXISTING)"
        raise invalid(message)
    if start.request_eager_execution or start.wait_for_close:
        raise invalid("update-with-start takes neither request_eager_execution nor wait_for_close")
    result = kernel.start_workflow_execution(ns, kernel.StartRequest(**start.start_fields()))
    status = kernel.update_workflow_execution(
        ns, workflow_id=start.workflow_id, run_id=str(result.run_id), request=body.update.request()
    )
    wait = UpdateWait(ns, start.workflow_id, status, body.update.wait_stage, listen_conninfo())
    return wait, body.update.timeout, {"run_id": str(result.run_id), "started": result.started}


async def update_with_start(call: Call, trips: Trips) -> Reply:
    wait, seconds, answer = await trips.run(_start_and_admit, call)
    await wait.wait(seconds, trips)
    return Reply(200, encode({**answer, "update": wait.status.as_dict()}))


def _always(handler: Handler) -> Callable[[re.Match[str]], Handler]:
    return lambda match: handler


ROUTES = [
    Route(re.compile(RUN + r"update\Z"), _always(waiting(update))),
    Route(re.compile(RUN + r"updates/(?P<update_id>[^/]+)\Z"), _always(waiting(poll_update))),
    Route(re.compile(NS + r"update-with-start\Z"), _always(waiting(update_with_start))),
]
