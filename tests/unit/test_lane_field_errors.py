"""The lean lane names the faulty field of a body, in DRF's words, for lists too."""

from __future__ import annotations

from typing import Annotated

import msgspec

from chronicle.lane_errors import field_errors


class Tags(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    tags: Annotated[list[str], msgspec.Meta(min_length=1, max_length=3)]


def test_a_list_too_long_or_too_short_names_its_field() -> None:
    assert field_errors(Tags, {"tags": ["a"] * 4}) == {
        "tags": ["Ensure this field has no more than 3 elements."]
    }
    assert field_errors(Tags, {"tags": []}) == {"tags": ["Ensure this field has at least 1 elements."]}


def test_an_item_of_the_wrong_type_is_named_by_its_index() -> None:
    assert field_errors(Tags, {"tags": ["a", 5]}) == {"tags": {"1": ["Not a valid string."]}}
