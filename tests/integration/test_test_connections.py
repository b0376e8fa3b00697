"""Every connection a test opens reaches the test database, against DATABASE_URL or the
embedded server's socket alike (CI runs the suite both ways)."""

from __future__ import annotations

from typing import Any

import environ
import psycopg
import pytest
from django.db import connection

from tests.conftest import database_url


@pytest.mark.django_db
def test_the_other_connection_is_a_second_session_on_the_test_database(
    other_connection: psycopg.Connection[Any],
) -> None:
    row = other_connection.execute("SELECT current_database(), pg_backend_pid()").fetchone()
    assert row is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (own_pid,) = cursor.fetchone()
    assert row[0] == connection.settings_dict["NAME"] and row[0].startswith("test_")
    assert row[1] != own_pid


def test_a_child_process_url_names_the_test_database() -> None:
    parsed = environ.Env.db_url_config(database_url())
    settings_dict = connection.settings_dict
    assert parsed["NAME"] == settings_dict["NAME"]
    assert (parsed["HOST"] or "") == (settings_dict["HOST"] or "")
