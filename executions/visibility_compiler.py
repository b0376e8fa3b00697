"""Temporal's list filter, compiled: a parsed query (:mod:`executions.visibility_parser`)
becomes a Django ``Q`` against the run's columns (system attributes) and its
``search_attributes`` JSONB (custom attributes, typed by the namespace's registry).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVector, SearchVectorExact
from django.db.models import (
    Expression,
    F,
    Func,
    IntegerField,
    Max,
    OuterRef,
    Q,
    Subquery,
    TextField,
)
from django.db.models import Value as SqlValue
from django.db.models.expressions import CombinedExpression
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce

from executions.visibility_parser import (
    BoolOp,
    Node,
    Not,
    ParsedQuery,
    Predicate,
    Value,
    VisibilityQueryError,
    parse,
)
from history.models import ExecutionStatus, PendingActivity
from namespaces.models import IndexedValueType
from namespaces.search_attributes import (
    SYSTEM_ATTRIBUTES,
    BadSearchAttributes,
    format_datetime,
    parse_datetime,
)

T = IndexedValueType

# ---------------------------------------------------------------- compiling to SQL

_COMPARISONS = ("=", "!=", ">", ">=", "<", "<=")
ALLOWED_OPERATORS: dict[IndexedValueType, frozenset[str]] = {
    T.KEYWORD: frozenset({*_COMPARISONS, "IN", "BETWEEN", "STARTS_WITH", "IS NULL"}),
    T.KEYWORD_LIST: frozenset({"=", "!=", "IN", "IS NULL"}),
    T.TEXT: frozenset({"=", "!=", "IS NULL"}),
    T.INT: frozenset({*_COMPARISONS, "IN", "BETWEEN", "IS NULL"}),
    T.DOUBLE: frozenset({*_COMPARISONS, "IN", "BETWEEN", "IS NULL"}),
    T.DATETIME: frozenset({*_COMPARISONS, "IN", "BETWEEN", "IS NULL"}),
    T.BOOL: frozenset({"=", "!=", "IS NULL"}),
}
_LOOKUP = {"=": "exact", ">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}

# System attributes: the column (or expression) each reads.
_COLUMNS: dict[str, str] = {
    "WorkflowId": "workflow_id",
    "RunId": "run_id",
    "WorkflowType": "workflow_type",
    "ExecutionStatus": "status",
    "TaskQueue": "task_queue",
    "ParentWorkflowId": "parent_workflow_id",
    "ParentRunId": "parent_run_id",
    "StartTime": "start_time",
    "ExecutionTime": "execution_time",
    "CloseTime": "close_time",
    "HistoryLength": "vis_history_length",
    "HistorySizeBytes": "history_size_bytes",
    "ExecutionDuration": "vis_execution_duration",
    "WorkflowTaskAttempt": "wft_attempt",
    "PendingActivityAttempt": "vis_activity_attempt",
    "FailureMessage": "vis_failure_message",
}
# Ids (uuids first, then any run of digits) masked so that failures of one cause group together.
_UUID_PATTERN = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_NUMBER_PATTERN = "[0-9]+([.][0-9]+)?"


def failure_message_key(message: Expression) -> Expression:
    """A failure message's first line with ids and numbers masked: the key similar failures share.

    One SQL expression serves both the ``FailureMessage`` attribute (applied to the run's
    message and to the value a query compares it with) and the triage page's grouping.
    """
    first_line = Func(message, SqlValue("\n"), SqlValue(1), function="split_part", output_field=TextField())
    no_ids = Func(
        first_line, SqlValue(_UUID_PATTERN), SqlValue("<id>"), SqlValue("g"), function="regexp_replace"
    )
    masked = Func(
        no_ids, SqlValue(_NUMBER_PATTERN), SqlValue("<n>"), SqlValue("g"), function="regexp_replace"
    )
    return Func(masked, function="btrim", output_field=TextField())


ROOT_CAUSE_DEPTH = 8


def root_failure_message() -> Expression:
    """The message of the run's innermost failure cause (at most ``ROOT_CAUSE_DEPTH`` deep).

    A failure arrives wrapped: an SDK fails the run with "Activity task failed" around
    the activity's own error, a child's failure around its cause. The wrapper is the same
    for every activity failure, so ``FailureMessage`` and the triage groups read the
    deepest message, the one that tells one cause from another.
    """
    paths = ["failure__" + "cause__" * depth + "message" for depth in range(ROOT_CAUSE_DEPTH, -1, -1)]
    return Coalesce(*(KT(path) for path in paths), output_field=TextField())


def _highest_activity_attempt() -> Any:
    """The highest attempt among the run's pending activities (NULL when it has none)."""
    attempts = (
        PendingActivity.objects.filter(run_id=OuterRef("run_id"))
        .order_by()
        .values("run_id")
        .annotate(highest=Max("attempt"))
        .values("highest")
    )
    return Subquery(attempts, output_field=IntegerField())


COMPUTED: dict[str, Callable[[], Expression]] = {
    "vis_history_length": lambda: CombinedExpression(F("next_event_id"), "-", SqlValue(1)),
    "vis_execution_duration": lambda: CombinedExpression(F("close_time"), "-", F("start_time")),
    "vis_activity_attempt": _highest_activity_attempt,
    "vis_failure_message": lambda: failure_message_key(root_failure_message()),
}
# Computed per query; a listing cannot be ordered (or keyset-paged) by them.
_UNSORTABLE_COLUMNS = frozenset({"vis_activity_attempt", "vis_failure_message"})
_GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns))+$")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class Attribute:
    """An attribute as a query sees it: its name, type and the column or alias it reads.

    A custom attribute reads an alias of ``search_attributes -> 'Name'`` (``vis_sa0``, ...),
    so its name is never parsed as an ORM lookup path (``a__b``, ``contains``).
    """

    name: str
    type: IndexedValueType
    column: str
    custom: bool = False

    def expression(self) -> Any:
        return F(self.column)

    def where(self, lookup: str, value: Any) -> Q:
        if self.column == "vis_failure_message" and lookup == "in":
            return _any_of([self.where("exact", v) for v in value])
        if self.column == "vis_failure_message" and lookup != "isnull":
            value = failure_message_key(SqlValue(value))
        if self.custom and lookup == "isnull":  # ``?``, which the GIN index serves
            present = Q(search_attributes__has_key=self.name)
            return ~present if value else present
        return Q(**{f"{self.column}__{lookup}": value})


class Compiler:
    """Turn a parsed query into a ``Q`` for one namespace's attribute types."""

    def __init__(self, parsed: ParsedQuery, custom: dict[str, IndexedValueType]) -> None:
        self.parsed = parsed
        self.custom = custom
        self.aliases: dict[str, Expression] = {}
        self.custom_aliases: dict[str, str] = {}

    def error(self, position: int, message: str) -> VisibilityQueryError:
        return VisibilityQueryError(self.parsed.text, position, message)

    def attribute(self, name: str, position: int) -> Attribute:
        if name in SYSTEM_ATTRIBUTES:
            column = _COLUMNS[name]
            if column in COMPUTED:
                self.aliases[column] = COMPUTED[column]()
            return Attribute(name, SYSTEM_ATTRIBUTES[name], column)
        if name in self.custom:
            alias = self.custom_aliases.setdefault(name, f"vis_sa{len(self.custom_aliases)}")
            self.aliases[alias] = KeyTransform(name, "search_attributes")
            return Attribute(name, self.custom[name], alias, custom=True)
        raise self.error(position, f"unknown search attribute {name!r}")

    def where(self) -> Q:
        return self.node(self.parsed.where) if self.parsed.where is not None else Q()

    def node(self, node: Node) -> Q:
        if isinstance(node, Not):
            return ~self.node(node.operand)
        if isinstance(node, BoolOp):
            combined = self.node(node.operands[0])
            for operand in node.operands[1:]:
                other = self.node(operand)
                combined = combined & other if node.operator == "AND" else combined | other
            return combined
        return self.predicate(node)

    def predicate(self, p: Predicate) -> Q:
        attribute = self.attribute(p.name, p.position)
        if p.operator not in ALLOWED_OPERATORS[attribute.type]:
            raise self.error(
                p.operator_position, f"{p.operator} is not supported on {attribute.type} attribute {p.name!r}"
            )
        values = [self.value(attribute, v) for v in p.values]
        q = self.condition(attribute, p.operator, values)
        if not p.negated:
            return q
        if p.operator == "IS NULL":
            return ~q
        # As in SQL, a run without the attribute matches neither ``X`` nor ``NOT X``.
        return ~q & self.present(attribute)

    def condition(self, attribute: Attribute, operator: str, values: list[Any]) -> Q:
        if operator == "IS NULL":
            return attribute.where("isnull", True)
        if operator == "!=":
            return ~self.condition(attribute, "=", values) & self.present(attribute)
        if attribute.type == T.KEYWORD_LIST:
            return _any_of([Q(search_attributes__contains={attribute.name: [v]}) for v in values])
        if attribute.type == T.TEXT:
            vector = SearchVector(KeyTextTransform(attribute.name, "search_attributes"), config="simple")
            return Q(SearchVectorExact(vector, SearchQuery(values[0], config="simple")))
        if operator == "IN":
            return attribute.where("in", values)
        if operator == "BETWEEN":
            return attribute.where("gte", values[0]) & attribute.where("lte", values[1])
        if operator == "STARTS_WITH":
            return attribute.where("startswith", values[0])
        return attribute.where(_LOOKUP[operator], values[0])

    def present(self, attribute: Attribute) -> Q:
        """``!=`` matches runs that have the attribute (SQL's three-valued logic, made explicit)."""
        return attribute.where("isnull", False)

    def value(self, attribute: Attribute, value: Value) -> Any:
        try:
            return self.typed(attribute, value.raw)
        except (BadSearchAttributes, ValueError, OverflowError) as exc:
            # OverflowError: a moment or duration past what a datetime can hold.
            raise self.error(value.position, f"{attribute.name!r} is {attribute.type}: {exc}") from None

    def typed(self, attribute: Attribute, raw: Any) -> Any:
        kind, name = attribute.type, attribute.name
        if name == "ExecutionStatus":
            if raw not in ExecutionStatus.values:
                raise ValueError(f"{raw!r} is not one of {', '.join(ExecutionStatus.values)}")
            return raw
        if name in ("RunId", "ParentRunId"):
            return uuid.UUID(str(raw))
        if name == "ExecutionDuration":
            return parse_duration(raw)
        if kind in (T.KEYWORD, T.KEYWORD_LIST, T.TEXT):
            if not isinstance(raw, str):
                raise ValueError(f"{raw!r} is not a quoted string")
            return raw
        if kind == T.INT:
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise ValueError(f"{raw!r} is not an integer")
            return raw
        if kind == T.DOUBLE:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise ValueError(f"{raw!r} is not a number")
            return float(raw)
        if kind == T.BOOL:
            if isinstance(raw, str) and raw.lower() in ("true", "false"):
                return raw.lower() == "true"
            if not isinstance(raw, bool):
                raise ValueError(f"{raw!r} is not true or false")
            return raw
        moment = query_datetime(raw)
        return format_datetime(moment) if attribute.custom else moment

    def order(self) -> tuple[Attribute, bool]:
        """The sort attribute and direction; StartTime DESC unless the query says otherwise."""
        order = self.parsed.order_by
        if order is None:
            return self.attribute("StartTime", 0), True
        attribute = self.attribute(order.name, order.position)
        if attribute.column in _UNSORTABLE_COLUMNS:
            raise self.error(order.position, f"cannot ORDER BY computed attribute {order.name!r}")
        if attribute.type in (T.TEXT, T.KEYWORD_LIST):
            raise self.error(order.position, f"cannot ORDER BY {attribute.type} attribute {order.name!r}")
        return attribute, order.descending


def _any_of(conditions: list[Q]) -> Q:
    combined = conditions[0]
    for condition in conditions[1:]:
        combined |= condition
    return combined


def query_datetime(raw: Any) -> datetime:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a datetime")
    if isinstance(raw, int):
        return datetime.fromtimestamp(raw / 1e9, tz=UTC)
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not an RFC 3339 string or nanoseconds")
    return parse_datetime(raw)


def parse_duration(raw: Any) -> timedelta:
    """Nanoseconds, a Go-style duration (``1h30m``, ``250ms``) or ``HH:MM:SS``."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return timedelta(microseconds=raw / 1000)
    if isinstance(raw, str):
        text = raw.strip()
        if _GO_DURATION.match(text):
            seconds = sum(
                float(n) * _GO_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)", text)
            )
            return timedelta(seconds=seconds)
        parts = text.split(":")
        if len(parts) == 3 and all(p.replace(".", "", 1).isdigit() for p in parts):
            hours, minutes, seconds = (float(p) for p in parts)
            return timedelta(hours=hours, minutes=minutes, seconds=seconds)
    raise ValueError(f"{raw!r} is not a duration (nanoseconds, '1h30m' or 'HH:MM:SS')")


# ---------------------------------------------------------------- public API


@dataclass(frozen=True)
class CompiledQuery:
    where: Q
    order: Attribute
    descending: bool
    aliases: dict[str, Expression]
    parsed: ParsedQuery


def compile_query(query: str, custom: dict[str, IndexedValueType]) -> CompiledQuery:
    """Parse and type-check ``query`` against ``custom`` attribute types (no database access)."""
    parsed = parse(query)
    compiler = Compiler(parsed, custom)
    where = compiler.where()
    order, descending = compiler.order()
    return CompiledQuery(where, order, descending, compiler.aliases, parsed)
