"""One workflow run in memory: applies history, runs code deterministically, matches commands.

Each command the code issues waits in ``_unmatched`` until the history event it produced arrives
(immediately on replay, on the next activation when live); a mismatch in kind or identity is
nondeterminism and names both sides. Activities (``activities``) and children and other
workflows (``children``) are the instance's parts kept beside it; ``commands`` is the vocabulary
that matching speaks. Workflow code reaches the instance only as ``workflow._Runtime``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import random
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sdk._failure import exception_to_failure, failure_to_exception
from sdk._runtime.activities import ACTIVITY_RESOLUTIONS, Activities
from sdk._runtime.activities import LocalActivityRequest as LocalActivityRequest
from sdk._runtime.activities import LocalActivityResult as LocalActivityResult
from sdk._runtime.children import CHILD_EVENTS, ChildWorkflows
from sdk._runtime.commands import (
    CLOSE_COMMANDS,
    COMMAND_EVENTS,
    EVENT_COMMANDS,
    PATCH_MARKER,
    Command,
    event_identity,
    is_patch_marker,
)
from sdk._runtime.handlers import Handlers
from sdk._runtime.interception import Intercepted, build_chain
from sdk._runtime.loop import DeterministicLoop
from sdk._runtime.updates import Updates
from sdk._worker_interceptor import Interceptor
from sdk.converter import DataConverter, parameter_hints, return_hint
from sdk.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    NondeterminismError,
    ReadOnlyContextError,
)
from sdk.workflow import ContinueAsNewError, Info, _guard, _Runtime
from sdk.workflow._definition import WorkflowDefinition

T = TypeVar("T")

NOT_JOBS = {
    "WorkflowTaskScheduled",
    "WorkflowTaskCompleted",
    "WorkflowTaskFailed",
    "WorkflowTaskTimedOut",
    "ActivityTaskStarted",
    # Update events: handled at their task's activation (``updates``), not as jobs.
    "WorkflowExecutionUpdateAccepted",
    "WorkflowExecutionUpdateCompleted",
}


class WorkflowTaskError(Exception):
    """Workflow code raised a non-failure exception (a bug): fail the task so it is retried."""


class StaleInstanceError(Exception):
    """The new events do not continue this instance (its last task's commands were never recorded):
    discard it and replay the full history in a fresh instance."""


@dataclass
class Activation:
    commands: list[dict[str, Any]]
    local_activities: list[LocalActivityRequest] = field(default_factory=list)
    completed: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)  # answers to update requests


def _is_cancellation(error: FailureError) -> bool:
    """An activity's or child's cancellation that the workflow let through (Temporal's rule):
    after a cancel request it closes the run as canceled, not failed."""
    return isinstance(error, ActivityError | ChildWorkflowError) and isinstance(error.cause, CancelledError)


class WorkflowInstance(Intercepted, Updates, Handlers, ChildWorkflows, Activities, _Runtime):
    """A workflow run: feed it history with ``activate``, send back the commands it returns.

    While its code runs it is the installed ``workflow._Runtime``, the interface through
    which ``sdk.workflow``'s functions reach it.
    """

    def __init__(
        self,
        definition: WorkflowDefinition,
        info: Info,
        converter: DataConverter,
        *,
        determinism_guard: bool = True,
        interceptors: Sequence[Interceptor] = (),
    ) -> None:
        """``interceptors``: the worker's; their workflow interceptor classes wrap this run."""
        self.determinism_guard = determinism_guard
        if determinism_guard:
            _guard.install()
        self.definition = definition
        self.info = info
        self.converter = converter
        self.loop = DeterministicLoop(self)  # type: ignore[abstract]
        self.last_event_id = 0
        self.is_replaying = False
        self.random = random.Random(info.run_id)
        self.current_time = info.start_time
        self._seq = 0
        self._unmatched: list[Command] = []
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._timer_ids: dict[int, str] = {}
        self._jobs: list[dict[str, Any]] = []
        self._conditions: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._patches: dict[str, bool] = {}
        self._replay_markers: set[str] = set()
        self._object: Any = None
        self._main: asyncio.Task[Any] | None = None
        self._closed = False
        self._pending_events: list[dict[str, Any]] = []
        # Handed on by the previous run of a cron chain (or a retry): raw payloads / failure.
        self.last_completion_result: list[dict[str, Any]] | None = None
        self.continued_failure: dict[str, Any] | None = None
        self._init_children()
        self._init_activities()
        self._init_handlers()
        self._init_updates()
        self.cancel_requested = False
        self._start_header: dict[str, Any] | None = None
        if interceptors:
            self._inbound = build_chain(self, interceptors)

    # -- the seam the worker calls -------------------------------------------------------------

    def activate(self, events: list[dict[str, Any]]) -> Activation:
        """Apply new events, running code at each workflow task they record; see the contract."""
        try:
            return self._activate(events)
        except BaseException:
            self._close_unstarted_main()
            raise

    def _close_unstarted_main(self) -> None:
        """Close the run method's coroutine if the failed activation created it but never
        ran it (a signal handler of the first task raised first): the worker drops this
        instance, and the collector would warn of a coroutine never awaited."""
        if self._main is not None and not self._main.done():
            coroutine = self._main.get_coro()
            if inspect.iscoroutine(coroutine) and inspect.getcoroutinestate(coroutine) == "CORO_CREATED":
                coroutine.close()

    def _activate(self, events: list[dict[str, Any]]) -> Activation:
        self._local_requests = []
        if self._unmatched and events and events[0]["event_type"] != "WorkflowTaskCompleted":
            raise StaleInstanceError(
                f"event {events[0].get('event_id')} ({events[0]['event_type']}) does not record "
                "the commands of the previous workflow task"
            )
        history = self._pending_events + list(events)
        self._pending_events = []
        self._note_update_events(history)
        for index, event in enumerate(history):
            self.last_event_id = max(self.last_event_id, int(event.get("event_id") or 0))
            kind = event["event_type"]
            if kind in EVENT_COMMANDS:
                self._match(event)
            elif kind == "WorkflowTaskStarted":
                self._note_history_growth(event)
                following = history[index + 1]["event_type"] if index + 1 < len(history) else None
                if following in ("WorkflowTaskFailed", "WorkflowTaskTimedOut"):
                    continue
                self._start_task(event, history[index + 1 :], replaying=following is not None)
            elif kind not in NOT_JOBS:
                self._jobs.append(event)
        self.is_replaying = False
        return self._activation()

    def _note_history_growth(self, started: dict[str, Any]) -> None:
        """What ``info()`` reports about the history, as of this workflow task."""
        attrs = started.get("attributes") or {}
        self.info = dataclasses.replace(
            self.info,
            history_length=self.last_event_id,
            history_size=int(attrs.get("history_size_bytes") or 0),
            continue_as_new_suggested=bool(attrs.get("suggest_continue_as_new")),
        )

    def resolve_local_activity(self, seq: int, result: LocalActivityResult) -> Activation:
        """Record a local activity's outcome as a marker, wake its caller, and run code again."""
        self._local_requests = []
        self._record_local_outcome(seq, result)
        self._run_code()
        return self._activation()

    def _activation(self) -> Activation:
        commands = [c.wire() for c in self._unmatched]
        completed = any(c.command_type in CLOSE_COMMANDS for c in self._unmatched)
        return Activation(commands, list(self._local_requests), completed, self._take_update_messages())

    # -- replay matching -----------------------------------------------------------------------

    def _match(self, event: dict[str, Any]) -> None:
        expected = EVENT_COMMANDS[event["event_type"]]
        if self._replayed_local(event):
            return
        if not self._unmatched:
            if is_patch_marker(event):
                return  # a patch removed from code after deprecation: allowed
            raise NondeterminismError(
                f"history has {event['event_type']} for {event_identity(event)} at event "
                f"{event.get('event_id')}, but the workflow code issued no command for it"
            )
        command = self._unmatched[0]
        if command.command_type != expected or command.identity != event_identity(event):
            if is_patch_marker(event) and command.command_type != "RecordMarker":
                return
            raise NondeterminismError(
                f"workflow code issued {command.command_type} for {command.identity}, but history "
                f"event {event.get('event_id')} is {event['event_type']} for {event_identity(event)}"
            )
        self._unmatched.pop(0)
        if command.on_recorded is not None:
            command.on_recorded(int(event["event_id"]))

    def _issue(
        self,
        command_type: str,
        attributes: dict[str, Any],
        identity: str,
        on_recorded: Callable[[int], None] | None = None,
    ) -> Command:
        if self._read_only:
            raise ReadOnlyContextError(f"While in read-only function, action attempted: {command_type}")
        command = Command(self._next_seq(), command_type, attributes, identity, on_recorded)
        self._unmatched.append(command)
        return command

    def _withdraw(self, command: Command) -> bool:
        """Drop a command not yet sent to the server; False if it was already sent."""
        # Every command still unmatched while code runs was issued by this task (a task starts
        # only once the previous task's commands are all matched), so none has been sent yet.
        if command in self._unmatched:
            self._unmatched.remove(command)
            return True
        return False

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -- running one workflow task -------------------------------------------------------------

    def _start_task(self, started: dict[str, Any], rest: list[dict[str, Any]], *, replaying: bool) -> None:
        if self._unmatched:
            command = self._unmatched[0]
            raise NondeterminismError(
                f"workflow code issued {command.command_type} for {command.identity}, "
                "but history recorded no such command"
            )
        self.is_replaying = replaying
        self._replay_markers = self._markers_ahead(rest) if replaying else set()
        self._recorded_locals = self._local_markers_ahead(rest) if replaying else {}
        event_time = started.get("event_time")
        if isinstance(event_time, str):
            self.current_time = datetime.fromisoformat(event_time)
        self.loop.set_time(self.current_time.timestamp())
        jobs, self._jobs = self._ordered(self._jobs), []
        with self.installed():  # signal handlers run workflow code
            for job in jobs:
                self._apply(job)
            self._apply_updates(rest, replaying=replaying)
        self._run_code()

    @staticmethod
    def _markers_ahead(rest: list[dict[str, Any]]) -> set[str]:
        markers: set[str] = set()
        for event in rest:
            if event["event_type"] == "WorkflowTaskStarted":
                break
            details = (event.get("attributes") or {}).get("details")
            if is_patch_marker(event) and isinstance(details, dict):
                markers.add(str((details.get("patch_id") or {}).get("data")))
        return markers

    @staticmethod
    def _ordered(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Temporal's job order: start, signals, resolutions, then cancellation requests."""
        rank = {"WorkflowExecutionStarted": 0, "WorkflowExecutionSignaled": 1}
        return sorted(
            jobs,
            key=lambda e: rank.get(
                e["event_type"], 3 if e["event_type"] == "WorkflowExecutionCancelRequested" else 2
            ),
        )

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event["event_type"]
        attrs = event.get("attributes") or {}
        if kind == "WorkflowExecutionStarted":
            self._start_workflow(attrs)
        elif kind == "WorkflowExecutionSignaled":
            self._deliver_signal(str(attrs.get("signal_name")), attrs.get("input") or [])
        elif kind in ACTIVITY_RESOLUTIONS:
            self._resolve_activity(kind, attrs)
        elif kind == "TimerFired":
            handle = self._timers.pop(str(attrs.get("timer_id")), None)
            if handle is not None:
                self.loop.fire_timer(handle)
        elif kind in CHILD_EVENTS:
            self._apply_child_event(event)
        elif kind == "WorkflowExecutionCancelRequested" and self._main is not None:
            self.cancel_requested = True
            # After the run method's first step: a task cancelled before it starts would end
            # without entering the method, so no close command would ever be sent.
            self.loop.call_soon(self._main.cancel)

    def _start_workflow(self, attrs: dict[str, Any]) -> None:
        run_fn = self.definition.run_fn
        self.last_completion_result = attrs.get("last_completion_result")
        self.continued_failure = attrs.get("continued_failure")
        self._start_header = attrs.get("header")
        payloads = attrs.get("input") or []
        if self.definition.dynamic:  # one parameter: the raw arguments
            args: list[Any] = [self._raw(payloads)]
        else:
            args = self.converter.from_payloads(payloads, parameter_hints(run_fn, skip_self=True))
        with self.installed():
            self._object = self.definition.cls(*(args if self.definition.init_takes_args else []))
        self._bind_handlers(self._object)
        self._bind_updates(self._object)
        self._main = self.loop.create_task(self._run_main(args))

    async def _run_main(self, args: list[Any]) -> None:
        try:
            result = await self._execute(self.definition.run_fn, self._object, args, self._start_header)
        except ContinueAsNewError as request:
            self._close("ContinueAsNewWorkflowExecution", request.attributes)
        except (asyncio.CancelledError, CancelledError):
            self._close("CancelWorkflowExecution", {"details": None})
        except FailureError as exc:
            if self.cancel_requested and _is_cancellation(exc):
                self._close("CancelWorkflowExecution", {"details": None})
            else:
                self._close("FailWorkflowExecution", {"failure": exception_to_failure(exc, self.converter)})
        except self.definition.failure_exception_types as exc:
            self._close("FailWorkflowExecution", {"failure": exception_to_failure(exc, self.converter)})
        else:
            if not self.is_replaying:
                self._warn_unfinished_handlers()
                self._warn_unfinished_update_handlers()
            encoded = self.converter.to_result(result)
            self._close("CompleteWorkflowExecution", {"result": encoded})

    def _close(self, command_type: str, attributes: dict[str, Any]) -> None:
        self._closed = True
        self._issue(command_type, attributes, COMMAND_EVENTS[command_type])

    def _run_code(self) -> None:
        with self.installed():
            self._deliver_buffered()
            try:
                self.loop.run_until_blocked(self._check_conditions)
            except (FailureError, asyncio.CancelledError, ContinueAsNewError):
                raise
            except Exception as exc:
                raise WorkflowTaskError(f"workflow code raised {type(exc).__name__}: {exc}") from exc
        if self._main is not None and self._main.done() and not self._main.cancelled():
            error = self._main.exception()
            if error is not None:
                raise WorkflowTaskError(f"workflow code raised {type(error).__name__}: {error}") from error

    def _check_conditions(self) -> bool:
        """Resolve waiters whose condition now holds; True when any was resolved."""
        resolved = False
        for check, future in list(self._conditions):
            if future.done():
                self._conditions.remove((check, future))
            elif check():
                future.set_result(None)
                self._conditions.remove((check, future))
                resolved = True
        return resolved

    # -- durable timers: the deterministic loop's sink ------------------------------------------

    def start_timer(self, handle: asyncio.TimerHandle, delay: float) -> None:
        seq = self._seq + 1
        timer_id = str(seq)
        self._timers[timer_id] = handle
        self._timer_ids[id(handle)] = timer_id
        self._issue(
            "StartTimer",
            {"timer_id": timer_id, "start_to_fire_timeout": delay},
            f"timer {timer_id!r}",
            on_recorded=lambda _event_id: None,
        )

    def cancel_timer(self, handle: asyncio.TimerHandle) -> None:
        timer_id = self._timer_ids.pop(id(handle), None)
        if timer_id is None or self._timers.pop(timer_id, None) is None:
            return
        start = next((c for c in self._unmatched if c.identity == f"timer {timer_id!r}"), None)
        if start is not None and start.command_type == "StartTimer" and self._withdraw(start):
            return
        self._issue("CancelTimer", {"timer_id": timer_id}, f"timer {timer_id!r}")

    # -- workflow._Runtime: what sdk.workflow's functions ask of this run ----------------------

    def workflow_info(self) -> Info:
        return self.info if self._outbound is None else self._outbound.info()

    def workflow_all_handlers_finished(self) -> bool:
        """No signal or update handler still running."""
        return self._update_handlers_finished() and Handlers.workflow_all_handlers_finished(self)

    def workflow_is_replaying(self) -> bool:
        return self.is_replaying

    def workflow_now(self) -> datetime:
        return self.current_time

    def workflow_time(self) -> float:
        return self.loop.time()

    def workflow_random(self) -> random.Random:
        return self.random

    def workflow_data_converter(self) -> DataConverter:
        return self.converter

    def workflow_last_completion_result(self, type_hint: Any) -> Any:
        return self.converter.from_result(self.last_completion_result, type_hint)

    def workflow_has_last_completion_result(self) -> bool:
        return self.last_completion_result is not None

    def workflow_last_failure(self) -> BaseException | None:
        failure = self.continued_failure
        return failure_to_exception(failure, self.converter) if failure else None

    def workflow_create_task(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        return self.loop.create_task(coro)

    async def workflow_wait_condition(self, check: Callable[[], bool]) -> None:
        if check():
            return
        future: asyncio.Future[None] = self.loop.create_future()
        self._conditions.append((check, future))
        await future

    def workflow_patched(self, patch_id: str, *, deprecated: bool = False) -> bool:
        """Memoized per run: new code records a marker; replay follows what history recorded."""
        if patch_id in self._patches:
            return self._patches[patch_id]
        use_new = not self.is_replaying or patch_id in self._replay_markers
        if use_new:
            details = {
                "patch_id": self.converter.to_payload(patch_id),
                "deprecated": self.converter.to_payload(deprecated),
            }
            self._issue(
                "RecordMarker",
                {"marker_name": PATCH_MARKER, "details": details},
                f"marker {PATCH_MARKER!r} patch {patch_id!r}",
            )
        self._patches[patch_id] = use_new or deprecated
        return use_new or deprecated

    def workflow_upsert_search_attributes(self, attributes: dict[str, Any]) -> None:
        # The server merges the same way; a None or empty value removes the attribute.
        merged = {**self.info.search_attributes, **attributes}
        current = {k: v for k, v in merged.items() if v is not None and v != []}
        self.info = dataclasses.replace(self.info, search_attributes=current)
        self._issue(
            "UpsertWorkflowSearchAttributes",
            {"search_attributes": attributes},
            "UpsertWorkflowSearchAttributes",
        )

    @property
    def result_hint(self) -> Any:
        return return_hint(self.definition.run_fn)
