"""Rate buckets: shared by every process, and not worth a WAL flush per call."""

from __future__ import annotations

import pytest
from django.db import connection

from namespaces.models import RateBucket
from namespaces.rate_limits import request_bucket_key, take_token
from tests.factories import NamespaceFactory

pytestmark = pytest.mark.django_db


def test_the_bucket_table_is_unlogged() -> None:
    """Each API call takes a token: an unlogged table makes that commit skip the WAL flush."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relpersistence FROM pg_class WHERE oid = %s::regclass", [RateBucket._meta.db_table]
        )
        assert cursor.fetchone() == ("u",)


def test_a_bucket_refuses_once_its_burst_is_spent_and_counts_both() -> None:
    key = request_bucket_key(NamespaceFactory().id)
    waits = [take_token(key, rate=0.5, burst=3) for _ in range(5)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert all(wait > 0 for wait in waits[3:])
    bucket = RateBucket.objects.get(key=key)
    assert (bucket.granted_count, bucket.throttled_count) == (3, 2)
