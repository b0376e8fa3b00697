"""Temporal's list filter language over ``WorkflowExecution``.

``search(namespace, query)`` reads a filter such as
``WorkflowType = 'Order' AND (CustomerId IN ('a', 'b') OR Amount > 100) ORDER BY StartTime``
with a tokenizer and a recursive-descent parser into a small syntax tree, then compiles
the tree to a Django ``Q`` against the run's columns (system attributes) and its
``search_attributes`` JSONB (custom attributes, typed by the namespace's registry).

Grammar (keywords are case-insensitive, attribute names are not)::

    query     := [or_expr] [GROUP BY name] [ORDER BY name [ASC | DESC]] EOF
    or_expr   := and_expr (OR and_expr)*
    and_expr  := not_expr (AND not_expr)*
    not_expr  := NOT not_expr | '(' or_expr ')' | predicate
    predicate := name cmp value
               | name [NOT] IN '(' value (',' value)* ')'
               | name [NOT] BETWEEN value AND value
               | name [NOT] STARTS_WITH value
               | name IS [NOT] NULL
    cmp       := '=' | '!=' | '<>' | '>' | '>=' | '<' | '<='
    name      := identifier | `backquoted name`
    value     := 'string' | "string" | number | TRUE | FALSE

Every error raises ``VisibilityQueryError`` with the character position it points at.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVector, SearchVectorExact
from django.db.models import (
    Count,
    Expression,
    F,
    Func,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
)
from django.db.models import Value as SqlValue
from django.db.models.expressions import CombinedExpression
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce

from chronicle.errors import ChronicleError, ErrorCode, invalid
from executions import page_tokens
from history.models import ExecutionStatus, PendingActivity, WorkflowExecution
from namespaces.models import IndexedValueType, Namespace
from namespaces.search_attributes import (
    SYSTEM_ATTRIBUTES,
    BadSearchAttributes,
    custom_attributes,
    format_datetime,
    parse_datetime,
)

T = IndexedValueType


class VisibilityQueryError(ChronicleError):
    """A list filter that cannot be read or does not fit the attributes' types."""

    def __init__(self, query: str, position: int, message: str) -> None:
        snippet = f"{query}\n{' ' * position}^"
        super().__init__(
            ErrorCode.INVALID_QUERY,
            f"{message} (at position {position})",
            details={"position": position, "snippet": snippet},
        )
        self.position = position


# ---------------------------------------------------------------- tokenizer

KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "ORDER", "BY", "ASC", "DESC", "STARTS_WITH"}
    | {"TRUE", "FALSE", "LIKE", "GROUP", "LIMIT"}
)
_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op>!=|<>|>=|<=|=|>|<)
  | (?P<punct>[(),])
    """,
    re.VERBOSE,
)
# Temporal's Int attributes are 64-bit; a longer literal cannot match anything, and past
# Python's 4,300 digits it cannot even be read.
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
# Each level of parentheses or NOT is a few frames of the recursive descent and of the
# compiled ``Q``: far below Python's recursion limit, and far above any real filter.
MAX_NESTING = 32


@dataclass(frozen=True)
class Token:
    kind: str  # "keyword", "name", "string", "number", "op", "punct", "end"
    text: str
    position: int
    value: Any = None


def _quoted(query: str, start: int) -> tuple[str, int]:
    """Read a quoted run from ``start`` (its quote); doubled quotes and backslashes escape."""
    quote = query[start]
    out: list[str] = []
    index = start + 1
    while index < len(query):
        char = query[index]
        if char == "\\" and index + 1 < len(query):
            out.append(query[index + 1])
            index += 2
        elif char == quote and query[index + 1 : index + 2] == quote:
            out.append(quote)
            index += 2
        elif char == quote:
            return "".join(out), index + 1
        else:
            out.append(char)
            index += 1
    what = "backquoted name" if quote == "`" else "string"
    raise VisibilityQueryError(query, start, f"unterminated {what}")


def tokenize(query: str) -> list[Token]:
    """Split ``query`` into tokens, each with the position it starts at."""
    tokens: list[Token] = []
    index = 0
    while index < len(query):
        char = query[index]
        if char in "'\"`":
            text, end = _quoted(query, index)
            tokens.append(Token("name" if char == "`" else "string", query[index:end], index, text))
            index = end
            continue
        match = _TOKEN.match(query, index)
        if match is None:
            raise VisibilityQueryError(query, index, f"unexpected character {char!r}")
        kind, text = match.lastgroup or "", match.group()
        if kind == "number":
            tokens.append(Token("number", text, index, _number(query, index, text)))
        elif kind == "word":
            upper = text.upper()
            tokens.append(
                Token("keyword", upper, index) if upper in KEYWORDS else Token("name", text, index, text)
            )
        elif kind != "space":
            tokens.append(Token(kind, text, index))
        index = match.end()
    tokens.append(Token("end", "", len(query)))
    return tokens


def _number(query: str, index: int, text: str) -> int | float:
    """A number literal's value: a finite float, or an integer within 64 bits."""
    if re.search("[.eE]", text):
        value = float(text)
        if math.isfinite(value):
            return value
    elif len(text.lstrip("-")) <= 19 and MIN_INT <= (number := int(text)) <= MAX_INT:
        return number
    raise VisibilityQueryError(query, index, "number out of range (integers are 64-bit, floats finite)")


# ---------------------------------------------------------------- syntax tree


@dataclass(frozen=True)
class Value:
    raw: Any  # str, int, float or bool as written
    position: int


@dataclass(frozen=True)
class Predicate:
    name: str
    position: int  # of the attribute name
    operator: str  # "=", "!=", ">", ">=", "<", "<=", "IN", "BETWEEN", "STARTS_WITH", "IS NULL"
    values: tuple[Value, ...]
    negated: bool = False
    operator_position: int = 0


@dataclass(frozen=True)
class BoolOp:
    operator: str  # "AND" or "OR"
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    operand: Node


Node = Predicate | BoolOp | Not


@dataclass(frozen=True)
class OrderBy:
    name: str
    position: int
    descending: bool


@dataclass(frozen=True)
class GroupBy:
    name: str
    position: int


@dataclass(frozen=True)
class ParsedQuery:
    text: str
    where: Node | None
    order_by: OrderBy | None
    group_by: GroupBy | None = None


class Parser:
    """Recursive descent over the token list, one method per grammar rule."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = tokenize(query)
        self.index = 0
        self.depth = 0  # of the parentheses and NOTs around the current token

    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def error(self, message: str, token: Token | None = None) -> VisibilityQueryError:
        return VisibilityQueryError(self.query, (token or self.token).position, message)

    def advance(self) -> Token:
        token = self.token
        self.index += 1
        return token

    def at(self, kind: str, text: str | None = None) -> bool:
        return self.token.kind == kind and (text is None or self.token.text == text)

    def accept(self, kind: str, text: str | None = None) -> Token | None:
        return self.advance() if self.at(kind, text) else None

    def expect(self, kind: str, text: str, what: str) -> Token:
        if not self.at(kind, text):
            raise self.error(f"expected {what}, found {self.describe()}")
        return self.advance()

    def describe(self) -> str:
        return "the end of the query" if self.token.kind == "end" else repr(self.token.text)

    def parse(self) -> ParsedQuery:
        clauses = ("ORDER", "GROUP")
        where = None if self.at("end") or self.token.text in clauses else self.or_expr()
        group_by = self.group_by() if self.at("keyword", "GROUP") else None
        order_by = self.order_by() if self.at("keyword", "ORDER") else None
        if not self.at("end"):
            raise self.error(f"unexpected {self.describe()}")
        return ParsedQuery(self.query, where, order_by, group_by)

    def group_by(self) -> GroupBy:
        self.expect("keyword", "GROUP", "GROUP")
        self.expect("keyword", "BY", "BY after GROUP")
        name = self.name()
        if name.value != "ExecutionStatus":
            raise self.error("GROUP BY is supported on ExecutionStatus only", name)
        return GroupBy(name.value, name.position)

    def or_expr(self) -> Node:
        operands = [self.and_expr()]
        while self.accept("keyword", "OR"):
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else BoolOp("OR", tuple(operands))

    def and_expr(self) -> Node:
        operands = [self.not_expr()]
        while self.accept("keyword", "AND"):
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else BoolOp("AND", tuple(operands))

    def not_expr(self) -> Node:
        if self.at("keyword", "NOT") or self.at("punct", "("):
            return self.nested()
        return self.predicate()

    def nested(self) -> Node:
        """``NOT x`` or ``( x )``, refused past :data:`MAX_NESTING` levels (a 400, where
        the recursion would otherwise run out of stack)."""
        if self.depth >= MAX_NESTING:
            raise self.error(f"the filter nests deeper than {MAX_NESTING} parentheses or NOTs")
        self.depth += 1
        try:
            if self.accept("keyword", "NOT"):
                return Not(self.not_expr())
            self.expect("punct", "(", "'('")
            inner = self.or_expr()
            self.expect("punct", ")", "')'")
            return inner
        finally:
            self.depth -= 1

    def name(self) -> Token:
        if not self.at("name"):
            raise self.error(f"expected a search attribute name, found {self.describe()}")
        return self.advance()

    def predicate(self) -> Predicate:
        name = self.name()
        operator = self.token
        if self.accept("op"):
            symbol = "!=" if operator.text == "<>" else operator.text
            return Predicate(name.value, name.position, symbol, (self.value(),), False, operator.position)
        if self.accept("keyword", "IS"):
            negated = bool(self.accept("keyword", "NOT"))
            self.expect("keyword", "NULL", "NULL")
            return Predicate(name.value, name.position, "IS NULL", (), negated, operator.position)
        negated = bool(self.accept("keyword", "NOT"))
        if self.accept("keyword", "IN"):
            return Predicate(name.value, name.position, "IN", self.value_list(), negated, operator.position)
        if self.accept("keyword", "BETWEEN"):
            low = self.value()
            self.expect("keyword", "AND", "AND")
            return Predicate(
                name.value, name.position, "BETWEEN", (low, self.value()), negated, operator.position
            )
        if self.accept("keyword", "STARTS_WITH"):
            return Predicate(
                name.value, name.position, "STARTS_WITH", (self.value(),), negated, operator.position
            )
        if self.at("keyword", "LIKE"):
            raise self.error("LIKE is not supported; use STARTS_WITH")
        raise self.error(f"expected an operator after {name.value!r}, found {self.describe()}", operator)

    def value_list(self) -> tuple[Value, ...]:
        self.expect("punct", "(", "'(' after IN")
        values = [self.value()]
        while self.accept("punct", ","):
            values.append(self.value())
        self.expect("punct", ")", "')' or ','")
        return tuple(values)

    def value(self) -> Value:
        token = self.token
        if token.kind in ("string", "number"):
            self.advance()
            return Value(token.value, token.position)
        if token.kind == "keyword" and token.text in ("TRUE", "FALSE"):
            self.advance()
            return Value(token.text == "TRUE", token.position)
        raise self.error(
            f"expected a value (a quoted string, a number, true or false), found {self.describe()}"
        )

    def order_by(self) -> OrderBy:
        self.expect("keyword", "ORDER", "ORDER")
        self.expect("keyword", "BY", "BY after ORDER")
        name = self.name()
        descending = bool(self.accept("keyword", "DESC"))
        if not descending:
            self.accept("keyword", "ASC")
        if self.at("punct", ","):
            raise self.error("ORDER BY takes one attribute")
        return OrderBy(name.value, name.position, descending)


def parse(query: str) -> ParsedQuery:
    return Parser(query).parse()


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


_ALIASES: dict[str, Callable[[], Expression]] = {
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
            if column in _ALIASES:
                self.aliases[column] = _ALIASES[column]()
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
        sort_column = (column,) if not compiled.order.custom and column not in _ALIASES else ()
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
