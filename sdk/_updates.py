"""The client's side of Workflow Update: send an update, wait for a stage, await its result;
update-with-start (``sdk.client`` re-exports the public names).

An update is one ``POST .../workflows/{id}/update`` that the server holds until the update
reaches the stage asked for or its wait ends; the answer names the stage reached, and a
caller that wants more polls ``GET .../updates/{update_id}`` (which waits the same way) until
it has it. A handle's ``result()`` polls for COMPLETED: the outcome is the handler's value,
or ``WorkflowUpdateFailedError`` for a rejection or a failed handler. The update id makes
every retry safe: the server applies an id once and answers a repeat with its outcome.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from enum import IntEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sdk._client_interceptor import StartWorkflowUpdateInput
from sdk._failure import failure_to_exception
from sdk.converter import return_hint
from sdk.exceptions import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from sdk.workflow._definition import update_name

if TYPE_CHECKING:
    from sdk._workflow_handle import HandleClient, WorkflowHandle

POLL_WAIT_SECONDS = 30.0
# A missing positional argument (None is a value a workflow or update may be sent).
NO_ARG: Any = object()


class WorkflowUpdateStage(IntEnum):
    """How far an update has come (Temporal's ``WorkflowUpdateStage``)."""

    ADMITTED = 1
    ACCEPTED = 2
    COMPLETED = 3

    @classmethod
    def of(cls, name: str) -> WorkflowUpdateStage:
        return cls[name]


def update_arguments(
    update: str | Callable[..., Any], arg: Any, args: Sequence[Any]
) -> tuple[str, list[Any]]:
    """The update's name and its argument values (``arg`` alone, or ``args``)."""
    if arg is not NO_ARG and args:
        raise ValueError("Cannot provide both arg and args")
    return update_name(update), list(args) if args else ([] if arg is NO_ARG else [arg])


def result_type_of(update: str | Callable[..., Any], result_type: Any) -> Any:
    if result_type is None and not isinstance(update, str):
        return return_hint(update)
    return result_type


class WorkflowUpdateHandle:
    """A handle on one update: its ``id``, its workflow, and ``await result()``."""

    def __init__(
        self,
        client: HandleClient,
        id: str,
        workflow_id: str,
        *,
        workflow_run_id: str | None = None,
        result_type: Any = None,
        known_outcome: dict[str, Any] | None = None,
    ) -> None:
        self._client = client
        self._id = id
        self._workflow_id = workflow_id
        self._workflow_run_id = workflow_run_id
        self._result_type = result_type
        self._known_outcome = known_outcome

    @property
    def id(self) -> str:
        return self._id

    @property
    def workflow_id(self) -> str:
        return self._workflow_id

    @property
    def workflow_run_id(self) -> str | None:
        return self._workflow_run_id

    async def result(self, *, rpc_timeout: timedelta | None = None) -> Any:
        """Wait for the update to complete: its handler's value, or ``WorkflowUpdateFailedError``
        if it was rejected or its handler failed. ``rpc_timeout`` bounds the whole wait
        (``WorkflowUpdateRPCTimeoutOrCancelledError`` when it runs out); by default, no limit."""
        if self._known_outcome is None:
            status = await poll_update(
                self._client,
                self._workflow_id,
                self._workflow_run_id,
                self._id,
                WorkflowUpdateStage.COMPLETED,
                rpc_timeout,
            )
            self._known_outcome = status.get("outcome") or {}
        return self._outcome(self._known_outcome)

    def _outcome(self, outcome: dict[str, Any]) -> Any:
        converter = self._client.data_converter
        if "failure" in outcome:
            raise WorkflowUpdateFailedError(failure_to_exception(outcome["failure"], converter))
        success = outcome.get("success")
        if isinstance(success, list):
            return converter.from_result(success, self._result_type)
        return converter.from_payload(success, self._result_type)


def _workflow_path(workflow_id: str, run_id: str | None) -> str:
    path = f"/workflows/{quote(workflow_id, safe='')}"
    return path + (f"/runs/{run_id}" if run_id else "")


async def poll_update(
    client: HandleClient,
    workflow_id: str,
    run_id: str | None,
    update_id: str,
    stage: WorkflowUpdateStage,
    rpc_timeout: timedelta | None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Poll until the update reaches ``stage`` (each poll a server-held wait)."""
    deadline = time.monotonic() + rpc_timeout.total_seconds() if rpc_timeout is not None else None
    path = f"{_workflow_path(workflow_id, run_id)}/updates/{quote(update_id, safe='')}"
    try:
        while status is None or WorkflowUpdateStage.of(str(status["stage"])) < stage:
            wait = POLL_WAIT_SECONDS
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise WorkflowUpdateRPCTimeoutOrCancelledError()
            params = {"wait_stage": stage.name, "timeout": wait}
            status = await client.transport.get(path, params=params, timeout=wait + 30) or {}
    except asyncio.CancelledError as exc:
        raise WorkflowUpdateRPCTimeoutOrCancelledError() from exc
    return status


async def start_update(
    handle: WorkflowHandle,
    update: str | Callable[..., Any],
    arg: Any = NO_ARG,
    *,
    wait_for_stage: WorkflowUpdateStage,
    args: Sequence[Any] = (),
    id: str | None = None,
    result_type: Any = None,
    rpc_timeout: timedelta | None = None,
    first_execution_run_id: str | None = None,
) -> WorkflowUpdateHandle:
    """Send an update to ``handle``'s workflow, through the client's interceptors, and wait
    until it reaches ``wait_for_stage``."""
    if wait_for_stage == WorkflowUpdateStage.ADMITTED:
        raise ValueError("ADMITTED wait stage not supported")
    name, values = update_arguments(update, arg, args)
    return await handle.client.outbound.start_workflow_update(
        StartWorkflowUpdateInput(
            id=handle.id,
            run_id=handle.run_id,
            first_execution_run_id=first_execution_run_id,
            update_id=id,
            update=name,
            args=values,
            wait_for_stage=wait_for_stage,
            headers={},
            ret_type=result_type_of(update, result_type),
            rpc_timeout=rpc_timeout,
        )
    )


def update_body(
    client: HandleClient,
    name: str,
    values: list[Any],
    id: str | None,
    wait_for_stage: WorkflowUpdateStage,
) -> dict[str, Any]:
    """The update's request as the server takes it (a new update id unless one is given)."""
    if wait_for_stage == WorkflowUpdateStage.ADMITTED:
        raise ValueError("ADMITTED wait stage not supported")
    return {
        "name": name,
        "args": client.data_converter.to_payloads(values),
        "update_id": id or str(uuid.uuid4()),
        "identity": client.identity,
        "wait_stage": wait_for_stage.name,
        "timeout": POLL_WAIT_SECONDS,
    }


async def finish_update(
    client: HandleClient,
    workflow_id: str,
    status: dict[str, Any],
    wait_for_stage: WorkflowUpdateStage,
    result_type: Any,
    rpc_timeout: timedelta | None,
) -> WorkflowUpdateHandle:
    """From the server's first answer: poll on to the stage, and the update's handle."""
    status = await poll_update(
        client,
        workflow_id,
        status.get("run_id"),
        str(status["update_id"]),
        wait_for_stage,
        rpc_timeout,
        status,
    )
    return WorkflowUpdateHandle(
        client,
        str(status["update_id"]),
        workflow_id,
        workflow_run_id=status.get("run_id"),
        result_type=result_type,
        known_outcome=status.get("outcome") if status.get("stage") == "COMPLETED" else None,
    )


class WithStartWorkflowOperation:
    """The start half of update-with-start: what ``start_workflow`` would take, with a required
    ``id_conflict_policy``. After the call, ``await op.workflow_handle()`` gives the run's handle."""

    def __init__(
        self,
        workflow: str | Callable[..., Any],
        arg: Any = NO_ARG,
        *,
        args: Sequence[Any] = (),
        id: str,
        task_queue: str,
        id_conflict_policy: Any,
        result_type: Any = None,
        **start_options: Any,
    ) -> None:
        self.workflow = workflow
        self.arg = arg
        self.args = args
        self.id = id
        self.task_queue = task_queue
        self.id_conflict_policy = id_conflict_policy
        self.result_type = result_type
        self.start_options = start_options
        self._handle: asyncio.Future[WorkflowHandle] | None = None

    def _future(self) -> asyncio.Future[WorkflowHandle]:
        if self._handle is None:
            self._handle = asyncio.get_running_loop().create_future()
        return self._handle

    async def workflow_handle(self) -> WorkflowHandle:
        """The started (or existing) run's handle, once the update-with-start call answered."""
        return await self._future()
