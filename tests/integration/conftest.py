"""Fixtures the integration tests share: a namespace and a worker-and-client key of it."""

from __future__ import annotations

import pytest

from namespaces.models import Namespace
from tests.factories import ApiKeyFactory, NamespaceFactory


@pytest.fixture
def namespace() -> Namespace:
    return NamespaceFactory()


@pytest.fixture
def authorization(namespace: Namespace) -> str:
    """The ``Authorization`` header of a key of ``namespace`` (client and worker roles)."""
    return ApiKeyFactory(namespace=namespace).authorization
