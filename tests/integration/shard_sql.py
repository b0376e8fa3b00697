"""Reading captured SQL for the shard rule: which per-execution tables a statement touches,
whether each touch is confined to shards, and which shards it names.

A distributed PostgreSQL (Citus) routes a statement to one node only when it names the
distribution column's value for every distributed table it reads or writes; a statement
that does not is sent to every node (and a ``FOR UPDATE`` one is refused). Chronicle's
per-execution tables carry ``shard_id`` for that column, so the rule a test can check on
the SQL text is: each reference to such a table is either an ``INSERT`` whose column list
has ``shard_id`` or sits in a query block whose conditions compare that table's
``shard_id`` (``= %s``, ``IN (...)``, ``= ANY(%s)``, or equal to another shard column).

The reader is deliberately small, and strict where it is unsure: a table reference's
block is the innermost parenthesised group around it, without the nested groups that are
queries of their own (those are blocks of their own), so a filter in a subquery does not
vouch for the query around it.
"""

from __future__ import annotations

import contextlib
import json
import re
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from django.apps import apps
from django.db import connection, models

from history.models import WorkflowExecution

SHARD_COLUMN = "shard_id"
_KEYWORDS = frozenset(
    [
        "where",
        "set",
        "on",
        "join",
        "inner",
        "left",
        "right",
        "full",
        "cross",
        "using",
        "returning",
        "values",
        "select",
        "from",
        "group",
        "order",
        "limit",
        "for",
        "union",
        "as",
        "default",
        "with",
        "and",
        "or",
        "not",
        "natural",
    ]
)
_REFERENCE = re.compile(
    r"\b(?P<verb>FROM|JOIN|INTO|UPDATE)\s+(?:ONLY\s+)?\"?(?P<table>[a-z_][a-z0-9_]*)\"?"
    r"(?:\s+(?:AS\s+)?\"?(?P<alias>[A-Za-z_][A-Za-z0-9_]*)\"?)?",
    re.IGNORECASE,
)
_SET_LIST = re.compile(r"\bSET\b.*?(?=\b(?:FROM|WHERE|RETURNING)\b|$)", re.IGNORECASE | re.DOTALL)
_SUBQUERY = re.compile(r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|VALUES|WITH)\b", re.IGNORECASE)


def per_execution_tables() -> dict[str, type[models.Model]]:
    """The tables whose rows belong to one run: the runs table and every table with a
    foreign key to it, found from the installed models (a new one is covered unasked)."""
    found: dict[str, type[models.Model]] = {WorkflowExecution._meta.db_table: WorkflowExecution}
    for model in apps.get_models():
        for key in model._meta.concrete_fields:
            if isinstance(key, models.ForeignKey) and key.related_model is WorkflowExecution:
                found[model._meta.db_table] = model
    return found


@dataclass(frozen=True)
class Touch:
    """One reference to a per-execution table in one statement."""

    table: str
    verb: str
    confined: bool
    # The shard ids the reference's filter (or an INSERT's rows) names, where they could
    # be read from the statement's parameters; empty when they could not.
    shards: frozenset[int]


def touches(sql: str, params: Sequence[Any] | None, tables: Iterable[str]) -> list[Touch]:
    """Every reference in ``sql`` to one of ``tables``, each judged by the shard rule."""
    wanted = set(tables)
    groups = _groups(sql)
    found: list[Touch] = []
    for match in _REFERENCE.finditer(sql):
        table = match["table"].lower()
        if table not in wanted:
            continue
        alias = match["alias"] if match["alias"] and match["alias"].lower() not in _KEYWORDS else None
        start, end = _block(groups, match.start(), len(sql))
        text = _without_subqueries(sql, groups, start, end)
        if match["verb"].upper() == "UPDATE":
            text = _SET_LIST.sub(lambda m: " " * len(m[0]), text, count=1)  # an assignment is no filter
        qualifiers = {f'"{table}"', table}
        if alias:
            qualifiers.add(alias)
        verb = match["verb"].upper()
        if verb == "INTO":
            confined, shards = _insert_shards(sql, params, match.end())
        else:
            confined, shards = _filter_shards(sql, params, text, start, qualifiers)
        found.append(Touch(table, "DELETE" if _is_delete(sql, match.start()) else verb, confined, shards))
    return found


def _is_delete(sql: str, at: int) -> bool:
    return sql[max(0, at - 8) : at].strip().upper().endswith("DELETE")


def _groups(sql: str) -> list[tuple[int, int]]:
    """The (open, close) offsets of every parenthesised group, ignoring quoted text."""
    stack: list[int] = []
    spans: list[tuple[int, int]] = []
    quote: str | None = None
    for i, char in enumerate(sql):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "(":
            stack.append(i)
        elif char == ")" and stack:
            spans.append((stack.pop(), i))
    return spans


def _block(groups: list[tuple[int, int]], at: int, length: int) -> tuple[int, int]:
    """The innermost group holding offset ``at`` (the whole statement if none)."""
    around = [(s, e) for s, e in groups if s < at < e]
    return max(around, key=lambda span: span[0]) if around else (-1, length)


def _without_subqueries(sql: str, groups: list[tuple[int, int]], start: int, end: int) -> str:
    """The block's text with the nested groups that are queries of their own blanked out."""
    text = list(sql[start + 1 : end])
    for s, e in groups:
        if start < s and e < end and _SUBQUERY.match(sql[s + 1 : e]):
            for i in range(s - start - 1, e - start):
                text[i] = " "
    return "".join(text)


def _placeholder_index(sql: str, at: int) -> int:
    """The number of ``%s`` placeholders before offset ``at``."""
    return sql.count("%s", 0, at)


def _filter_shards(
    sql: str, params: Sequence[Any] | None, text: str, start: int, qualifiers: set[str]
) -> tuple[bool, frozenset[int]]:
    names = "|".join(re.escape(q) for q in sorted(qualifiers, key=len, reverse=True))
    predicate = re.compile(
        rf"(?:(?<![\w.\"])|(?:{names})\.)\"?{SHARD_COLUMN}\"?\s*(?P<op>=\s*ANY\s*\(|=|IN\s*\()\s*(?P<rhs>%s|\d+|[\w\".]+)",
        re.IGNORECASE,
    )
    confined = False
    shards: set[int] = set()
    for hit in predicate.finditer(text):
        confined = True
        rhs = hit["rhs"]
        if rhs.isdigit():
            shards.add(int(rhs))
        elif rhs == "%s" and params is not None:
            offset = start + 1 + hit.start("rhs")
            index = _placeholder_index(sql, offset)
            if hit["op"].upper().startswith("IN"):
                close = text.find(")", hit.start("rhs"))
                count = text.count("%s", hit.start("rhs"), close)
                shards.update(_ints(params[index : index + count]))
            else:
                shards.update(_ints([params[index]]))
    return confined, frozenset(shards)


def _insert_shards(sql: str, params: Sequence[Any] | None, after: int) -> tuple[bool, frozenset[int]]:
    """Whether an ``INSERT``'s column list names the shard column, and the shards its rows hold."""
    open_at = sql.find("(", after)
    close_at = sql.find(")", open_at)
    if open_at < 0 or sql[after:open_at].strip():
        return False, frozenset()
    columns = [c.strip().strip('"') for c in sql[open_at + 1 : close_at].split(",")]
    if SHARD_COLUMN not in columns or params is None:
        return SHARD_COLUMN in columns, frozenset()
    first = _placeholder_index(sql, close_at)
    position = columns.index(SHARD_COLUMN)
    rest = sql[close_at:]
    if re.match(r"\)\s*SELECT\b[^;]*?\bjsonb_array_elements\(", rest, re.IGNORECASE | re.DOTALL):
        # Many rows go as one JSON array of rows (``store.rows_query``), a value per column.
        return True, frozenset(_ints(row[position] for row in json.loads(params[first])))
    values = re.match(r"\)\s*VALUES\s*", rest, re.IGNORECASE)
    if values is None:
        return True, frozenset()
    # One placeholder per column per row: every row's shard value is at the same stride.
    row = re.match(r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)", rest[values.end() :])
    width = row[1].count("%s") if row else len(columns)
    rows_end = close_at + values.end() + _values_length(rest[values.end() :])
    count = sql.count("%s", close_at, rows_end) // max(width, 1)
    return True, frozenset(_ints(params[first + position + i * width] for i in range(count)))


def _values_length(text: str) -> int:
    """The length of a ``VALUES`` list's rows at the start of ``text``."""
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and char not in " ,\n":
            break
        i += 1
    return i


def _ints(values: Iterable[Any]) -> list[int]:
    out: list[int] = []
    for value in values:
        if isinstance(value, list | tuple):
            out.extend(_ints(value))
        elif isinstance(value, str) and value.startswith("{") and value.endswith("}"):
            # An array sent in its text form (``store.array_literal``).
            out.extend(int(item) for item in value[1:-1].split(",") if item.strip().lstrip("-").isdigit())
        elif isinstance(value, int) and not isinstance(value, bool):
            out.append(value)
    return out


ROOT = Path(__file__).resolve().parents[2]
# Frames that say nothing about who sent a statement: the test's own, the store's plumbing.
_PLUMBING = ("tests/", "history/kernel/store.py")


@dataclass(frozen=True)
class Statement:
    """One statement as the connection sent it, with the step of the scenario that sent
    it, the transaction it ran in (a number per transaction) and who sent it."""

    sql: str
    params: Any
    step: str
    transaction: int
    site: str


@dataclass
class Recorder:
    """An execute wrapper that keeps every statement Django's connection sends (ORM, raw
    cursors and the kernel's bound cursor alike) and numbers the transactions.

    A statement begins a new transaction when the session is idle before it (psycopg's
    transaction status): in autocommit mode every statement does, in an atomic block the
    first one does.
    """

    statements: list[Statement] = field(default_factory=list)
    step: str = ""
    transactions: int = 0
    recording: bool = True

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        raw = connection.connection
        if raw is None or raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            self.transactions += 1
        if self.recording:
            self.statements.append(Statement(sql, params, self.step, self.transactions, _call_site()))
        return execute(sql, params, many, context)

    @contextlib.contextmanager
    def at(self, step: str) -> Iterator[None]:
        """Label the statements sent inside as one step of the scenario."""
        self.step = step
        try:
            yield
        finally:
            self.step = ""

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Setting up a step (a test's own writes) is not the code under test."""
        self.recording = False
        try:
            yield
        finally:
            self.recording = True


def _call_site() -> str:
    """The project's frames that led to the statement, innermost first, as ``path:function``."""
    frames = []
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if not path.is_relative_to(ROOT) or ".venv" in path.parts:
            continue
        relative = path.relative_to(ROOT).as_posix()
        if not relative.startswith(_PLUMBING):
            frames.append(f"{relative}:{frame.name}")
    return " < ".join(frames)
