"""The request bodies of the worker's token calls, as typed structs decoded in one pass.

Each struct is the single description of its body: the lane decodes and validates with
it (:func:`chronicle.lane.decode_body`, with the strict parser's checks), the OpenAPI
schema is generated from it, and when a body does not fit, the field errors are worked
out from it too, in the words the DRF serializers these structs replaced used
(``{"task_token": ["This field is required."]}``), so callers see the same 400s as before.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, ClassVar

import msgspec

from chronicle.lane import UNSET, Seconds
from chronicle.lane import Body as LaneBody
from history.kernel.handoff import WorkflowTaskWanted
from history.kernel.run_ahead import WorkflowTaskAhead
from history.kernel.versioning import MAX_BUILD_ID_LENGTH, WorkerVersionStamp

Token = Annotated[str, msgspec.Meta(min_length=1, max_length=8000, description="the task's token")]
Identity = Annotated[str, msgspec.Meta(min_length=1, max_length=1000, description="the worker's identity")]


class Body(LaneBody, kw_only=True):
    """Base of the worker's bodies: which fields hold any JSON and which text may be blank."""

    json_fields: ClassVar[frozenset[str]] = frozenset(
        {"result", "last_heartbeat_details", "details", "answer"}
    )
    blank_allowed: ClassVar[frozenset[str]] = frozenset({"sticky_task_queue", "error_message"})

    def kernel_args(self) -> dict[str, Any]:
        """The fields as the kernel's keyword arguments."""
        return self.fields()


class WorkerVersion(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A worker's build: Temporal's ``WorkerVersionStamp`` / ``WorkerVersionCapabilities``."""

    blank_allowed: ClassVar[frozenset[str]] = frozenset({"build_id"})
    build_id: Annotated[str, msgspec.Meta(max_length=MAX_BUILD_ID_LENGTH)] = ""
    use_versioning: bool = False

    def __post_init__(self) -> None:
        self.build_id = self.build_id.strip()
        WorkerVersionStamp.from_wire(self.stamp_fields())  # its ValueError is the field's error

    @staticmethod
    def cross_field_error(value: dict[str, Any]) -> str | None:
        """The rule across the fields, in the field errors' words (``chronicle.lane_errors``),
        on the trimmed build id as ``__post_init__`` checks it (a blank build id with
        ``use_versioning`` is the same fault as an empty one)."""
        build_id = value.get("build_id", "")
        try:
            WorkerVersionStamp.from_wire(
                {**value, "build_id": build_id.strip()} if isinstance(build_id, str) else value
            )
        except ValueError as exc:
            return str(exc)
        return None

    def stamp_fields(self) -> dict[str, Any]:
        return {"build_id": self.build_id, "use_versioning": self.use_versioning}

    def stamp(self) -> WorkerVersionStamp | None:
        return WorkerVersionStamp.from_wire(self.stamp_fields())


class TokenBody(Body, kw_only=True):
    task_token: Token
    identity: Identity = ""


class WorkflowTaskCompletedRequest(TokenBody, kw_only=True):
    commands: list[dict[str, Any]] = msgspec.field(default_factory=list)
    sticky_task_queue: Annotated[str, msgspec.Meta(max_length=1000)] = ""
    sticky_schedule_to_start_timeout: Seconds = 0
    return_new_workflow_task: bool = False
    force_create_new_workflow_task: bool = False
    query_results: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    worker_version_stamp: WorkerVersion | None = None
    # Answers to the updates the task carried: Acceptance, Rejection or Response.
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # Answer with the events this completion wrote, for a worker that runs tasks ahead.
    return_recorded_events: bool = False

    def kernel_args(self) -> dict[str, Any]:
        args = super().kernel_args()
        stamp = self.worker_version_stamp
        args["worker_version_stamp"] = stamp.stamp() if stamp else None
        return args


class WorkflowTaskFailedRequest(TokenBody, kw_only=True):
    cause: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    failure: dict[str, Any] = msgspec.field(default_factory=dict)


class ActivityReport(TokenBody, kw_only=True):
    """An activity's outcome, which may carry its worker's offer to run the workflow task
    the outcome schedules (``history.kernel.handoff``): it polls ``sticky_task_queue`` and
    holds a free workflow slot for it."""

    return_new_workflow_task: bool = False
    sticky_task_queue: Annotated[str, msgspec.Meta(max_length=1000)] = ""
    worker_version_stamp: WorkerVersion | None = None

    def kernel_args(self) -> dict[str, Any]:
        args = super().kernel_args()
        offered = args.pop("return_new_workflow_task")
        sticky = args.pop("sticky_task_queue")
        stamp = args.pop("worker_version_stamp")
        args["wanted"] = (
            WorkflowTaskWanted(sticky, self.identity, stamp.stamp() if stamp else None) if offered else None
        )
        return args


class WorkflowTaskAheadBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The workflow task the activity's result schedules, already run by the reporting
    worker (:mod:`history.kernel.run_ahead`): recorded with the result when the run is
    where the worker last saw it, else ignored and the task handed back."""

    expected_event_id: Annotated[int, msgspec.Meta(ge=1, description="the id of the result's first event")]
    started_time: Annotated[datetime, msgspec.Meta(tz=True, description="the task's start as seen")]
    history_size_bytes: Annotated[int, msgspec.Meta(ge=0)] = 0
    commands: list[dict[str, Any]] = msgspec.field(default_factory=list)
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list)
    sticky_schedule_to_start_timeout: Seconds = 0

    def ahead(self) -> WorkflowTaskAhead:
        return WorkflowTaskAhead(
            expected_event_id=self.expected_event_id,
            started_time=self.started_time,
            history_size_bytes=self.history_size_bytes,
            commands=self.commands,
            messages=self.messages,
            sticky_schedule_to_start_timeout=float(self.sticky_schedule_to_start_timeout),
        )


class ActivityTaskCompletedRequest(ActivityReport, kw_only=True):
    result: Any = UNSET
    workflow_task_ahead: WorkflowTaskAheadBody | None = None

    def kernel_args(self) -> dict[str, Any]:
        args = super().kernel_args()
        ahead = args.pop("workflow_task_ahead")
        args["ahead"] = ahead.ahead() if ahead is not None else None
        return args


class ActivityTaskFailedRequest(ActivityReport, kw_only=True):
    failure: dict[str, Any]
    last_heartbeat_details: Any = UNSET


class ActivityTaskCanceledRequest(TokenBody, kw_only=True):
    details: Any = UNSET


class ActivityTaskHeartbeatRequest(Body, kw_only=True):
    task_token: Token
    details: Any = UNSET


class QueryTaskAnswerRequest(Body, kw_only=True):
    task_token: Token
    answer: Any = UNSET
    error_message: Annotated[str, msgspec.Meta(max_length=100_000)] = ""


class ResetStickyTaskQueueRequest(Body, kw_only=True):
    """Temporal's ResetStickyTaskQueue: a run the worker dropped from its cache, whose next
    workflow task should go to the normal queue (with the whole history)."""

    workflow_id: Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
    run_id: uuid.UUID
