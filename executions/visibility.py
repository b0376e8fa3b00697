"""Temporal's list filter language over ``WorkflowExecution``.

``search(namespace, query)`` reads a filter such as
``WorkflowType = 'Order' AND (CustomerId IN ('a', 'b') OR Amount > 100) ORDER BY StartTime``
with a tokenizer and a recursive-descent parser into a small syntax tree, then compiles
the tree to a Django ``Q`` against the run's columns (system attributes) and its
``search_attributes`` JSONB (custom attributes, typed by the namespace's registry).

The grammar is in :mod:`executions.visibility_parser`.

Every error raises ``VisibilityQueryError`` with the character position it points at.
The language is read in :mod:`executions.visibility_parser` and compiled in
:mod:`executions.visibility_compiler`; this module runs it (search, counts, keyset pages,
failure triage) and is the door callers use.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    Count,
    F,
    Q,
    QuerySet,
)

from chronicle.errors import invalid
from executions import page_tokens
from executions.visibility_compiler import (
    ALLOWED_OPERATORS,
    COMPUTED,
    Attribute,
    CompiledQuery,
    compile_query,
    failure_message_key,
    parse_duration,
    query_datetime,
    root_failure_message,
)
from executions.visibility_parser import (
    MAX_INT,
    MAX_NESTING,
    MIN_INT,
    BoolOp,
    Not,
    ParsedQuery,
    Predicate,
    Value,
    VisibilityQueryError,
    parse,
    tokenize,
)
from history.models import ExecutionStatus, WorkflowExecution
from namespaces.models import IndexedValueType, Namespace
from namespaces.search_attributes import (
    custom_attributes,
)

T = IndexedValueType

# The names callers use (``visibility.parse``, ``visibility.VisibilityQueryError``, ...):
# this module is the filter language's one door, whichever module holds each part.
__all__ = [
    "ALLOWED_OPERATORS",
    "MAX_INT",
    "MAX_NESTING",
    "MAX_PAGE_SIZE",
    "MIN_INT",
    "BoolOp",
    "CompiledQuery",
    "Not",
    "Predicate",
    "Value",
    "VisibilityQueryError",
    "compile_query",
    "count",
    "count_by_status",
    "count_executions",
    "encode_page_token",
    "failure_groups",
    "failure_message_key",
    "page",
    "parse",
    "parse_duration",
    "query_datetime",
    "root_failure_message",
    "search",
    "tokenize",
]


def _base(namespace: Namespace, compiled: CompiledQuery) -> QuerySet[WorkflowExecution]:
    qs = WorkflowExecution.objects.filter(namespace=namespace)
    if compiled.aliases:
        qs = qs.alias(**compiled.aliases)
    return qs.filter(compiled.where)


def search(namespace: Namespace, query: str) -> QuerySet[WorkflowExecution]:
    """The namespace's runs matching ``query``, in its ORDER BY (default StartTime DESC), then RunId."""
    return _ordered(namespace, _listing(query, custom_attributes(namespace)))


def _listing(query: str, custom: dict[str, IndexedValueType]) -> CompiledQuery:
    compiled = compile_query(query, custom)
    if compiled.parsed.group_by is not None:
        position = compiled.parsed.group_by.position
        raise VisibilityQueryError(query, position, "GROUP BY is only allowed in a count query")
    return compiled


def _ordered(namespace: Namespace, compiled: CompiledQuery) -> QuerySet[WorkflowExecution]:
    qs = _base(namespace, compiled)
    key = compiled.order.expression()
    if compiled.descending:
        return qs.order_by(key.desc(nulls_first=True), F("run_id").desc())
    return qs.order_by(key.asc(nulls_last=True), F("run_id").asc())


def count(namespace: Namespace, query: str) -> int:
    """How many runs match ``query``."""
    return _counted(namespace, query)[0].count()


def count_by_status(namespace: Namespace, query: str) -> list[dict[str, Any]]:
    """``[{"group_values": ["Running"], "count": n}, ...]``, the largest groups first."""
    return _status_groups(_counted(namespace, query)[0])


def _status_groups(qs: QuerySet[WorkflowExecution]) -> list[dict[str, Any]]:
    rows = qs.values("status").order_by().annotate(n=Count("*"))
    groups = [{"group_values": [row["status"]], "count": row["n"]} for row in rows]
    return sorted(groups, key=lambda g: (-g["count"], g["group_values"][0]))


def count_executions(namespace: Namespace, query: str, *, group_by: str = "") -> dict[str, Any]:
    """Temporal's CountWorkflowExecutions: ``{"count", "groups"}``; groups by ``group_by`` or
    the query's own ``GROUP BY ExecutionStatus``."""
    qs, parsed = _counted(namespace, query)
    if group_by or parsed.group_by is not None:
        groups = _status_groups(qs)
        return {"count": sum(g["count"] for g in groups), "groups": groups}
    return {"count": qs.count(), "groups": []}


def _counted(namespace: Namespace, query: str) -> tuple[QuerySet[WorkflowExecution], ParsedQuery]:
    compiled = compile_query(query, custom_attributes(namespace))
    if compiled.parsed.order_by is not None:
        position = compiled.parsed.order_by.position
        raise VisibilityQueryError(query, position, "ORDER BY is not allowed in a count query")
    return _base(namespace, compiled), compiled.parsed


# ---------------------------------------------------------------- keyset pages

MAX_PAGE_SIZE = 1000
# A listing never shows payloads; they load on access if a caller wants them.
PAYLOAD_COLUMNS = ("input", "result", "failure", "buffered_events", "retry_policy")


def _sort_value(attribute: Attribute, row: WorkflowExecution) -> Any:
    """The row's sort key as JSON can carry it."""
    if attribute.column == "vis_history_length":
        return row.next_event_id - 1
    if attribute.column == "vis_execution_duration":
        return (row.close_time - row.start_time).total_seconds() if row.close_time else None
    value = row.search_attributes.get(attribute.name) if attribute.custom else getattr(row, attribute.column)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _decode_sort_value(attribute: Attribute, value: Any) -> Any:
    if value is None:
        return None
    if attribute.column == "vis_execution_duration":
        return timedelta(seconds=float(value))
    if not attribute.custom and attribute.type == T.DATETIME:
        return datetime.fromisoformat(value)
    if attribute.column in ("run_id", "parent_run_id"):
        return uuid.UUID(value)
    return value


def _fingerprint(query: str) -> str:
    return hashlib.blake2b(query.encode(), digest_size=6).hexdigest()


PAGE_TOKEN_KIND = "workflows"


def encode_page_token(namespace: Namespace, query: str, attribute: Attribute, row: WorkflowExecution) -> str:
    """The next page's token: the last row's sort key and run id, signed for this namespace
    (see ``executions.page_tokens``) and bound to the query's hash."""
    body = {"q": _fingerprint(query), "v": _sort_value(attribute, row), "r": str(row.run_id)}
    return page_tokens.mint(PAGE_TOKEN_KIND, namespace, body)


def _decode_page_token(
    namespace: Namespace, query: str, attribute: Attribute, token: str
) -> tuple[Any, uuid.UUID]:
    """The position a token of this namespace carries. A token minted in another namespace
    is refused as one nobody minted is: ``malformed``, with nothing about where it came from."""
    body: Any = page_tokens.read(PAGE_TOKEN_KIND, namespace, token)
    try:
        if body["q"] != _fingerprint(query):
            raise invalid("next_page_token belongs to another query")
        return _decode_sort_value(attribute, body["v"]), uuid.UUID(body["r"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise invalid("malformed next_page_token") from None


def _after(attribute: Attribute, descending: bool, value: Any, run_id: uuid.UUID) -> Q:
    """Rows strictly after (value, run_id) in the order ``search`` uses (nulls first when DESC)."""
    older = "lt" if descending else "gt"
    same_run_order = Q(**{f"run_id__{older}": run_id})
    if value is None:
        same_null = attribute.where("isnull", True) & same_run_order
        return same_null | attribute.where("isnull", False) if descending else same_null
    beyond = attribute.where(older, value) | (attribute.where("exact", value) & same_run_order)
    # The redundant bound is what the index can seek to; the OR alone is only a filter, and
    # a deep page would walk every row before it.
    bounded = beyond & attribute.where("lte" if descending else "gte", value)
    return bounded if descending else bounded | attribute.where("isnull", True)


# What a page token needs from a row, whichever attribute the page is sorted by.
_KEYSET_COLUMNS = ("run_id", "start_time", "close_time", "next_event_id", "search_attributes")


def page(
    namespace: Namespace,
    query: str,
    *,
    page_size: int = 100,
    next_page_token: str = "",
    only: tuple[str, ...] = (),
) -> tuple[list[WorkflowExecution], str | None]:
    """One page of ``search`` and the token of the next (``None`` on the last page).

    Keyset pagination: the token holds the last row's sort key and run id, so a deep
    page costs what the first one does. ``only`` names the columns the caller reads, so
    a bulk reader (the CSV export) loads those and the sort key instead of the whole row.
    """
    compiled = _listing(query, custom_attributes(namespace))
    qs = _ordered(namespace, compiled)
    if next_page_token:
        value, run_id = _decode_page_token(namespace, query, compiled.order, next_page_token)
        qs = qs.filter(_after(compiled.order, compiled.descending, value, run_id))
    size = max(1, min(page_size, MAX_PAGE_SIZE))
    if only:
        column = compiled.order.column
        sort_column = (column,) if not compiled.order.custom and column not in COMPUTED else ()
        qs = qs.only(*only, *_KEYSET_COLUMNS, *sort_column)
    else:
        qs = qs.defer(*PAYLOAD_COLUMNS)
    rows = list(qs[: size + 1])
    if len(rows) <= size:
        return rows, None
    return rows[:size], encode_page_token(namespace, query, compiled.order, rows[size - 1])


# ---------------------------------------------------------------- failure triage

TRIAGE_STATUSES = (ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT, ExecutionStatus.TERMINATED)
TRIAGE_GROUPS = 50


def failure_groups(namespace: Namespace, since: datetime) -> dict[str, list[dict[str, Any]]]:
    """Runs that closed Failed, TimedOut or Terminated since ``since``, counted two ways:
    by (status, workflow type) and by (status, ``failure_message_key``), largest first.

    Both read the closed runs in the window through ``exec_ns_close``; only the runs'
    status, type and failure message are touched, never a history.
    """
    closed = WorkflowExecution.objects.filter(
        namespace=namespace, close_time__gte=since, status__in=TRIAGE_STATUSES
    ).order_by()
    by_type = closed.values("status", "workflow_type").annotate(count=Count("*")).order_by("-count", "status")
    by_message = (
        closed.annotate(message=failure_message_key(root_failure_message()))
        .values("status", "message")
        .annotate(count=Count("*"))
        .order_by("-count", "status", "message")
    )
    return {"by_type": list(by_type[:TRIAGE_GROUPS]), "by_message": list(by_message[:TRIAGE_GROUPS])}
