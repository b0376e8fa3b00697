"""Update handlers, as a workflow instance runs them: validate, accept, run, respond.

A live workflow task carries the server's update requests (its ``messages``). At the task's
activation, after the history's jobs, each request is looked up (a named handler, else the
dynamic one), its validator run read-only, and the update rejected (a ``Rejection``: the
server writes nothing) or accepted (an ``Acceptance``) and its handler started as a task on
the workflow's loop; when the handler returns, a ``Response`` carries its value, or its
failure when it raised a ``FailureError`` (``ApplicationError``). Any other exception is a
bug: the workflow task fails, as for workflow code, and the update waits, accepted, for fixed
code. The messages go back with the task's completion.

On replay the validator does not run: an update is accepted where history says so. The
``WorkflowExecutionUpdateAccepted`` events right after a task's ``WorkflowTaskCompleted``
start their handlers at that task's activation, after its jobs, in the same order as when
the task ran live, so replay is deterministic. Messages the history already records (an
accepted or completed update) are not sent again; so a worker that replays an accepted
update whose first worker died sends its response, and the update completes.
"""

from __future__ import annotations

import asyncio
import contextvars
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sdk._failure import exception_to_failure
from sdk._runtime.host import IssuesCommands
from sdk._worker_interceptor import HandleUpdateInput, WorkflowInboundInterceptor, headers_from_wire
from sdk.common import RawValue
from sdk.converter import parameter_hints
from sdk.exceptions import ApplicationError, CancelledError, FailureError, NondeterminismError
from sdk.workflow._definition import (
    DYNAMIC,
    UNFINISHED_POLICY_ATTR,
    VALIDATOR_ATTR,
    HandlerUnfinishedPolicy,
    UnfinishedUpdateHandlersWarning,
)
from sdk.workflow._interface import UpdateInfo

if TYPE_CHECKING:
    from sdk.workflow._definition import WorkflowDefinition

Handler = Callable[..., Any]
ACCEPTED = "WorkflowExecutionUpdateAccepted"
COMPLETED = "WorkflowExecutionUpdateCompleted"
_current: contextvars.ContextVar[UpdateInfo | None] = contextvars.ContextVar("update_info", default=None)


class UpdateHandlerError(Exception):
    """An update handler raised something other than a failure (a bug): as for workflow code,
    the workflow task fails and is retried, and the update stays accepted until code is fixed."""


class Updates(IssuesCommands):
    """The part of a workflow instance that validates, accepts and runs updates."""

    if TYPE_CHECKING:
        definition: WorkflowDefinition
        _object: Any
        _read_only: bool
        _inbound: WorkflowInboundInterceptor | None

        def installed(self) -> Any: ...

        def _raw(self, payloads: list[dict[str, Any]]) -> list[RawValue]: ...

    def _init_updates(self) -> None:
        # name (DYNAMIC for the dynamic one) -> (handler, validator)
        self._update_handlers: dict[str, tuple[Handler, Handler | None]] = {}
        self._update_requests: list[dict[str, Any]] = []
        self._update_tasks: dict[asyncio.Task[Any], tuple[str, HandlerUnfinishedPolicy]] = {}
        self._update_messages: list[dict[str, Any]] = []
        self._recorded_accepted: set[str] = set()
        self._recorded_completed: set[str] = set()
        self._update_bug: BaseException | None = None

    def _bind_updates(self, obj: Any) -> None:
        for name, fn in self.definition.updates.items():
            validator = getattr(fn, VALIDATOR_ATTR, None)
            bound_validator = validator.__get__(obj) if validator is not None else None
            self._update_handlers.setdefault(name, (fn.__get__(obj), bound_validator))

    # -- what the worker and the instance call --------------------------------------------------

    def receive_update_requests(self, messages: list[dict[str, Any]]) -> None:
        """The update requests a live workflow task carries, handled at its activation."""
        self._update_requests = [m for m in messages if m.get("type") == "Request"]

    def _note_update_events(self, events: list[dict[str, Any]]) -> None:
        """Which updates history records as accepted and completed: their messages are not resent."""
        for event in events:
            attrs = event.get("attributes") or {}
            if event["event_type"] == ACCEPTED:
                self._recorded_accepted.add(str(attrs.get("protocol_instance_id")))
            elif event["event_type"] == COMPLETED:
                self._recorded_completed.add(str((attrs.get("meta") or {}).get("update_id")))

    def _apply_updates(self, rest: list[dict[str, Any]], *, replaying: bool) -> None:
        """At a task's activation, after its jobs: the updates it accepted (replay) or carries (live)."""
        if replaying:
            for request in _accepted_after(rest):
                self._start_update(request, replaying=True)
            return
        requests, self._update_requests = self._update_requests, []
        for request in requests:
            self._validate_and_accept(request)

    def _take_update_messages(self) -> list[dict[str, Any]]:
        """The messages to send with this activation's completion (none history already has);
        a handler's bug fails the task instead."""
        if self._update_bug is not None:
            bug, self._update_bug = self._update_bug, None
            raise UpdateHandlerError(f"update handler raised {type(bug).__name__}: {bug}") from bug
        messages, self._update_messages = self._update_messages, []
        return [
            m
            for m in messages
            if not (m["type"] == "Acceptance" and m["update_id"] in self._recorded_accepted)
            and not (m["type"] == "Response" and m["update_id"] in self._recorded_completed)
        ]

    # -- validate, accept, run -----------------------------------------------------------------

    def _handler_for(self, name: str) -> tuple[Handler, Handler | None, bool] | None:
        if name in self._update_handlers:
            return (*self._update_handlers[name], False)
        if DYNAMIC in self._update_handlers:
            return (*self._update_handlers[DYNAMIC], True)
        return None

    def _arguments(
        self, handler: Handler, name: str, payloads: list[dict[str, Any]], dynamic: bool
    ) -> list[Any]:
        if dynamic:
            return [name, self._raw(payloads)]
        return list(self.converter.from_payloads(payloads, parameter_hints(handler)))

    def _validate_and_accept(self, request: dict[str, Any]) -> None:
        update_id, name = str(request["update_id"]), str(request["name"])
        if update_id in self._recorded_accepted:
            return
        found = self._handler_for(name)
        try:
            if found is None or self._object is None:
                known = sorted(n for n in self._update_handlers if n != DYNAMIC)
                raise ApplicationError(
                    f"Update handler for '{name}' expected but not found, and there is no dynamic "
                    f"handler. known updates: {known}",
                    type="NotFoundError",
                )
            handler, validator, dynamic = found
            if validator is not None or self._inbound is not None:
                self._run_validator(validator or handler, UpdateInfo(update_id, name), request, dynamic)
        except Exception as exc:
            failure = exception_to_failure(exc, self.converter)
            self._update_messages.append({"type": "Rejection", "update_id": update_id, "failure": failure})
            return
        self._update_messages.append({"type": "Acceptance", "update_id": update_id})
        self._start_update(request, replaying=False)

    def _run_validator(
        self, validator: Handler, info: UpdateInfo, request: dict[str, Any], dynamic: bool
    ) -> None:
        """Read-only, as a query: a command it tries raises and so rejects the update."""
        args = self._arguments(validator, info.name, list(request.get("args") or []), dynamic)
        token = _current.set(info)
        self._read_only = True
        try:
            if self._inbound is not None:  # the validator, if any, is the chain's last link
                self._inbound.handle_update_validator(_input(info, args, request, dynamic))
            else:
                validator(*args)
        finally:
            self._read_only = False
            _current.reset(token)

    def _start_update(self, request: dict[str, Any], *, replaying: bool) -> None:
        update_id, name = str(request["update_id"]), str(request["name"])
        found = self._handler_for(name)
        if found is None:
            if replaying:
                raise NondeterminismError(
                    f"history accepted update {name!r} ({update_id}), which has no handler"
                )
            return
        handler, _, dynamic = found
        args = self._arguments(handler, name, list(request.get("args") or []), dynamic)
        info = UpdateInfo(update_id, name)
        call: Any = handler
        if self._inbound is not None:  # the handler is the chain's last link
            update_input = _input(info, args, request, dynamic)
            inbound = self._inbound
            args = []

            def call() -> Any:
                return inbound.handle_update_handler(update_input)

        task = self.loop.create_task(self._run_update(info, call, args))
        policy = getattr(handler, UNFINISHED_POLICY_ATTR, HandlerUnfinishedPolicy.WARN_AND_ABANDON)
        self._update_tasks[task] = (name, policy)
        task.add_done_callback(lambda done: self._update_tasks.pop(done, None))

    async def _run_update(self, info: UpdateInfo, handler: Handler, args: list[Any]) -> None:
        _current.set(info)  # this task's own context
        try:
            result = handler(*args)
            if asyncio.iscoroutine(result):
                result = await result
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                exc = CancelledError("Update cancelled")
            if not isinstance(exc, (FailureError, *self.definition.failure_exception_types)):
                self._update_bug = exc  # Temporal's rule: not a failure, so a task failure
                return
            failure = exception_to_failure(exc, self.converter)
            self._update_messages.append({"type": "Response", "update_id": info.id, "failure": failure})
        else:
            success = self.converter.to_payload(result)
            self._update_messages.append({"type": "Response", "update_id": info.id, "success": success})

    # -- workflow._Runtime ------------------------------------------------------------------------

    def workflow_set_update_handler(
        self, name: str | None, handler: Handler | None, validator: Handler | None
    ) -> None:
        key = DYNAMIC if name is None else name
        if handler is None:
            self._update_handlers.pop(key, None)
        else:
            self._update_handlers[key] = (handler, validator)

    def workflow_get_update_handler(self, name: str | None) -> Handler | None:
        found = self._update_handlers.get(DYNAMIC if name is None else name)
        return found[0] if found else None

    def workflow_current_update_info(self) -> UpdateInfo | None:
        return _current.get()

    def _update_handlers_finished(self) -> bool:
        return all(task.done() for task in self._update_tasks)

    def _warn_unfinished_update_handlers(self) -> None:
        cut_off = sorted(
            name
            for task, (name, policy) in self._update_tasks.items()
            if not task.done() and policy == HandlerUnfinishedPolicy.WARN_AND_ABANDON
        )
        if cut_off:
            warnings.warn(
                UnfinishedUpdateHandlersWarning(
                    "[TMPRL1102] the workflow completed while update handlers were still running; "
                    f"their callers get a failure: {cut_off}. Wait for them before returning "
                    "(await workflow.wait_condition(workflow.all_handlers_finished)), or declare "
                    "@workflow.update(unfinished_policy=HandlerUnfinishedPolicy.ABANDON) to allow it."
                ),
                stacklevel=1,
            )


def _input(info: UpdateInfo, args: list[Any], request: dict[str, Any], dynamic: bool) -> HandleUpdateInput:
    """The update as interceptors see it: its arguments without the name a dynamic handler takes."""
    values = args[1] if dynamic else args
    return HandleUpdateInput(info.id, info.name, values, headers_from_wire(request.get("header")))


def _accepted_after(rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The update requests a replayed task accepted: its Accepted events, before the next task."""
    requests = []
    for event in rest:
        if event["event_type"] == "WorkflowTaskStarted":
            break
        if event["event_type"] == ACCEPTED:
            accepted = (event.get("attributes") or {}).get("accepted_request") or {}
            meta, given = accepted.get("meta") or {}, accepted.get("input") or {}
            requests.append(
                {
                    "update_id": meta.get("update_id"),
                    "name": given.get("name"),
                    "args": given.get("args"),
                    "header": given.get("header"),
                }
            )
    return requests
