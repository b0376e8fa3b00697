"""Signal and query handlers, as a workflow instance holds them while its run is in memory.

The handlers start as the class's decorated methods, bound to the workflow object, and
workflow code may add, replace or remove them at run time (``workflow.set_signal_handler``
and friends), including the dynamic handler that takes every name no other handler has. A
signal that arrives before any handler can take it is buffered, in arrival order, and
delivered as soon as one can. Async signal handlers run as tasks on the workflow's loop;
``workflow.all_handlers_finished()`` is true once none is still running.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sdk._runtime.host import IssuesCommands
from sdk._worker_interceptor import (
    HandleQueryInput,
    HandleSignalInput,
    WorkflowInboundInterceptor,
    run_to_end,
)
from sdk.common import RawValue
from sdk.converter import parameter_hints, payload_from_wire
from sdk.exceptions import QueryFailed
from sdk.workflow._definition import (
    DYNAMIC,
    UNFINISHED_POLICY_ATTR,
    HandlerUnfinishedPolicy,
    UnfinishedSignalHandlersWarning,
)

if TYPE_CHECKING:
    from sdk.workflow._definition import WorkflowDefinition

Handler = Callable[..., Any]


class Handlers(IssuesCommands):
    """The part of a workflow instance that holds, runs and buffers signal and query handlers."""

    if TYPE_CHECKING:
        definition: WorkflowDefinition
        _object: Any
        _inbound: WorkflowInboundInterceptor | None

        def installed(self) -> Any: ...

    def _init_handlers(self) -> None:
        self._signal_handlers: dict[str, Handler] = {}
        self._query_handlers: dict[str, Handler] = {}
        self._buffered_signals: list[tuple[str, list[dict[str, Any]]]] = []
        # Running async signal handlers: the signal's name and what to do if the run ends first.
        self._handler_tasks: dict[asyncio.Task[Any], tuple[str, HandlerUnfinishedPolicy]] = {}
        self._read_only = False

    def _bind_handlers(self, obj: Any) -> None:
        """The class's handlers, bound to the workflow object once it exists."""
        for name, fn in self.definition.signals.items():
            self._signal_handlers.setdefault(name, fn.__get__(obj))
        for name, fn in self.definition.queries.items():
            self._query_handlers.setdefault(name, fn.__get__(obj))

    def _raw(self, payloads: list[dict[str, Any]]) -> list[RawValue]:
        return [RawValue(payload_from_wire(p)) for p in payloads]

    def _values(self, handler: Handler, payloads: list[dict[str, Any]], dynamic: bool) -> list[Any]:
        """A handler's arguments as interceptors see them (raw values for a dynamic one)."""
        if dynamic:
            return list(self._raw(payloads))
        return list(self.converter.from_payloads(payloads, parameter_hints(handler)))

    def _deliver_signal(self, name: str, payloads: list[dict[str, Any]]) -> None:
        handler = self._signal_handlers.get(name)
        dynamic = handler is None
        handler = handler or self._signal_handlers.get(DYNAMIC)
        if handler is None or self._object is None:
            self._buffered_signals.append((name, payloads))
            return
        if self._inbound is not None:  # interceptors: the handler runs as their chain's last link
            args = (
                self._raw(payloads)
                if dynamic
                else self.converter.from_payloads(payloads, parameter_hints(handler))
            )
            outcome = self._inbound.handle_signal(HandleSignalInput(name, args, {}))
        elif dynamic:
            outcome = handler(name, self._raw(payloads))
        else:
            outcome = handler(*self.converter.from_payloads(payloads, parameter_hints(handler)))
        if asyncio.iscoroutine(outcome):
            task = self.loop.create_task(outcome)
            policy = getattr(handler, UNFINISHED_POLICY_ATTR, HandlerUnfinishedPolicy.WARN_AND_ABANDON)
            self._handler_tasks[task] = (name, policy)
            task.add_done_callback(lambda done: self._handler_tasks.pop(done, None))

    def _deliver_buffered(self) -> None:
        """Deliver buffered signals a handler now takes, in arrival order; the rest stay buffered."""
        if not self._buffered_signals or self._object is None:
            return
        waiting, self._buffered_signals = self._buffered_signals, []
        for name, payloads in waiting:
            self._deliver_signal(name, payloads)

    def query(self, query_type: str, args: list[dict[str, Any]], query_id: str = "") -> dict[str, Any]:
        """Answer a query from the run's current state (read-only: a command raises)."""
        handler = self._query_handlers.get(query_type)
        dynamic = handler is None
        handler = handler or self._query_handlers.get(DYNAMIC)
        if handler is None:
            known = ", ".join(sorted(n for n in self._query_handlers if n != DYNAMIC)) or "none"
            raise QueryFailed(f"unknown query type {query_type!r} (known: {known})")
        self._read_only = True
        try:
            with self.installed():
                if self._inbound is not None:
                    values = (
                        self._raw(args)
                        if dynamic
                        else self.converter.from_payloads(args, parameter_hints(handler))
                    )
                    result = run_to_end(
                        self._inbound.handle_query(HandleQueryInput(query_id, query_type, values, {}))
                    )
                elif dynamic:
                    result = handler(query_type, self._raw(args))
                else:
                    result = handler(*self.converter.from_payloads(args, parameter_hints(handler)))
            return self.converter.to_payload(result)
        except Exception as exc:
            raise QueryFailed(str(exc)) from exc
        finally:
            self._read_only = False

    # -- workflow._Runtime ------------------------------------------------------------------------

    def workflow_set_signal_handler(self, name: str | None, handler: Handler | None) -> None:
        key = DYNAMIC if name is None else name
        if handler is None:
            self._signal_handlers.pop(key, None)
            return
        self._signal_handlers[key] = handler
        self._deliver_buffered()

    def workflow_get_signal_handler(self, name: str | None) -> Handler | None:
        return self._signal_handlers.get(DYNAMIC if name is None else name)

    def workflow_set_query_handler(self, name: str | None, handler: Handler | None) -> None:
        key = DYNAMIC if name is None else name
        if handler is None:
            self._query_handlers.pop(key, None)
        else:
            self._query_handlers[key] = handler

    def workflow_get_query_handler(self, name: str | None) -> Handler | None:
        return self._query_handlers.get(DYNAMIC if name is None else name)

    def workflow_all_handlers_finished(self) -> bool:
        return all(task.done() for task in self._handler_tasks)

    def _warn_unfinished_handlers(self) -> None:
        """As the run completes: name the signal handlers it cuts off, unless told to abandon them."""
        cut_off = sorted(
            name
            for task, (name, policy) in self._handler_tasks.items()
            if not task.done() and policy == HandlerUnfinishedPolicy.WARN_AND_ABANDON
        )
        if cut_off:
            warnings.warn(
                UnfinishedSignalHandlersWarning(
                    "[TMPRL1102] the workflow completed while signal handlers were still running, "
                    f"which cuts their work off: {cut_off}. Wait for them before returning "
                    "(await workflow.wait_condition(workflow.all_handlers_finished)), or declare "
                    "@workflow.signal(unfinished_policy=HandlerUnfinishedPolicy.ABANDON) to allow it."
                ),
                stacklevel=1,
            )

    def workflow_is_read_only(self) -> bool:
        return self._read_only
