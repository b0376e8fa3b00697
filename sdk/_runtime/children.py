"""Child workflows and requests to other workflows, as the workflow instance tracks them.

A child is started by a StartChildWorkflowExecution command matched to its Initiated
event; its Started (or StartChildWorkflowExecutionFailed) and close events resolve the
futures its handle awaits. Signals and cancels sent to other workflows resolve when the
server records their outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdk._failure import failure_to_exception, retry_state_from_wire
from sdk._runtime.commands import Command, child_identity
from sdk._runtime.host import IssuesCommands
from sdk.exceptions import (
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    TerminatedError,
    TimeoutError,
    TimeoutType,
    WorkflowAlreadyStartedError,
)
from sdk.workflow import ChildWorkflowCancellationType, ChildWorkflowHandle

if TYPE_CHECKING:
    pass

CHILD_START_EVENTS = {"ChildWorkflowExecutionStarted", "StartChildWorkflowExecutionFailed"}
CHILD_CLOSE_EVENTS = {
    "ChildWorkflowExecutionCompleted",
    "ChildWorkflowExecutionFailed",
    "ChildWorkflowExecutionCanceled",
    "ChildWorkflowExecutionTerminated",
    "ChildWorkflowExecutionTimedOut",
}
EXTERNAL_OUTCOMES = {
    "ExternalWorkflowExecutionSignaled",
    "SignalExternalWorkflowExecutionFailed",
    "ExternalWorkflowExecutionCancelRequested",
    "RequestCancelExternalWorkflowExecutionFailed",
}
CHILD_EVENTS = CHILD_START_EVENTS | CHILD_CLOSE_EVENTS | EXTERNAL_OUTCOMES


@dataclass
class ChildState:
    seq: int
    workflow_type: str
    workflow_id: str
    started: asyncio.Future[str]
    result: asyncio.Future[Any]
    result_hint: Any = None
    initiated_event_id: int = 0
    started_event_id: int = 0
    run_id: str = ""
    command: Command | None = None
    cancel_wanted: bool = False
    cancel_requested: asyncio.Future[None] | None = None
    abandoned: bool = False


@dataclass
class ExternalRequest:
    """A signal or cancel sent to another workflow, resolved by the outcome event."""

    future: asyncio.Future[None]
    workflow_id: str
    initiated_event_id: int = 0
    on_done: list[Callable[[], None]] = field(default_factory=list)


class _ChildHandle(ChildWorkflowHandle):
    """What ``workflow.start_child_workflow`` returns: a task awaiting the child's close."""

    def __init__(
        self, children: ChildWorkflows, state: ChildState, cancellation_type: ChildWorkflowCancellationType
    ) -> None:
        super().__init__(_await_child(state, cancellation_type), loop=children.loop)
        self._children = children
        self._child = state
        self._cancellation_type = cancellation_type

    def cancel(self, msg: Any = None) -> bool:
        """Ask the server to cancel the child; with WAIT_CANCELLATION_COMPLETED keep awaiting its close."""
        if self.done():
            return False
        self._children.cancel_child(self._child, self._cancellation_type)
        if self._cancellation_type == ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED:
            return True
        return super().cancel(msg)

    @property
    def id(self) -> str:
        return self._child.workflow_id

    @property
    def first_execution_run_id(self) -> str:
        return self._child.run_id


async def _await_child(state: ChildState, cancellation_type: ChildWorkflowCancellationType) -> Any:
    """The handle's body; ``_ChildHandle.cancel`` has already asked for the child's cancel."""
    try:
        return await state.result
    except asyncio.CancelledError:
        if (
            cancellation_type == ChildWorkflowCancellationType.WAIT_CANCELLATION_REQUESTED
            and state.cancel_requested
        ):
            await state.cancel_requested
        raise


class ChildWorkflows(IssuesCommands):
    """The part of a workflow instance that runs children and talks to other workflows."""

    def _init_children(self) -> None:
        self._children: dict[int, ChildState] = {}
        self._external: dict[int, ExternalRequest] = {}

    # -- children ----------------------------------------------------------------------------

    async def workflow_start_child_workflow(
        self,
        workflow_type: str,
        args: list[Any],
        options: dict[str, Any],
        result_hint: Any,
        cancellation_type: ChildWorkflowCancellationType,
    ) -> ChildWorkflowHandle:
        state = self._start_child(workflow_type, args, options, result_hint)
        try:
            await state.started
        except asyncio.CancelledError:
            self.cancel_child(state, cancellation_type)
            raise
        return _ChildHandle(self, state, cancellation_type)

    def _start_child(
        self,
        workflow_type: str,
        args: list[Any],
        options: dict[str, Any],
        result_hint: Any,
    ) -> ChildState:
        seq = self._next_seq()
        workflow_id = str(options.pop("workflow_id"))
        state = ChildState(
            seq, workflow_type, workflow_id, self.loop.create_future(), self.loop.create_future(), result_hint
        )

        def recorded(event_id: int) -> None:
            state.initiated_event_id = event_id

        attributes = {
            "workflow_id": workflow_id,
            "workflow_type": {"name": workflow_type},
            "task_queue": {"name": options.pop("task_queue", None) or self.info.task_queue},
            "input": self.converter.to_payloads(args),
            **options,
        }
        identity = child_identity(workflow_type, workflow_id)
        state.command = self._issue("StartChildWorkflowExecution", attributes, identity, recorded)
        self._children[seq] = state
        return state

    def cancel_child(self, state: ChildState, cancellation_type: ChildWorkflowCancellationType) -> None:
        """Withdraw an unsent start; else ask the server to cancel the child (unless abandoning)."""
        if state.command is not None and self._withdraw(state.command):
            self._children.pop(state.seq, None)
            state.abandoned = True
            return
        if state.result.cancelled():
            state.result = self.loop.create_future()
        if cancellation_type == ChildWorkflowCancellationType.ABANDON:
            state.abandoned = True
            return
        if cancellation_type == ChildWorkflowCancellationType.TRY_CANCEL:
            state.abandoned = True
        if state.cancel_wanted:
            return
        state.cancel_wanted = True
        state.cancel_requested = self.loop.create_future()
        if state.run_id:
            self._request_child_cancel(state)

    def _request_child_cancel(self, state: ChildState) -> None:
        future = self.workflow_request_cancel_external(
            state.workflow_id, state.run_id, child_workflow_only=True
        )
        waiter = state.cancel_requested

        def settle(done: asyncio.Future[None]) -> None:
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        future.add_done_callback(settle)

    def _child_for(self, attrs: dict[str, Any]) -> ChildState | None:
        initiated = attrs.get("initiated_event_id")
        return next((c for c in self._children.values() if c.initiated_event_id == initiated), None)

    def _apply_child_event(self, event: dict[str, Any]) -> None:
        kind = event["event_type"]
        attrs = event.get("attributes") or {}
        if kind in EXTERNAL_OUTCOMES:
            self._resolve_external(kind, attrs)
            return
        state = self._child_for(attrs)
        if state is None:
            return
        if kind == "ChildWorkflowExecutionStarted":
            state.run_id = str((attrs.get("workflow_execution") or {}).get("run_id") or "")
            state.started_event_id = int(event.get("event_id") or 0)
            if not state.started.done():
                state.started.set_result(state.run_id)
            if state.cancel_wanted:
                self._request_child_cancel(state)
            return
        self._children.pop(state.seq, None)
        if kind == "StartChildWorkflowExecutionFailed":
            error = WorkflowAlreadyStartedError(state.workflow_id, state.workflow_type)
            if not state.started.done():
                state.started.set_exception(error)
            return
        if state.abandoned or state.result.done():
            return
        if kind == "ChildWorkflowExecutionCompleted":
            state.result.set_result(self.converter.from_result(attrs.get("result"), state.result_hint))
            return
        state.result.set_exception(self._child_error(state, kind, attrs))

    def _child_error(self, state: ChildState, kind: str, attrs: dict[str, Any]) -> ChildWorkflowError:
        cause: FailureError
        if kind == "ChildWorkflowExecutionFailed":
            cause = failure_to_exception(attrs.get("failure"), self.converter)
        elif kind == "ChildWorkflowExecutionCanceled":
            cause = CancelledError("Child Workflow execution cancelled")
        elif kind == "ChildWorkflowExecutionTerminated":
            cause = TerminatedError("Child Workflow execution terminated")
        else:
            cause = TimeoutError("Child Workflow execution timed out", type=TimeoutType.START_TO_CLOSE)
        error = ChildWorkflowError(
            "Child Workflow execution failed",
            namespace=str(attrs.get("namespace") or self.info.namespace),
            workflow_id=state.workflow_id,
            run_id=state.run_id,
            workflow_type=state.workflow_type,
            initiated_event_id=state.initiated_event_id,
            started_event_id=int(attrs.get("started_event_id") or 0),
            retry_state=retry_state_from_wire(attrs.get("retry_state")),
        )
        error.__cause__ = cause
        return error

    # -- other workflows ---------------------------------------------------------------------

    def workflow_signal_external(
        self,
        workflow_id: str,
        run_id: str | None,
        signal_name: str,
        args: list[Any],
        *,
        child_workflow_only: bool = False,
    ) -> asyncio.Future[None]:
        attributes = {
            "namespace": self.info.namespace,
            "execution": {"workflow_id": workflow_id, "run_id": run_id or ""},
            "signal_name": signal_name,
            "input": self.converter.to_payloads(args),
            "child_workflow_only": child_workflow_only,
        }
        identity = f"signal {signal_name!r} to {workflow_id!r}"
        return self._send_external("SignalExternalWorkflowExecution", attributes, identity, workflow_id)

    def workflow_request_cancel_external(
        self, workflow_id: str, run_id: str | None, *, child_workflow_only: bool = False, reason: str = ""
    ) -> asyncio.Future[None]:
        attributes = {
            "namespace": self.info.namespace,
            "execution": {"workflow_id": workflow_id, "run_id": run_id or ""},
            "child_workflow_only": child_workflow_only,
            "reason": reason,
        }
        identity = f"cancel of {workflow_id!r}"
        return self._send_external(
            "RequestCancelExternalWorkflowExecution", attributes, identity, workflow_id
        )

    def _send_external(
        self, command_type: str, attributes: dict[str, Any], identity: str, workflow_id: str
    ) -> asyncio.Future[None]:
        request = ExternalRequest(self.loop.create_future(), workflow_id)

        def recorded(event_id: int) -> None:
            request.initiated_event_id = event_id
            self._external[event_id] = request

        self._issue(command_type, attributes, identity, recorded)
        return request.future

    def _resolve_external(self, kind: str, attrs: dict[str, Any]) -> None:
        request = self._external.pop(int(attrs.get("initiated_event_id") or 0), None)
        if request is None or request.future.done():
            return
        if kind in ("ExternalWorkflowExecutionSignaled", "ExternalWorkflowExecutionCancelRequested"):
            request.future.set_result(None)
            return
        request.future.set_exception(
            ApplicationError(
                f"Unable to reach external workflow {request.workflow_id!r}: {attrs.get('cause')}",
                type="ExternalWorkflowExecutionNotFound",
                non_retryable=True,
            )
        )
