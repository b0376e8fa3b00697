"""Activities and local activities, as the workflow instance tracks them.

An activity is a ScheduleActivityTask command matched to its Scheduled event; its
Completed, Failed, TimedOut or Canceled event resolves the future its task awaits. A local
activity runs in the worker instead, and its outcome is recorded as a marker that replay
reads back instead of running it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sdk._failure import failure_to_exception, retry_state_from_wire
from sdk._runtime.commands import LOCAL_ACTIVITY_MARKER, Command, activity_identity
from sdk._runtime.host import IssuesCommands
from sdk.exceptions import ActivityError, CancelledError
from sdk.workflow import ActivityCancellationType

if TYPE_CHECKING:
    pass

ACTIVITY_RESOLUTIONS = {
    "ActivityTaskCompleted",
    "ActivityTaskFailed",
    "ActivityTaskTimedOut",
    "ActivityTaskCanceled",
}


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
class ActivityState:
    seq: int
    activity_type: str
    activity_id: str
    future: asyncio.Future[Any]
    result_hint: Any = None
    scheduled_event_id: int = 0
    command: Command | None = None
    abandoned: bool = False


class Activities(IssuesCommands):
    """The part of a workflow instance that schedules, cancels and resolves activities."""

    if TYPE_CHECKING:
        _seq: int

    def _init_activities(self) -> None:
        self._activities: dict[int, ActivityState] = {}
        self._local_futures: dict[int, tuple[str, asyncio.Future[Any], Any]] = {}
        self._local_requests: list[LocalActivityRequest] = []
        self._recorded_locals: dict[int, dict[str, Any]] = {}
        self._replayed_locals: set[int] = set()

    # -- activities ----------------------------------------------------------------------------

    def workflow_start_activity(
        self,
        activity_type: str,
        args: list[Any],
        options: dict[str, Any],
        result_hint: Any,
        cancellation_type: ActivityCancellationType,
    ) -> asyncio.Task[Any]:
        state = self._schedule_activity(activity_type, args, options, result_hint)
        return self.loop.create_task(self._await_activity(state, cancellation_type))

    async def _await_activity(self, state: ActivityState, cancellation_type: ActivityCancellationType) -> Any:
        try:
            return await state.future
        except asyncio.CancelledError:
            wait = cancellation_type == ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
            abandon = cancellation_type == ActivityCancellationType.ABANDON
            self._cancel_activity(state, wait=wait, abandon=abandon)
            if wait and not state.future.done() and state.scheduled_event_id:
                # Waiting for the activity's own word: if it caught the cancel and returned a
                # value, that is the outcome (Temporal's rule), not a cancellation of the run.
                with contextlib.suppress(Exception):
                    return await state.future
            raise

    def _schedule_activity(
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
        identity = activity_identity(activity_type, activity_id)
        state.command = self._issue("ScheduleActivityTask", attributes, identity, recorded)
        self._activities[seq] = state
        return state

    def _cancel_activity(self, state: ActivityState, *, wait: bool, abandon: bool) -> None:
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
            retry_state=retry_state_from_wire(attrs.get("retry_state")),
        )
        error.__cause__ = cause
        state.future.set_exception(error)

    # -- local activities ----------------------------------------------------------------------

    def workflow_start_local_activity(
        self, activity_type: str, args: list[Any], options: dict[str, Any], result_hint: Any
    ) -> asyncio.Future[Any]:
        """Replays resolve from the recorded marker; live runs ask the worker to run it."""
        seq = self._next_seq()
        future: asyncio.Future[Any] = self.loop.create_future()
        recorded = self._recorded_locals.pop(seq, None)
        if recorded is not None:
            self._replayed_locals.add(seq)
            details = recorded.get("details") or {}
            self._settle_local(future, activity_type, details, recorded.get("failure"), result_hint)
            return future
        self._local_futures[seq] = (activity_type, future, result_hint)
        payloads = self.converter.to_payloads(args)
        self._local_requests.append(LocalActivityRequest(seq, activity_type, payloads, options))
        return future

    def _record_local_outcome(self, seq: int, result: LocalActivityResult) -> None:
        """Record a local activity's outcome as a marker and wake its caller."""
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
    def _local_markers_ahead(rest: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """The local-activity markers the current task recorded, by seq, to replay from."""
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
