"""The client's hot requests as typed structs: start, signal-with-start, signal, history.

Each struct is the single description of its request: the lane decodes and validates
with it, the OpenAPI schema is generated from it (under the component names the DRF
serializers had), and a request that does not fit gets its field errors worked out from
it in those serializers' words (:mod:`chronicle.lane_errors`): the same 400s as before.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import parse_qsl

import msgspec

from chronicle.lane import Body, Seconds, convert

Text = Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
OptionalText = Annotated[str, msgspec.Meta(max_length=1000)]
ReusePolicy = Literal[
    "ALLOW_DUPLICATE", "ALLOW_DUPLICATE_FAILED_ONLY", "REJECT_DUPLICATE", "TERMINATE_IF_RUNNING"
]
ConflictPolicy = Literal["", "FAIL", "USE_EXISTING", "TERMINATE_EXISTING"]
CRON_HELP = "classic cron: '* * * * *', '@hourly', '@every 30s', optional CRON_TZ= prefix"


class ClientBody(Body, kw_only=True):
    """Base of the client's bodies: the text fields that may be left empty."""

    blank_allowed: ClassVar[frozenset[str]] = frozenset({"request_id", "cron_schedule", "identity"})


class StartWorkflowRequest(ClientBody, kw_only=True):
    workflow_id: Text
    workflow_type: Text
    task_queue: Text
    input: list[Any] = msgspec.field(default_factory=list)
    request_id: OptionalText = ""
    id_reuse_policy: ReusePolicy = "ALLOW_DUPLICATE"
    id_conflict_policy: ConflictPolicy = ""
    execution_timeout: Seconds = 0.0
    run_timeout: Seconds = 0.0
    task_timeout: Seconds = 10.0
    memo: dict[str, Any] = msgspec.field(default_factory=dict)
    search_attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    retry_policy: dict[str, Any] | None = None
    start_delay: Seconds = 0.0
    cron_schedule: Annotated[str, msgspec.Meta(max_length=1000, description=CRON_HELP)] = ""
    identity: OptionalText = ""
    request_eager_execution: bool = False
    wait_for_close: Annotated[
        Seconds,
        msgspec.Meta(
            description="hold the answer up to this many seconds (capped by the server's history "
            "wait) for the run to close; the answer then carries the close as `close`, sparing "
            "the result wait its own call"
        ),
    ] = 0.0

    def start_fields(self) -> dict[str, Any]:
        """The fields the kernel's start takes (all but the answer's wait)."""
        fields = self.fields()
        fields.pop("wait_for_close", None)
        return fields


class SignalWithStartRequest(StartWorkflowRequest, kw_only=True):
    signal_name: Text
    signal_input: list[Any] = msgspec.field(default_factory=list)


class SignalRequest(ClientBody, kw_only=True):
    signal_name: Text
    input: list[Any] = msgspec.field(default_factory=list)
    request_id: OptionalText = ""
    identity: OptionalText = ""


class HistoryParams(msgspec.Struct, kw_only=True):
    """The history read's query parameters."""

    after_event_id: Annotated[int, msgspec.Meta(ge=0)] = 0
    page_size: Annotated[int, msgspec.Meta(ge=1, le=256)] = 256
    wait_new_event: bool = False
    timeout: Seconds | None = None
    history_event_filter_type: Annotated[
        Literal["ALL_EVENT", "CLOSE_EVENT"],
        msgspec.Meta(description="CLOSE_EVENT: only the run's close event; with wait_new_event, wait for it"),
    ] = "ALL_EVENT"
    run_id: Annotated[uuid.UUID, msgspec.Meta(description="the run (default: latest)")] | None = None


# DRF's BooleanField words for a query string's true and false.
_TRUE = frozenset({"t", "y", "yes", "true", "on", "1"})
_FALSE = frozenset({"f", "n", "no", "false", "off", "0"})


def history_params(query: bytes) -> HistoryParams:
    """The query string as :class:`HistoryParams`, read as DRF read it: the last value of
    a repeated name wins, an empty value means the default, unknown names are ignored."""
    values: dict[str, Any] = {
        name: value
        for name, value in parse_qsl(query.decode(errors="replace"), keep_blank_values=True)
        if value != "" and name in HistoryParams.__struct_fields__
    }
    wait = values.get("wait_new_event")
    if isinstance(wait, str) and wait.lower() in _TRUE | _FALSE:
        values["wait_new_event"] = wait.lower() in _TRUE
    return convert(values, HistoryParams)
