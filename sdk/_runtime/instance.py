"""One workflow run in memory: applies history, runs code deterministically, matches commands.

Each command the code issues waits in ``_unmatched`` until the history event it produced arrives
(immediately on replay, on the next activation when live); a mismatch in kind or identity is
nondeterminism and names both sides.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sdk._failure import exception_to_failure, failure_to_exception
from sdk._runtime.children import CHILD_EVENTS, ChildWorkflows, child_event_identity
from sdk._runtime.definition import WorkflowDefinition
from sdk._runtime.loop import DeterministicLoop
from sdk.converter import DataConverter, parameter_hints, return_hint
from sdk.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    NondeterminismError,
    QueryFailed,
)

if TYPE_CHECKING:
    from sdk.workflow import Info

PATCH_MARKER = "core_patch"
LOCAL_ACTIVITY_MARKER = "LocalActivity"
COMMAND_EVENTS = {
    "ScheduleActivityTask": "ActivityTaskScheduled",
    "RequestCancelActivityTask": "ActivityTaskCancelRequested",
    "StartTimer": "TimerStarted",
    "CancelTimer": "TimerCanceled",
    "RecordMarker": "MarkerRecorded",
    "UpsertWorkflowSearchAttributes": "UpsertWorkflowSearchAttributes",
    "CompleteWorkflowExecution": "WorkflowExecutionCompleted",
    "FailWorkflowExecution": "WorkflowExecutionFailed",
    "CancelWorkflowExecution": "WorkflowExecutionCanceled",
    "ContinueAsNewWorkflowExecution": "WorkflowExecutionContinuedAsNew",
    "StartChildWorkflowExecution": "StartChildWorkflowExecutionInitiated",
    "SignalExternalWorkflowExecution": "SignalExternalWorkflowExecutionInitiated",
    "RequestCancelExternalWorkflowExecution": "RequestCancelExternalWorkflowExecutionInitiated",
}
EVENT_COMMANDS = {event: command for command, event in COMMAND_EVENTS.items()}
CLOSE_COMMANDS = {
    "CompleteWorkflowExecution",
    "FailWorkflowExecution",
    "CancelWorkflowExecution",
    "ContinueAsNewWorkflowExecution",
}
NOT_JOBS = {
    "WorkflowTaskScheduled",
    "WorkflowTaskCompleted",
    "WorkflowTaskFailed",
    "WorkflowTaskTimedOut",
    "ActivityTaskStarted",
}
ACTIVITY_RESOLUTIONS = {
    "ActivityTaskCompleted",
    "ActivityTaskFailed",
    "ActivityTaskTimedOut",
    "ActivityTaskCanceled",
}


class WorkflowTaskError(Exception):
    """Workflow code raised a non-failure exception (a bug): fail the task so it is retried."""


class StaleInstanceError(Exception):
    """The new events do not continue this instance (its last task's commands were never recorded):
    discard it and replay the full history in a fresh instance."""


class ContinueAsNewRequest(BaseException):
    """Raised by ``workflow.continue_as_new`` to unwind the run method."""

    def __init__(self, attributes: dict[str, Any]) -> None:
        super().__init__("continue as new")
        self.attributes = attributes


@dataclass
class LocalActivityRequest:
    seq: int
    activity_type: str
    args: list[dict[str, Any]]
    options: dict[str, Any]


@dataclass
class LocalActivityResult:
    result: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    attempt: int = 1


@dataclass
class Activation:
    commands: list[dict[str, Any]]
    local_activities: list[LocalActivityRequest] = field(default_factory=list)
    completed: bool = False


@dataclass
class Command:
    """A command issued by workflow code, waiting for the event that records it."""

    seq: int
    command_type: str
    attributes: dict[str, Any]
    identity: str
    on_recorded: Callable[[int], None] | None = None

    def wire(self) -> dict[str, Any]:
        return {"command_type": self.command_type, "attributes": self.attributes}


@dataclass
class ActivityState:
    seq: int
    activity_type: str
    activity_id: str
    future: asyncio.Future[Any]
    result_hint: Any = None
    scheduled_event_id: int = 0
    command: Command | None = None
    abandoned: bool = False


def _event_identity(event: dict[str, Any]) -> str:
    attrs = event.get("attributes") or {}
    kind = event["event_type"]
    if kind == "ActivityTaskScheduled":
        name = (attrs.get("activity_type") or {}).get("name")
        return f"activity {name!r} (id {attrs.get('activity_id')!r})"
    if kind in ("TimerStarted", "TimerCanceled"):
        return f"timer {attrs.get('timer_id')!r}"
    if kind == "MarkerRecorded":
        return f"marker {attrs.get('marker_name')!r}{_patch_suffix(attrs.get('details'))}"
    if kind == "ActivityTaskCancelRequested":
        return f"cancel of activity scheduled at {attrs.get('scheduled_event_id')}"
    return child_event_identity(kind, attrs) or str(kind)


def _is_cancellation(error: FailureError) -> bool:
    """An activity's or child's cancellation that the workflow let through (Temporal's rule):
    after a cancel request it closes the run as canceled, not failed."""
    return isinstance(error, ActivityError | ChildWorkflowError) and isinstance(error.cause, CancelledError)


def _patch_suffix(details: Any) -> str:
    patch = (details or {}).get("patch_id") if isinstance(details, dict) else None
    return f" patch {patch.get('data')!r}" if isinstance(patch, dict) else ""


class WorkflowInstance(ChildWorkflows):
    """A workflow run: feed it history with ``activate``, send back the commands it returns."""

    def __init__(self, definition: WorkflowDefinition, info: Info, converter: DataConverter) -> None:
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
        self._activities: dict[int, ActivityState] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._timer_ids: dict[int, str] = {}
        self._jobs: list[dict[str, Any]] = []
        self._conditions: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._buffered_signals: dict[str, list[dict[str, Any]]] = {}
        self._patches: dict[str, bool] = {}
        self._replay_markers: set[str] = set()
        self._object: Any = None
        self._main: asyncio.Task[Any] | None = None
        self._closed = False
        self._pending_events: list[dict[str, Any]] = []
        self._local_futures: dict[int, tuple[str, asyncio.Future[Any], Any]] = {}
        self._local_requests: list[LocalActivityRequest] = []
        self._recorded_locals: dict[int, dict[str, Any]] = {}
        self._replayed_locals: set[int] = set()
        # Handed on by the previous run of a cron chain (or a retry): raw payloads / failure.
        self.last_completion_result: list[dict[str, Any]] | None = None
        self.continued_failure: dict[str, Any] | None = None
        self._init_children()
        self.cancel_requested = False

    # -- the seam the worker calls -------------------------------------------------------------

    def activate(self, events: list[dict[str, Any]]) -> Activation:
        """Apply new events, running code at each workflow task they record; see the contract."""
        self._local_requests = []
        if self._unmatched and events and events[0]["event_type"] != "WorkflowTaskCompleted":
            raise StaleInstanceError(
                f"event {events[0].get('event_id')} ({events[0]['event_type']}) does not record "
                "the commands of the previous workflow task"
            )
        history = self._pending_events + list(events)
        self._pending_events = []
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
        activity_type, future, hint = self._local_futures.pop(seq)
        details = {
            "seq": self.converter.to_payload(seq),
            "activity_type": self.converter.to_payload(activity_type),
            "result": result.result,
            "attempt": self.converter.to_payload(result.attempt),
        }
        attributes = {"marker_name": LOCAL_ACTIVITY_MARKER, "details": details, "failure": result.failure}
        self._issue("RecordMarker", attributes, f"marker {LOCAL_ACTIVITY_MARKER!r}")
        self._settle_local(future, activity_type, details, result.failure, hint)
        self._run_code()
        return self._activation()

    def _activation(self) -> Activation:
        commands = [c.wire() for c in self._unmatched]
        completed = any(c.command_type in CLOSE_COMMANDS for c in self._unmatched)
        return Activation(commands, list(self._local_requests), completed)

    def start_local_activity(
        self, activity_type: str, args: list[Any], options: dict[str, Any], hint: Any
    ) -> asyncio.Future[Any]:
        """Replays resolve from the recorded marker; live runs ask the worker to run it."""
        seq = self._next_seq()
        future: asyncio.Future[Any] = self.loop.create_future()
        recorded = self._recorded_locals.pop(seq, None)
        if recorded is not None:
            self._replayed_locals.add(seq)
            details = recorded.get("details") or {}
            self._settle_local(future, activity_type, details, recorded.get("failure"), hint)
            return future
        self._local_futures[seq] = (activity_type, future, hint)
        payloads = self.converter.to_payloads(args)
        self._local_requests.append(LocalActivityRequest(seq, activity_type, payloads, options))
        return future

    def _settle_local(
        self,
        future: asyncio.Future[Any],
        activity_type: str,
        details: dict[str, Any],
        failure: dict[str, Any] | None,
        hint: Any,
    ) -> None:
        if failure is None:
            future.set_result(self.converter.from_payload(details.get("result"), hint))
            return
        error = ActivityError(
            "Local activity failed",
            scheduled_event_id=0,
            started_event_id=0,
            identity="",
            activity_type=activity_type,
            activity_id="",
            retry_state=None,
        )
        error.__cause__ = failure_to_exception(failure, self.converter)
        future.set_exception(error)

    def query(self, query_type: str, args: list[dict[str, Any]]) -> dict[str, Any]:
        handler = self.definition.queries.get(query_type)
        if handler is None:
            known = ", ".join(sorted(self.definition.queries)) or "none"
            raise QueryFailed(f"unknown query type {query_type!r} (known: {known})")
        try:
            values = self.converter.from_payloads(args, parameter_hints(handler, skip_self=True))
            return self.converter.to_payload(handler(self._object, *values))
        except Exception as exc:
            raise QueryFailed(str(exc)) from exc

    # -- replay matching -----------------------------------------------------------------------

    def _match(self, event: dict[str, Any]) -> None:
        expected = EVENT_COMMANDS[event["event_type"]]
        if self._replayed_local(event):
            return
        if not self._unmatched:
            if self._is_patch_marker(event):
                return  # a patch removed from code after deprecation: allowed
            raise NondeterminismError(
                f"history has {event['event_type']} for {_event_identity(event)} at event "
                f"{event.get('event_id')}, but the workflow code issued no command for it"
            )
        command = self._unmatched[0]
        if command.command_type != expected or command.identity != _event_identity(event):
            if self._is_patch_marker(event) and command.command_type != "RecordMarker":
                return
            raise NondeterminismError(
                f"workflow code issued {command.command_type} for {command.identity}, but history "
                f"event {event.get('event_id')} is {event['event_type']} for {_event_identity(event)}"
            )
        self._unmatched.pop(0)
        if command.on_recorded is not None:
            command.on_recorded(int(event["event_id"]))

    def _replayed_local(self, event: dict[str, Any]) -> bool:
        """A local-activity marker already consumed on replay (its command is never reissued)."""
        attrs = event.get("attributes") or {}
        if event["event_type"] != "MarkerRecorded" or attrs.get("marker_name") != LOCAL_ACTIVITY_MARKER:
            return False
        seq = (attrs.get("details") or {}).get("seq", {}).get("data")
        if seq in self._replayed_locals:
            self._replayed_locals.discard(seq)
            return True
        return False

    @staticmethod
    def _is_patch_marker(event: dict[str, Any]) -> bool:
        attrs = event.get("attributes") or {}
        return event["event_type"] == "MarkerRecorded" and attrs.get("marker_name") == PATCH_MARKER

    def _issue(
        self,
        command_type: str,
        attributes: dict[str, Any],
        identity: str,
        on_recorded: Callable[[int], None] | None = None,
    ) -> Command:
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
        for job in jobs:
            self._apply(job)
        self._run_code()

    @staticmethod
    def _markers_ahead(rest: list[dict[str, Any]]) -> set[str]:
        markers: set[str] = set()
        for event in rest:
            if event["event_type"] == "WorkflowTaskStarted":
                break
            details = (event.get("attributes") or {}).get("details")
            if WorkflowInstance._is_patch_marker(event) and isinstance(details, dict):
                markers.add(str((details.get("patch_id") or {}).get("data")))
        return markers

    @staticmethod
    def _local_markers_ahead(rest: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        for event in rest:
            if event["event_type"] == "WorkflowTaskStarted":
                break
            attrs = event.get("attributes") or {}
            if event["event_type"] == "MarkerRecorded" and attrs.get("marker_name") == LOCAL_ACTIVITY_MARKER:
                seq = ((attrs.get("details") or {}).get("seq") or {}).get("data")
                if isinstance(seq, int):
                    found[seq] = attrs
        return found

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
        from sdk import workflow

        run_fn = self.definition.run_fn
        self.last_completion_result = attrs.get("last_completion_result")
        self.continued_failure = attrs.get("continued_failure")
        args = self.converter.from_payloads(attrs.get("input"), parameter_hints(run_fn, skip_self=True))
        with workflow._bound(self):
            self._object = self.definition.cls(*(args if self.definition.init_takes_args else []))
        self._main = self.loop.create_task(self._run_main(args))

    async def _run_main(self, args: list[Any]) -> None:
        try:
            result = await self.definition.run_fn(self._object, *args)
        except ContinueAsNewRequest as request:
            self._close("ContinueAsNewWorkflowExecution", request.attributes)
        except (asyncio.CancelledError, CancelledError):
            self._close("CancelWorkflowExecution", {"details": None})
        except FailureError as exc:
            if self.cancel_requested and _is_cancellation(exc):
                self._close("CancelWorkflowExecution", {"details": None})
            else:
                self._close("FailWorkflowExecution", {"failure": exception_to_failure(exc, self.converter)})
        else:
            encoded = self.converter.to_result(result)
            self._close("CompleteWorkflowExecution", {"result": encoded})

    def _close(self, command_type: str, attributes: dict[str, Any]) -> None:
        self._closed = True
        self._issue(command_type, attributes, COMMAND_EVENTS[command_type])

    def _deliver_signal(self, name: str, payloads: list[dict[str, Any]]) -> None:
        handler = self.definition.signals.get(name)
        if handler is None or self._object is None:
            self._buffered_signals.setdefault(name, []).append({"input": payloads})
            return
        values = self.converter.from_payloads(payloads, parameter_hints(handler, skip_self=True))
        outcome = handler(self._object, *values)
        if asyncio.iscoroutine(outcome):
            self.loop.create_task(outcome)

    def _run_code(self) -> None:
        from sdk import workflow

        if self._object is not None:
            for name in [n for n in self._buffered_signals if n in self.definition.signals]:
                for buffered in self._buffered_signals.pop(name):
                    self._deliver_signal(name, buffered["input"])
        with workflow._bound(self):
            try:
                self.loop.run_until_blocked(self._check_conditions)
            except (FailureError, asyncio.CancelledError, ContinueAsNewRequest):
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

    # -- APIs used by sdk.workflow -------------------------------------------------------------

    async def wait_condition(self, check: Callable[[], bool]) -> None:
        if check():
            return
        future: asyncio.Future[None] = self.loop.create_future()
        self._conditions.append((check, future))
        await future

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

    def schedule_activity(
        self, activity_type: str, args: list[Any], options: dict[str, Any], result_hint: Any
    ) -> ActivityState:
        seq = self._seq + 1
        activity_id = options.pop("activity_id", None) or str(seq)
        state = ActivityState(seq, activity_type, activity_id, self.loop.create_future(), result_hint)

        def recorded(event_id: int) -> None:
            state.scheduled_event_id = event_id

        attributes = {
            "activity_id": activity_id,
            "activity_type": {"name": activity_type},
            "task_queue": {"name": options.pop("task_queue", None) or self.info.task_queue},
            "input": self.converter.to_payloads(args),
            **options,
        }
        identity = f"activity {activity_type!r} (id {activity_id!r})"
        state.command = self._issue("ScheduleActivityTask", attributes, identity, recorded)
        self._activities[seq] = state
        return state

    def cancel_activity(self, state: ActivityState, *, wait: bool, abandon: bool) -> None:
        """Cancel ``state``: withdraw it if unsent, else request cancellation (unless abandoning)."""
        if state.command is not None and self._withdraw(state.command):
            self._activities.pop(state.seq, None)
            return
        if abandon:
            state.abandoned = True
            return
        self._issue(
            "RequestCancelActivityTask",
            {"scheduled_event_id": state.scheduled_event_id},
            f"cancel of activity scheduled at {state.scheduled_event_id}",
        )
        if not wait:
            state.abandoned = True
        state.future = self.loop.create_future()

    def _resolve_activity(self, kind: str, attrs: dict[str, Any]) -> None:
        scheduled = attrs.get("scheduled_event_id")
        state = next((s for s in self._activities.values() if s.scheduled_event_id == scheduled), None)
        if state is None:
            return
        self._activities.pop(state.seq, None)
        if state.abandoned or state.future.done():
            return
        if kind == "ActivityTaskCompleted":
            state.future.set_result(self.converter.from_result(attrs.get("result"), state.result_hint))
            return
        cause = (
            CancelledError("Activity cancelled")
            if kind == "ActivityTaskCanceled"
            else failure_to_exception(attrs.get("failure"), self.converter)
        )
        error = ActivityError(
            "Activity task failed" if kind != "ActivityTaskCanceled" else "Activity cancelled",
            scheduled_event_id=int(scheduled or 0),
            started_event_id=int(attrs.get("started_event_id") or 0),
            identity=str(attrs.get("identity") or ""),
            activity_type=state.activity_type,
            activity_id=state.activity_id,
            retry_state=None,
        )
        error.__cause__ = cause
        state.future.set_exception(error)

    def patched(self, patch_id: str, *, deprecated: bool = False) -> bool:
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

    def upsert_search_attributes(self, attributes: dict[str, Any]) -> None:
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
