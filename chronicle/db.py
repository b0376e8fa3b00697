"""Connection details for the dedicated LISTEN connections, and a reachability check."""

from __future__ import annotations

import psycopg
from django.core.management.base import CommandError
from django.db import connection

REACHABLE_TIMEOUT_SECONDS = 5
# The server answered but is busy (out of connection slots) or still starting: it is
# reachable, and the connection pool's wait for a free slot is the right behaviour.
# libpq reports these at connect time as text only (no SQLSTATE).
BUSY_SERVER_MESSAGES = (
    "too many clients",
    "remaining connection slots are reserved",
    "the database system is starting up",
)


def listen_conninfo() -> str:
    """A libpq conninfo string for the default database, for a raw psycopg connection."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    parts = []
    for key, value in params.items():
        if value in (None, "") or key in ("prepare_threshold", "application_name"):
            continue
        if key == "database":
            key = "dbname"
        parts.append(f"{key}='{value}'")
    return " ".join(parts)


def require_reachable_database() -> None:
    """Raise one clear CommandError when the configured PostgreSQL cannot be reached.

    Commands call this before the first query: the connection pool would otherwise
    retry for its whole timeout (30 s), logging a warning on every attempt, before
    failing with a less direct error. A server that answers "too many clients" or
    "starting up" counts as reachable: that is a wait, not a misconfiguration.
    """
    settings_dict = connection.settings_dict
    where = f"{settings_dict.get('HOST') or 'localhost'}:{settings_dict.get('PORT') or 5432}"
    where += f"/{settings_dict.get('NAME')}"
    try:
        psycopg.connect(listen_conninfo(), connect_timeout=REACHABLE_TIMEOUT_SECONDS).close()
    except psycopg.Error as exc:
        if any(message in str(exc) for message in BUSY_SERVER_MESSAGES):
            return
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CommandError(
            f"cannot reach PostgreSQL at {where} ({reason}); check DATABASE_URL and that the server runs"
        ) from None
