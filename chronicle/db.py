"""Connection details for the dedicated LISTEN connections (frontend and daemon)."""

from __future__ import annotations

from django.db import connection


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
