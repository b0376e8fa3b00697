"""The request bodies of the worker's token calls, as typed structs decoded in one pass.

Each struct is the single description of its body: the lane decodes and validates with
it, the OpenAPI schema is generated from it, and when a body does not fit, the field
errors are worked out from it too, in the words the DRF serializers these structs
replaced used (``{"task_token": ["This field is required."]}``), so callers see the
same 400s as before.

The strict checks of :func:`chronicle.api.parse_json_body` hold: a body over the size
limit is refused (413), as are malformed JSON, a NUL anywhere, nesting deeper than
:data:`chronicle.api.MAX_JSON_DEPTH` and a body that is not an object (400). A body can
only hold a NUL as the escape ``\\u0000`` and can only nest that deep with that many
brackets, so the full walk runs only for bodies that show one of those; the others are
decoded straight into their struct.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec
from django.conf import settings

from chronicle.api import MAX_JSON_DEPTH, parse_json_body
from chronicle.errors import ChronicleError, ErrorCode
from history.kernel.handoff import WorkflowTaskWanted
from history.kernel.versioning import MAX_BUILD_ID_LENGTH, WorkerVersionStamp
from matching.lane_errors import BLANK_ALLOWED, JSON_FIELDS, field_errors

Token = Annotated[str, msgspec.Meta(min_length=1, max_length=8000, description="the task's token")]
Identity = Annotated[str, msgspec.Meta(min_length=1, max_length=1000, description="the worker's identity")]
UNSET: Any = msgspec.UNSET


class Body(msgspec.Struct, kw_only=True):
    """Base of every body: strings are trimmed and JSON fields refuse an explicit null,
    as the DRF fields did (``CharField`` trims; ``JSONField`` refuses null)."""

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if isinstance(value, str):
                trimmed = value.strip()
                if trimmed != value:
                    if not trimmed and name not in BLANK_ALLOWED:
                        raise ValueError("This field may not be blank.")
                    setattr(self, name, trimmed)
            elif value is None and name in JSON_FIELDS:
                raise ValueError("This field may not be null.")
            elif value is UNSET:
                setattr(self, name, None)

    def kernel_args(self) -> dict[str, Any]:
        """The fields as the kernel's keyword arguments."""
        return {name: getattr(self, name) for name in self.__struct_fields__}


class WorkerVersion(msgspec.Struct, kw_only=True):
    """A worker's build: Temporal's ``WorkerVersionStamp`` / ``WorkerVersionCapabilities``."""

    build_id: Annotated[str, msgspec.Meta(max_length=MAX_BUILD_ID_LENGTH)] = ""
    use_versioning: bool = False

    def __post_init__(self) -> None:
        self.build_id = self.build_id.strip()
        WorkerVersionStamp.from_wire(self.stamp_fields())  # its ValueError is the field's error

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
    sticky_schedule_to_start_timeout: Annotated[float, msgspec.Meta(ge=0)] = 0
    return_new_workflow_task: bool = False
    force_create_new_workflow_task: bool = False
    query_results: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    worker_version_stamp: WorkerVersion | None = None

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


class ActivityTaskCompletedRequest(ActivityReport, kw_only=True):
    result: Any = UNSET


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


B = TypeVar("B", bound=Body)
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decode_body(raw: bytes, struct: type[B]) -> B:
    """Decode and validate a request body into ``struct``, or raise the 4xx it earns."""
    if len(raw) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise ChronicleError(ErrorCode.PAYLOAD_TOO_LARGE, "request body too large")
    if raw.strip() and not _may_need_the_walk(raw):
        decoder = _DECODERS.get(struct)
        if decoder is None:
            decoder = _DECODERS[struct] = msgspec.json.Decoder(struct, strict=False)
        try:
            return decoder.decode(raw)  # type: ignore[no-any-return]
        except msgspec.DecodeError:
            pass  # malformed or invalid: the checked path below names the fault
    return _decode_checked(raw, struct)


def _may_need_the_walk(raw: bytes) -> bool:
    """Whether ``raw`` could hold a NUL or nest deeper than the limit (false positives are
    fine: they only take the checked path)."""
    return b"\\u0000" in raw or raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH


def _decode_checked(raw: bytes, struct: type[B]) -> B:
    """The checked path: the strict parser's answers first, then the struct's field errors."""
    value = parse_json_body(raw)
    try:
        return msgspec.convert(value, struct, strict=False)
    except msgspec.ValidationError:
        fields = field_errors(struct, value)
        raise ChronicleError(
            ErrorCode.INVALID_ARGUMENT, "invalid request", details={"fields": fields}
        ) from None
