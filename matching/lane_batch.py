"""Several token calls in one request: a worker's reports sent together.

A busy worker finishes tasks faster than one request at a time can report them. Its
reports made while another is on its way go together in one request,
``POST .../task-queues/{queue}/responses`` with ``{"responses": [{"kind": <endpoint>,
"body": <that endpoint's body>}, ...]}``, and the answer lists, in the same order,
``{"status", "body"}`` as each call on its own would have answered (``retry_after`` with
a 429). Each call is checked, rate-limited and written exactly as on its own
(:func:`matching.lane.respond`): one call's refusal does not touch the others, and the
batch costs one request's parsing, routing and thread trip. Consecutive workflow-task
completions are checked and decoded one by one, then handed to the kernel together
(:func:`history.kernel.respond_workflow_tasks_completed`), which writes those of distinct
runs in one transaction and answers each as it would have been answered alone; every
other call is its own transaction.
"""

from __future__ import annotations

import re
from itertools import groupby
from typing import Annotated, Any

import msgspec
from django.conf import settings

from chronicle.api import parse_json_body
from chronicle.errors import UNKNOWN_FIELD, ChronicleError, ErrorCode, invalid_fields
from chronicle.lane import Call, Reply, encode, require_method
from chronicle.lane_asgi import Route, one_trip
from chronicle.lane_errors import field_errors
from history import kernel
from matching.lane import ENDPOINTS, kernel_call, respond
from namespaces.auth import api_key_from_header

MAX_RESPONSES = 64
_BY_KIND = {endpoint.path: endpoint for endpoint in ENDPOINTS}
_COMPLETE = _BY_KIND["workflow-tasks/complete"]


class Report(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One call of a batch: which token call, and its body as it would be sent alone."""

    kind: str
    body: msgspec.Raw


class ReportBatch(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Token calls of one task queue, answered in order (1 to 64)."""

    responses: Annotated[list[Report], msgspec.Meta(min_length=1, max_length=MAX_RESPONSES)]


class ReportAnswer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What one call of a batch answered: its status and body, as on its own."""

    status: int
    body: msgspec.Raw
    retry_after: float | None = None


class ReportBatchAnswer(msgspec.Struct, kw_only=True):
    responses: list[ReportAnswer]


def answer_batch(call: Call) -> Reply:
    """The key, method and path once; then each call as on its own, its answer or error kept."""
    key = api_key_from_header(call.authorization)
    require_method(call, "POST")
    call.refuse_nul_in_path()
    batch = _decode_batch(call.body)
    namespace, task_queue = call.params["namespace"], call.params["task_queue"]
    answers: list[ReportAnswer] = []
    for completing, run in groupby(batch.responses, key=lambda report: report.kind == _COMPLETE.path):
        reports = list(run)
        if completing and len(reports) > 1:
            answers += _completions(key, namespace, task_queue, reports)
        else:
            answers += [_one(key, namespace, task_queue, report) for report in reports]
    return Reply(200, encode(ReportBatchAnswer(responses=answers)))


_BATCH: msgspec.json.Decoder[ReportBatch] = msgspec.json.Decoder(ReportBatch)


def _decode_batch(raw: bytes) -> ReportBatch:
    """The batch's envelope, its calls' bodies kept as raw JSON: each is vetted and decoded
    by its own endpoint's rules (NUL, nesting, fields) as it would be alone, so one bad
    call is refused alone and cannot fail the others. Only the whole body's size and the
    envelope's shape are checked here."""
    if len(raw) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise ChronicleError(ErrorCode.PAYLOAD_TOO_LARGE, "request body too large")
    try:
        return _BATCH.decode(raw)
    except msgspec.ValidationError as exc:
        envelope = parse_json_body(raw)  # vetted: a NaN elsewhere is malformed, not a 500
        fields = field_errors(ReportBatch, envelope) if isinstance(envelope, dict) else {}
        if UNKNOWN_FIELD in str(fields):  # named as on every route: field by field
            raise invalid_fields(fields) from None
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, f"invalid request: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ChronicleError(ErrorCode.MALFORMED_REQUEST, f"malformed JSON: {exc}") from None


def _one(key: object, namespace: str, task_queue: str, report: Report) -> ReportAnswer:
    endpoint = _BY_KIND.get(report.kind)
    try:
        if endpoint is None:
            known = ", ".join(sorted(_BY_KIND))
            raise ChronicleError(ErrorCode.INVALID_ARGUMENT, f"unknown kind {report.kind!r} (one of {known})")
        body = respond(endpoint, key, namespace, task_queue, bytes(report.body))
    except ChronicleError as error:
        return _refusal(error)
    return ReportAnswer(status=200, body=msgspec.Raw(body))


def _completions(key: object, namespace: str, task_queue: str, reports: list[Report]) -> list[ReportAnswer]:
    """Consecutive workflow-task completions: each through the tenancy gate, the rate and
    its body's checks as on its own, then the kernel's writes for all of them at once."""
    answers: dict[int, ReportAnswer] = {}
    calls: dict[int, dict[str, Any]] = {}
    for i, report in enumerate(reports):
        try:
            calls[i] = kernel_call(_COMPLETE, key, namespace, task_queue, bytes(report.body))
        except ChronicleError as error:
            answers[i] = _refusal(error)
    results = kernel.respond_workflow_tasks_completed(list(calls.values()))
    for i, result in zip(calls, results, strict=True):
        if isinstance(result, ChronicleError):
            answers[i] = _refusal(result)
        else:
            answers[i] = ReportAnswer(status=200, body=msgspec.Raw(_COMPLETE.answer(result)))
    return [answers[i] for i in range(len(reports))]


def _refusal(error: ChronicleError) -> ReportAnswer:
    return ReportAnswer(
        status=error.status, body=msgspec.Raw(encode(error.as_dict())), retry_after=error.retry_after
    )


_HANDLER = one_trip(answer_batch)
ROUTE = Route(
    re.compile(r"/api/v1/namespaces/(?P<namespace>[^/]+)/task-queues/(?P<task_queue>[^/]+)/responses\Z"),
    lambda match: _HANDLER,
)
