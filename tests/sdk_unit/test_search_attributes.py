"""Typed search attribute keys: values checked by type, and the wire form the server reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from sdk.search_attributes import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    search_attributes_to_wire,
)

CUSTOMER = SearchAttributeKey.for_keyword("CustomerId")
AMOUNT = SearchAttributeKey.for_int("Amount")
SCORE = SearchAttributeKey.for_float("Score")
VIP = SearchAttributeKey.for_bool("Vip")
DUE = SearchAttributeKey.for_datetime("Due")
TAGS = SearchAttributeKey.for_keyword_list("Tags")


def test_updates_become_a_name_to_value_object() -> None:
    due = datetime(2026, 5, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    wire = search_attributes_to_wire(
        [
            CUSTOMER.value_set("c-1"),
            AMOUNT.value_set(3),
            SCORE.value_set(2),
            VIP.value_set(True),
            DUE.value_set(due),
            TAGS.value_set(["a", "b"]),
            SearchAttributeKey.for_text("Notes").value_unset(),
        ]
    )
    assert wire == {
        "CustomerId": "c-1",
        "Amount": 3,
        "Score": 2,
        "Vip": True,
        "Due": "2026-05-01T12:00:00+02:00",
        "Tags": ["a", "b"],
        "Notes": None,
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [(AMOUNT, "3"), (AMOUNT, True), (CUSTOMER, 5), (VIP, 1), (DUE, "2026-01-01"), (TAGS, "a"), (TAGS, [1])],
)
def test_a_value_of_the_wrong_type_is_refused(key: SearchAttributeKey[object], value: object) -> None:
    with pytest.raises(TypeError, match=key.name):
        key.value_set(value)


def test_typed_attributes_look_up_by_key() -> None:
    typed = TypedSearchAttributes([SearchAttributePair(CUSTOMER, "c-1"), SearchAttributePair(AMOUNT, 7)])
    assert typed[AMOUNT] == 7 and typed.get(CUSTOMER) == "c-1" and typed.get(VIP) is None
    assert AMOUNT in typed and VIP not in typed and len(typed) == 2
    assert search_attributes_to_wire(typed) == {"CustomerId": "c-1", "Amount": 7}
    with pytest.raises(KeyError):
        typed[VIP]


def test_the_dict_form_passes_through_with_datetimes_as_strings() -> None:
    naive = datetime(2026, 1, 1)  # noqa: DTZ001 - a naive datetime is taken as UTC
    assert search_attributes_to_wire({"CustomerId": ["c-1"], "Due": [naive]}) == {
        "CustomerId": ["c-1"],
        "Due": ["2026-01-01T00:00:00+00:00"],
    }
    assert search_attributes_to_wire({"Due": datetime(2026, 1, 1, tzinfo=UTC)}) == {
        "Due": "2026-01-01T00:00:00+00:00"
    }
    assert search_attributes_to_wire(None) == {}
