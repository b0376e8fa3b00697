"""Registering a namespace's custom search attributes, with the index each one needs.

Custom attributes live in the run's ``search_attributes`` JSONB. Equality on Keyword
and KeywordList values, ``IS NULL`` and ``IS NOT NULL`` are served by the GIN index over
the whole column; ranges and ``ORDER BY`` need a btree on the attribute's own value, so
registering a name creates ``(namespace_id, search_attributes -> 'Name', run_id)`` for
it (shared by every namespace that uses the name), and removing the last use drops it.
"""

from __future__ import annotations

import hashlib

from django.db import connection, transaction

from chronicle.errors import ChronicleError, ErrorCode, invalid
from namespaces.models import IndexedValueType, Namespace, SearchAttribute
from namespaces.search_attributes import SYSTEM_ATTRIBUTES, BadSearchAttributes, check_name

_TABLE = "history_workflowexecution"
_RANGE_TYPES = {
    IndexedValueType.KEYWORD,
    IndexedValueType.INT,
    IndexedValueType.DOUBLE,
    IndexedValueType.DATETIME,
    IndexedValueType.BOOL,
}


def index_name(name: str) -> str:
    return "exec_sa_" + hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


def ensure_index(name: str) -> None:
    """Create the attribute's btree; concurrently unless inside a transaction (tests, migrations)."""
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    # ``name`` matched NAME_PATTERN (letters, digits, underscore), so it is safe as a literal.
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX {concurrently}IF NOT EXISTS {index_name(name)} "
            f"ON {_TABLE} (namespace_id, (search_attributes -> '{name}'), run_id)"
        )


def drop_index(name: str) -> None:
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {index_name(name)}")


def list_attributes(namespace: Namespace) -> dict[str, dict[str, str]]:
    """``{"system": {name: type}, "custom": {name: type}}``, as Temporal's ListSearchAttributes."""
    custom = SearchAttribute.objects.filter(namespace=namespace).order_by("name")
    return {
        "system": {name: str(kind) for name, kind in SYSTEM_ATTRIBUTES.items()},
        "custom": {row.name: row.type for row in custom},
    }


def add_attribute(namespace: Namespace, name: str, kind: str) -> bool:
    """Register ``name`` with type ``kind``; True if new, False if already there with that type."""
    if kind not in IndexedValueType.values:
        raise invalid(f"unknown search attribute type {kind!r}", known=IndexedValueType.values)
    try:
        check_name(name)
    except BadSearchAttributes as exc:
        raise invalid(str(exc)) from None
    with transaction.atomic():
        row, created = SearchAttribute.objects.select_for_update().get_or_create(
            namespace=namespace, name=name, defaults={"type": kind}
        )
    if not created and row.type != kind:
        raise ChronicleError(
            ErrorCode.CONFLICT, f"search attribute {name!r} is already registered as {row.type}"
        )
    if kind in _RANGE_TYPES:
        ensure_index(name)
    return created


def remove_attribute(namespace: Namespace, name: str) -> None:
    """Unregister ``name``: it can no longer be set or queried; stored values stay on the runs."""
    deleted, _ = SearchAttribute.objects.filter(namespace=namespace, name=name).delete()
    if not deleted:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"search attribute {name!r} is not registered")
    if not SearchAttribute.objects.filter(name=name).exists():
        drop_index(name)
