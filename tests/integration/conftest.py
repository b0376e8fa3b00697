"""Fixtures the integration tests share: a namespace, a worker-and-client key of it, and
connection pools closed after the test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from namespaces.models import Namespace
from tests.factories import ApiKeyFactory, NamespaceFactory


@pytest.fixture
def namespace() -> Namespace:
    return NamespaceFactory()


@pytest.fixture
def authorization(namespace: Namespace) -> str:
    """The ``Authorization`` header of a key of ``namespace`` (client and worker roles)."""
    return ApiKeyFactory(namespace=namespace).authorization


@pytest.fixture
def pools() -> Iterator[list[ConnectionPool[Any]]]:
    """Connection pools a test opens, closed after it."""
    made: list[ConnectionPool[Any]] = []
    yield made
    for pool in made:
        pool.close(timeout=1)
