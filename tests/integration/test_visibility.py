"""Visibility on real PostgreSQL: typed attributes, every operator, pages, counts, plans."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from bench.visibility_data import bulk_insert_runs
from chronicle.errors import ChronicleError
from executions import search_attributes, selectors, visibility
from history import kernel
from history.kernel import ExecutionMutation
from history.kernel.commands import HANDLERS, CommandRejected, _upsert_search_attributes
from history.models import ExecutionStatus, WorkflowExecution
from namespaces.models import Namespace
from tests.factories import ExecutionFactory, NamespaceFactory
from tests.integration.test_kernel_query_plans import captured_sql, indexes_used

pytestmark = pytest.mark.django_db

ATTRIBUTES = {
    "CustomerId": "Keyword",
    "Amount": "Int",
    "Score": "Double",
    "Vip": "Bool",
    "Due": "Datetime",
    "Tags": "KeywordList",
    "Notes": "Text",
}


@pytest.fixture
def namespace() -> Namespace:
    ns = NamespaceFactory()
    for name, kind in ATTRIBUTES.items():
        search_attributes.add_attribute(ns, name, kind)
    return ns


def start(namespace: Namespace, workflow_id: str, **attributes: Any) -> WorkflowExecution:
    return ExecutionFactory(
        namespace=namespace, workflow_id=workflow_id, workflow_type="Order", search_attributes=attributes
    )


@pytest.fixture
def runs(namespace: Namespace) -> dict[str, WorkflowExecution]:
    return {
        "a": start(
            namespace,
            "a",
            CustomerId="c-1",
            Amount=10,
            Score=1.5,
            Vip=True,
            Due="2026-01-01T00:00:00Z",
            Tags=["red", "big"],
            Notes="ships on monday",
        ),
        "b": start(namespace, "b", CustomerId="c-2", Amount=200, Vip=False, Due="2026-06-01T12:00:00+02:00"),
        "c": start(namespace, "c", CustomerId="d-3", Amount=50, Tags=["blue"]),
        "d": start(namespace, "d"),
    }


def ids(namespace: Namespace, query: str) -> set[str]:
    return {row.workflow_id for row in visibility.search(namespace, query)}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("CustomerId = 'c-1'", {"a"}),
        ("CustomerId != 'c-1'", {"b", "c"}),
        ("Amount > 10", {"b", "c"}),
        ("Amount >= 10", {"a", "b", "c"}),
        ("Amount < 50", {"a"}),
        ("Amount <= 50", {"a", "c"}),
        ("Amount IN (10, 200)", {"a", "b"}),
        ("Amount NOT IN (10, 200)", {"c"}),
        ("Amount BETWEEN 10 AND 50", {"a", "c"}),
        ("Amount NOT BETWEEN 10 AND 50", {"b"}),
        ("Score > 1.0", {"a"}),
        ("CustomerId STARTS_WITH 'c-'", {"a", "b"}),
        ("CustomerId NOT STARTS_WITH 'c-'", {"c"}),
        ("NOT Amount > 10", {"a"}),
        ("Vip = true", {"a"}),
        ("Vip = false", {"b"}),
        ("Due < '2026-03-01T00:00:00Z'", {"a"}),
        ("Due = '2026-06-01T10:00:00Z'", {"b"}),
        ("Due BETWEEN '2025-12-31T00:00:00Z' AND '2026-12-31T00:00:00Z'", {"a", "b"}),
        ("Tags = 'red'", {"a"}),
        ("Tags IN ('blue', 'big')", {"a", "c"}),
        ("Tags != 'red'", {"c"}),
        ("Notes = 'monday'", {"a"}),
        ("Notes = 'tuesday'", set()),
        ("CustomerId IS NULL", {"d"}),
        ("Tags IS NOT NULL", {"a", "c"}),
        ("CloseTime IS NULL AND ExecutionStatus = 'Running'", {"a", "b", "c", "d"}),
        ("WorkflowId = 'a' OR WorkflowId = 'b' AND Amount > 100", {"a", "b"}),
        ("(WorkflowId = 'a' OR WorkflowId = 'b') AND Amount > 100", {"b"}),
        ("NOT (WorkflowId = 'a' OR WorkflowId = 'b')", {"c", "d"}),
        ("WorkflowType = 'Order' AND HistoryLength >= 2", {"a", "b", "c", "d"}),
        ("WorkflowId IN ('a', 'z')", {"a"}),
        ("StartTime > '2000-01-01T00:00:00Z'", {"a", "b", "c", "d"}),
        ("", {"a", "b", "c", "d"}),
    ],
)
def test_each_operator_selects_the_right_runs(
    namespace: Namespace, runs: dict[str, WorkflowExecution], query: str, expected: set[str]
) -> None:
    assert ids(namespace, query) == expected


def test_names_that_spell_orm_lookups_are_plain_attributes(namespace: Namespace) -> None:
    search_attributes.add_attribute(namespace, "contains", "Keyword")
    search_attributes.add_attribute(namespace, "in__gt", "Int")
    start(namespace, "odd", contains="x", in__gt=5)
    start(namespace, "plain")
    assert ids(namespace, "contains = 'x' AND in__gt > 4") == {"odd"}
    assert ids(namespace, "contains IS NULL") == {"plain"}
    assert [r.workflow_id for r in visibility.search(namespace, "ORDER BY in__gt DESC")] == ["plain", "odd"]


def test_a_namespace_sees_only_its_own_runs(namespace: Namespace, runs: dict[str, WorkflowExecution]) -> None:
    other = NamespaceFactory()
    ExecutionFactory(namespace=other, workflow_id="a")
    assert visibility.count(other, "WorkflowId = 'a'") == 1
    assert visibility.count(namespace, "") == 4


def test_values_are_stored_in_canonical_form(runs: dict[str, WorkflowExecution]) -> None:
    assert runs["b"].search_attributes["Due"] == "2026-06-01T10:00:00.000000Z"
    assert runs["a"].search_attributes["Score"] == 1.5


def test_start_refuses_unknown_names_and_wrong_types(namespace: Namespace) -> None:
    for attrs, fragment in [
        ({"Nope": "x"}, "not registered"),
        ({"Amount": "ten"}, "is Int"),
        ({"Due": "tomorrow"}, "RFC 3339"),
        ({"Tags": [1, 2]}, "KeywordList"),
        ({"WorkflowId": "x"}, "system search attribute"),
    ]:
        with pytest.raises(ChronicleError) as caught:
            start(namespace, "bad", **attrs)
        assert caught.value.status == 400 and fragment in caught.value.message
        assert caught.value.details["cause"] == "BadSearchAttributes"
    assert not WorkflowExecution.objects.filter(namespace=namespace).exists()


def test_the_dict_form_with_lists_is_accepted(namespace: Namespace) -> None:
    run = start(namespace, "dict", CustomerId=["c-9"], Amount=[7], Tags=["x", "y"])
    assert run.search_attributes == {"CustomerId": "c-9", "Amount": 7, "Tags": ["x", "y"]}


def test_upsert_merges_removes_and_refuses_bad_types(namespace: Namespace) -> None:
    run = start(namespace, "u", CustomerId="c-1", Amount=1)
    mutation = ExecutionMutation(run, namespace)
    _upsert_search_attributes(mutation, {"search_attributes": {"Amount": 2, "CustomerId": None}}, 4, "")
    assert run.search_attributes == {"Amount": 2}
    with pytest.raises(CommandRejected) as caught:
        _upsert_search_attributes(mutation, {"search_attributes": {"Amount": "two"}}, 4, "")
    assert caught.value.cause == "WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES"


@pytest.mark.parametrize("command", ["ContinueAsNewWorkflowExecution", "StartChildWorkflowExecution"])
def test_starting_commands_refuse_unregistered_or_wrong_typed_attributes(
    namespace: Namespace, command: str
) -> None:
    run = start(namespace, f"starter-{command}")
    mutation = ExecutionMutation(run, namespace)
    base = {"workflow_id": "child", "workflow_type": {"name": "Child"}, "task_queue": {"name": "q"}}
    for attrs in ({"Nope": "x"}, {"Amount": "ten"}):
        with pytest.raises(CommandRejected) as caught:
            HANDLERS[command](mutation, {**base, "search_attributes": attrs}, 4, "")
        assert caught.value.cause == "WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES"
    assert mutation._events == []


def test_continue_as_new_carries_typed_attributes_to_the_next_run(namespace: Namespace) -> None:
    run = start(namespace, "chain")
    mutation = ExecutionMutation(run, namespace)
    HANDLERS["ContinueAsNewWorkflowExecution"](mutation, {"search_attributes": {"Amount": [7]}}, 4, "")
    assert [follower.execution.search_attributes for follower in mutation.followers] == [{"Amount": 7}]


def test_keyset_pages_walk_every_run_once_in_any_order(namespace: Namespace) -> None:
    for index in range(7):
        start(namespace, f"p{index}", Amount=index % 3) if index != 3 else start(namespace, "p3")
    for query in ("", "ORDER BY Amount", "ORDER BY Amount DESC", "ORDER BY CloseTime", "ORDER BY WorkflowId"):
        seen: list[str] = []
        token = ""
        while True:
            rows, next_token = selectors.execution_list(
                namespace, query=query, page_size=2, next_page_token=token
            )
            seen += [row["workflow_id"] for row in rows]
            if next_token is None:
                break
            token = next_token
        assert sorted(seen) == sorted(f"p{i}" for i in range(7)), query
        assert seen == [row.workflow_id for row in visibility.search(namespace, query)], query


def test_order_by_puts_missing_values_first_when_descending(namespace: Namespace) -> None:
    start(namespace, "low", Amount=1)
    start(namespace, "none")
    start(namespace, "high", Amount=9)
    assert [r.workflow_id for r in visibility.search(namespace, "ORDER BY Amount DESC")] == [
        "none",
        "high",
        "low",
    ]
    assert [r.workflow_id for r in visibility.search(namespace, "ORDER BY Amount")] == ["low", "high", "none"]


def test_a_page_token_is_bound_to_its_query(namespace: Namespace, runs: dict[str, WorkflowExecution]) -> None:
    _, token = visibility.page(namespace, "", page_size=1)
    assert token is not None
    with pytest.raises(ChronicleError, match="another query"):
        visibility.page(namespace, "Amount > 1", page_size=1, next_page_token=token)
    with pytest.raises(ChronicleError, match="malformed"):
        visibility.page(namespace, "", page_size=1, next_page_token="garbage!")


def test_counts_and_groups_by_status(namespace: Namespace, runs: dict[str, WorkflowExecution]) -> None:
    kernel.terminate_workflow_execution(namespace, workflow_id="a", run_id=None, reason="r", identity="t")
    assert visibility.count(namespace, "Amount > 0") == 3
    result = visibility.count_executions(namespace, "", group_by="ExecutionStatus")
    assert result == {
        "count": 4,
        "groups": [
            {"group_values": [ExecutionStatus.RUNNING], "count": 3},
            {"group_values": [ExecutionStatus.TERMINATED], "count": 1},
        ],
    }
    assert visibility.count_executions(namespace, "GROUP BY ExecutionStatus") == result
    with pytest.raises(visibility.VisibilityQueryError, match="ORDER BY is not allowed"):
        visibility.count(namespace, "ORDER BY StartTime")
    with pytest.raises(visibility.VisibilityQueryError, match="only allowed in a count"):
        visibility.search(namespace, "GROUP BY ExecutionStatus")


def test_execution_duration_and_close_time(namespace: Namespace, runs: dict[str, WorkflowExecution]) -> None:
    kernel.terminate_workflow_execution(namespace, workflow_id="b", run_id=None, reason="r", identity="t")
    assert ids(namespace, "ExecutionDuration < '1h'") == {"b"}
    assert ids(namespace, "CloseTime IS NOT NULL") == {"b"}
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    assert ids(namespace, f"CloseTime < '{later}'") == {"b"}


def test_registry_refuses_system_reserved_and_conflicting_names(namespace: Namespace) -> None:
    for name, kind, fragment in [
        ("WorkflowId", "Keyword", "system or reserved"),
        ("TemporalThing", "Keyword", "'Temporal'"),
        ("bad name", "Keyword", "must match"),
        ("Fine", "Colour", "unknown search attribute type"),
    ]:
        with pytest.raises(ChronicleError, match=fragment):
            search_attributes.add_attribute(namespace, name, kind)
    assert search_attributes.add_attribute(namespace, "Amount", "Int") is False
    with pytest.raises(ChronicleError) as caught:
        search_attributes.add_attribute(namespace, "Amount", "Keyword")
    assert caught.value.status == 409


def test_removed_attributes_can_no_longer_be_set_or_queried(namespace: Namespace) -> None:
    search_attributes.remove_attribute(namespace, "Score")
    with pytest.raises(visibility.VisibilityQueryError, match="unknown search attribute"):
        visibility.search(namespace, "Score > 1")
    with pytest.raises(ChronicleError, match="not registered"):
        start(namespace, "x", Score=1.0)


def test_management_command_creates_lists_and_removes(namespace: Namespace, capsys: Any) -> None:
    call_command("search_attribute", "create", namespace=namespace.name, name="Region", type="Keyword")
    call_command("search_attribute", "list", namespace=namespace.name)
    out = capsys.readouterr().out
    assert "Region (Keyword) added" in out and "custom\tRegion\tKeyword" in out and "system\tStartTime" in out
    call_command("search_attribute", "remove", namespace=namespace.name, name="Region")
    assert "Region" not in search_attributes.list_attributes(namespace)["custom"]


# ---------------------------------------------------------------- plans


# Plans depend on the table's size and statistics (on a few rows, anything goes), so
# these run over 10,000 analysed runs. bench/bench_visibility.py prints the plans at 100,000.


@pytest.fixture
def volume(namespace: Namespace) -> Namespace:
    bulk_insert_runs(namespace, 10_000)
    return namespace


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("Tags = 'red'", "exec_search_attrs"),
        ("Tags IS NOT NULL", "exec_search_attrs"),
        ("CustomerId = 'c-1'", search_attributes.index_name("CustomerId")),
        ("Amount > 9990", search_attributes.index_name("Amount")),
        ("Due < '2026-01-01T10:00:00Z'", search_attributes.index_name("Due")),
    ],
)
def test_filters_read_their_index(volume: Namespace, query: str, index: str) -> None:
    sql = captured_sql(lambda: visibility.count(volume, query), "COUNT(")
    assert index in indexes_used(sql)


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("", "exec_ns_start"),
        ("ExecutionStatus = 'Completed'", "exec_ns_status"),
        ("WorkflowType = 'Order'", "exec_ns_type"),
        ("ORDER BY CloseTime DESC", "exec_ns_close"),
        ("ORDER BY Amount DESC", search_attributes.index_name("Amount")),
        ("ORDER BY Due", search_attributes.index_name("Due")),
    ],
)
def test_a_deep_page_walks_the_sort_index(volume: Namespace, query: str, index: str) -> None:
    token = None
    for _ in range(3):
        _, token = visibility.page(volume, query, page_size=100, next_page_token=token or "")
    assert token is not None
    sql = captured_sql(
        lambda: visibility.page(volume, query, page_size=100, next_page_token=token),
        "history_workflowexecution",
    )
    assert index in indexes_used(sql)


def test_count_by_status_reads_an_index(volume: Namespace) -> None:
    sql = captured_sql(lambda: visibility.count_by_status(volume, ""), "GROUP BY")
    assert indexes_used(sql)  # no sequential scan; which namespace index depends on the visibility map
