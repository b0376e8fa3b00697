"""Temporal's list filter language, read: a tokenizer and a recursive-descent parser into a
small syntax tree (:mod:`executions.visibility_compiler` turns the tree into SQL).

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

Every error raises ``VisibilityQueryError`` with the character position it points at; a
number past 64 bits (or not finite) and nesting past :data:`MAX_NESTING` are such errors.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from chronicle.errors import ChronicleError, ErrorCode


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
