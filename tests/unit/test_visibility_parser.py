"""The list filter language: tokens, grammar, precedence, typing and error positions.

These need no database: ``parse`` builds the syntax tree and ``compile_query`` types it
against a namespace's attribute table given as a dict.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from executions.visibility import (
    BoolOp,
    Not,
    Predicate,
    Value,
    VisibilityQueryError,
    compile_query,
    parse,
    parse_duration,
    query_datetime,
    tokenize,
)
from namespaces.models import IndexedValueType as T

CUSTOM = {
    "CustomerId": T.KEYWORD,
    "Amount": T.INT,
    "Score": T.DOUBLE,
    "Vip": T.BOOL,
    "Due": T.DATETIME,
    "Tags": T.KEYWORD_LIST,
    "Notes": T.TEXT,
    "odd name": T.KEYWORD,
}


def where(query: str) -> object:
    return parse(query).where


def error(query: str) -> VisibilityQueryError:
    with pytest.raises(VisibilityQueryError) as caught:
        compile_query(query, CUSTOM)
    return caught.value


def test_tokens_carry_their_positions_and_decoded_values() -> None:
    tokens = tokenize("`odd name` >= 'it''s' and Amount<>-1.5e2")
    assert [(t.kind, t.position) for t in tokens] == [
        ("name", 0),
        ("op", 11),
        ("string", 14),
        ("keyword", 22),
        ("name", 26),
        ("op", 32),
        ("number", 34),
        ("end", 40),
    ]
    assert tokens[0].value == "odd name" and tokens[2].value == "it's" and tokens[6].value == -150.0
    assert tokens[3].text == "AND"  # keywords are case-insensitive


def test_escapes_in_strings() -> None:
    assert tokenize(r"'a\'b'")[0].value == "a'b"
    assert tokenize('"say ""hi"""')[0].value == 'say "hi"'


@pytest.mark.parametrize("symbol", ["=", "!=", ">", ">=", "<", "<="])
def test_every_comparison_operator(symbol: str) -> None:
    expected = Predicate("Amount", 0, symbol, (Value(5, 8 + len(symbol)),), False, 7)
    assert where(f"Amount {symbol} 5") == expected


def test_sql_not_equal_spelling_is_the_same_operator() -> None:
    node = where("Amount <> 5")
    assert isinstance(node, Predicate) and node.operator == "!="


def test_in_not_in_between_starts_with_and_null_checks() -> None:
    node = where("CustomerId IN ('a', 'b')")
    assert (
        isinstance(node, Predicate) and node.operator == "IN" and [v.raw for v in node.values] == ["a", "b"]
    )
    node = where("CustomerId NOT IN ('a')")
    assert isinstance(node, Predicate) and node.operator == "IN" and node.negated
    node = where("Amount BETWEEN 1 AND 10")
    assert (
        isinstance(node, Predicate) and node.operator == "BETWEEN" and [v.raw for v in node.values] == [1, 10]
    )
    node = where("Amount NOT BETWEEN 1 AND 10")
    assert isinstance(node, Predicate) and node.negated
    node = where("CustomerId STARTS_WITH 'ab'")
    assert isinstance(node, Predicate) and node.operator == "STARTS_WITH"
    node = where("CustomerId NOT STARTS_WITH 'ab'")
    assert isinstance(node, Predicate) and node.negated
    node = where("CloseTime IS NULL")
    assert isinstance(node, Predicate) and node.operator == "IS NULL" and not node.negated
    node = where("CloseTime is not null")
    assert isinstance(node, Predicate) and node.operator == "IS NULL" and node.negated


def test_and_binds_tighter_than_or() -> None:
    node = where("Amount = 1 OR Amount = 2 AND Amount = 3")
    assert isinstance(node, BoolOp) and node.operator == "OR"
    assert isinstance(node.operands[1], BoolOp) and node.operands[1].operator == "AND"


def test_parentheses_override_precedence() -> None:
    node = where("(Amount = 1 OR Amount = 2) AND Amount = 3")
    assert isinstance(node, BoolOp) and node.operator == "AND"
    assert isinstance(node.operands[0], BoolOp) and node.operands[0].operator == "OR"


def test_not_applies_to_the_next_term_only() -> None:
    node = where("NOT Amount = 1 AND Amount = 2")
    assert isinstance(node, BoolOp) and node.operator == "AND" and isinstance(node.operands[0], Not)


def test_chains_of_the_same_operator_are_flat() -> None:
    node = where("Amount = 1 AND Amount = 2 AND Amount = 3")
    assert isinstance(node, BoolOp) and len(node.operands) == 3


def test_order_by_and_group_by() -> None:
    parsed = parse("WorkflowType = 'A' ORDER BY StartTime ASC")
    assert parsed.order_by is not None and not parsed.order_by.descending
    assert parse("ORDER BY Amount DESC").order_by is not None
    assert parse("ORDER BY Amount DESC").where is None
    parsed = parse("ExecutionStatus = 'Running' GROUP BY ExecutionStatus")
    assert parsed.group_by is not None and parsed.group_by.name == "ExecutionStatus"


def test_empty_query_matches_everything() -> None:
    assert parse("").where is None and parse("   ").order_by is None


def test_values_are_typed_for_their_attribute() -> None:
    compile_query("Score > 1 AND Score < 2.5 AND Vip = true AND Vip != 'false'", CUSTOM)
    compile_query("Due > '2026-01-01T00:00:00Z' AND StartTime < '2026-01-01T00:00:00+02:00'", CUSTOM)
    compile_query("StartTime > 1767225600000000000", CUSTOM)  # integer nanoseconds
    compile_query("ExecutionDuration > '1h30m' AND ExecutionDuration < '02:00:00'", CUSTOM)
    compile_query("RunId = '2f2b0a3e-7a5b-4f3c-9d51-0f8f3b0c6a11'", CUSTOM)
    compile_query("`odd name` = 'x' AND Tags IN ('a', 'b') AND Notes = 'hello world'", CUSTOM)


def test_a_custom_datetime_is_compared_in_its_stored_form() -> None:
    compiled = compile_query("Due = '2026-01-01T02:00:00+02:00'", CUSTOM)
    assert "2026-01-01T00:00:00.000000Z" in str(compiled.where)


def test_default_order_is_start_time_descending() -> None:
    compiled = compile_query("", CUSTOM)
    assert compiled.order.name == "StartTime" and compiled.descending


@pytest.mark.parametrize(
    ("query", "position", "fragment"),
    [
        ("WorkflowType = ", 15, "expected a value"),
        ("WorkflowType 'A'", 13, "expected an operator"),
        ("Nope = 'a'", 0, "unknown search attribute 'Nope'"),
        ("Amount = 'ten'", 9, "is not an integer"),
        ("Score = 'x'", 8, "is not a number"),
        ("Vip = 3", 6, "is not true or false"),
        ("Due > 'yesterday'", 6, "RFC 3339"),
        ("CustomerId = 5", 13, "is not a quoted string"),
        ("ExecutionStatus = 'Sleeping'", 18, "is not one of Running"),
        ("RunId = 'not-a-uuid'", 8, "RunId"),
        ("ExecutionDuration > 'soon'", 20, "is not a duration"),
        ("(Amount = 1", 11, "expected ')'"),
        ("Amount = 1)", 10, "unexpected ')'"),
        ("Amount = 1 AND", 14, "expected a search attribute name"),
        ("Amount IN 1, 2", 10, "expected '(' after IN"),
        ("Amount IN (1 2)", 13, "expected ')' or ','"),
        ("Amount BETWEEN 1 10", 17, "expected AND"),
        ("CloseTime IS 5", 13, "expected NULL"),
        ("WorkflowId LIKE 'a%'", 11, "LIKE is not supported"),
        ("WorkflowId = 'open", 13, "unterminated string"),
        ("`odd name = 'x'", 0, "unterminated backquoted name"),
        ("Amount = 1 ; drop table x", 11, "unexpected character ';'"),
        ("Tags > 'a'", 5, "> is not supported on KeywordList"),
        ("Notes STARTS_WITH 'a'", 6, "STARTS_WITH is not supported on Text"),
        ("Vip > true", 4, "> is not supported on Bool"),
        ("Amount STARTS_WITH 'a'", 7, "STARTS_WITH is not supported on Int"),
        ("ORDER BY Notes", 9, "cannot ORDER BY Text"),
        ("ORDER BY Amount, StartTime", 15, "ORDER BY takes one attribute"),
        ("GROUP BY WorkflowType", 9, "GROUP BY is supported on ExecutionStatus only"),
        ("ORDER StartTime", 6, "expected BY after ORDER"),
    ],
)
def test_errors_point_at_the_offending_character(query: str, position: int, fragment: str) -> None:
    failure = error(query)
    assert failure.position == position, failure.message
    assert fragment in failure.message
    assert failure.code == "invalid_query" and failure.status == 400
    snippet_query, caret = failure.details["snippet"].split("\n")
    assert snippet_query == query and caret == " " * position + "^"


def test_datetime_nanoseconds_mean_unix_time() -> None:
    assert query_datetime(0) == datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration(1_500_000_000) == timedelta(seconds=1.5)
