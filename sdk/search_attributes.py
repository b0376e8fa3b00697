"""Typed search attributes, as Temporal's SDK spells them.

``SearchAttributeKey.for_int("Amount").value_set(5)`` builds an update a workflow
passes to ``workflow.upsert_search_attributes([...])``; ``TypedSearchAttributes`` is
what a start takes. The older dict form (``{"Amount": [5]}``) works everywhere too.
Keys are generic in their value type, so a type checker catches ``for_int(...)
.value_set("five")``, and ``value_set`` checks again at run time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class SearchAttributeIndexedValueType(IntEnum):
    """Temporal's ``IndexedValueType`` numbering; ``name_on_server`` is the server's spelling."""

    TEXT = 1
    KEYWORD = 2
    INT = 3
    DOUBLE = 4
    BOOL = 5
    DATETIME = 6
    KEYWORD_LIST = 7

    @property
    def name_on_server(self) -> str:
        return _SERVER_NAMES[self]


_SERVER_NAMES = {
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
    SearchAttributeIndexedValueType.BOOL: "Bool",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
}


def _fits(kind: SearchAttributeIndexedValueType, value: Any) -> bool:
    T = SearchAttributeIndexedValueType
    if kind in (T.TEXT, T.KEYWORD):
        return isinstance(value, str)
    if kind == T.INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == T.DOUBLE:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == T.BOOL:
        return isinstance(value, bool)
    if kind == T.DATETIME:
        return isinstance(value, datetime)
    return (
        isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(v, str) for v in value)
    )


@dataclass(frozen=True)
class SearchAttributeKey(Generic[V]):
    """A search attribute's name and type."""

    name: str
    indexed_value_type: SearchAttributeIndexedValueType

    @staticmethod
    def for_text(name: str) -> SearchAttributeKey[str]:
        return SearchAttributeKey(name, SearchAttributeIndexedValueType.TEXT)

    @staticmethod
    def for_keyword(name: str) -> SearchAttributeKey[str]:
        return SearchAttributeKey(name, SearchAttributeIndexedValueType.KEYWORD)

    @staticmethod
    def for_int(name: str) -> SearchAttributeKey[int]:
        return SearchAttributeKey(name, SearchAttributeIndexedValueType.INT)

    @staticmethod
    def for_float(name: str) -> SearchAttributeKey[float]:
        return SearchAttributeKey(name, SearchAttributeIndexedValueType.DOUBLE)

    @staticmethod
    def for_bool(name: str) -> SearchAttributeKey[bool]:
        return SearchAttributeKey(name, SearchAttributeIndexedValueType.BOOL)

    @staticmethod
    def for_datetime(name: str) -> SearchAttributeKey[datetime]:
        return SearchAttributeKey(name, SearchAttributeIndexedValueType.DATETIME)

    @staticmethod
    def for_keyword_list(name: str) -> SearchAttributeKey[Sequence[str]]:
        return SearchAttributeKey(name, SearchAttributeIndexedValueType.KEYWORD_LIST)

    def value_set(self, value: V) -> SearchAttributeUpdate[V]:
        if not _fits(self.indexed_value_type, value):
            kind = self.indexed_value_type.name_on_server
            raise TypeError(f"search attribute {self.name!r} is {kind}: {value!r} does not fit")
        return SearchAttributeUpdate(self, value)

    def value_unset(self) -> SearchAttributeUpdate[V]:
        return SearchAttributeUpdate(self, None)


@dataclass(frozen=True)
class SearchAttributeUpdate(Generic[V]):
    """Set (or, with ``value`` None, remove) one attribute."""

    key: SearchAttributeKey[V]
    value: V | None


@dataclass(frozen=True)
class SearchAttributePair(Generic[V]):
    key: SearchAttributeKey[V]
    value: V


@dataclass(frozen=True)
class TypedSearchAttributes:
    """An immutable set of typed attribute values, looked up by key."""

    search_attributes: Sequence[SearchAttributePair[Any]] = ()

    def __iter__(self) -> Iterator[SearchAttributePair[Any]]:
        return iter(self.search_attributes)

    def __len__(self) -> int:
        return len(self.search_attributes)

    def __contains__(self, key: object) -> bool:
        return any(pair.key == key for pair in self.search_attributes)

    def get(self, key: SearchAttributeKey[V], default: V | None = None) -> V | None:
        for pair in self.search_attributes:
            if pair.key == key:
                return pair.value  # type: ignore[no-any-return]
        return default

    def __getitem__(self, key: SearchAttributeKey[V]) -> V:
        for pair in self.search_attributes:
            if pair.key == key:
                return pair.value  # type: ignore[no-any-return]
        raise KeyError(key.name)


SearchAttributesInput = TypedSearchAttributes | Sequence[SearchAttributeUpdate[Any]] | Mapping[str, Any]


def _wire_value(value: Any) -> Any:
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.isoformat()
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_wire_value(item) for item in value]
    return value


def search_attributes_to_wire(attributes: SearchAttributesInput | None) -> dict[str, Any]:
    """The JSON object the server takes: name -> value (a list for the dict form; None removes)."""
    if attributes is None:
        return {}
    if isinstance(attributes, Mapping):
        return {name: _wire_value(value) for name, value in attributes.items()}
    items: list[tuple[str, Any]] = []
    for item in attributes:
        if not isinstance(item, SearchAttributeUpdate | SearchAttributePair):
            raise TypeError(f"expected SearchAttributeKey.value_set(...) updates, got {item!r}")
        if item.value is not None and not _fits(item.key.indexed_value_type, item.value):
            raise TypeError(f"search attribute {item.key.name!r}: {item.value!r} does not fit its type")
        items.append((item.key.name, _wire_value(item.value)))
    return dict(items)
