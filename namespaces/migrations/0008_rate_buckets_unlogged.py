"""Rate buckets live in an unlogged table.

Every API call takes a token from its namespace's bucket: in a logged table that was a
durable commit per call, each waiting for its WAL flush while holding the namespace's one
bucket row, so a namespace's calls queued behind each other's flushes. A bucket needs no
durability: after a PostgreSQL crash the table is empty and every bucket starts full again.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def _persistence(word: str) -> Any:
    def alter(apps: Any, schema_editor: Any) -> None:
        table = apps.get_model("namespaces", "RateBucket")._meta.db_table
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} SET {word}")

    return alter


class Migration(migrations.Migration):
    dependencies = [
        ("namespaces", "0007_api_key_expiry_operator_keys"),
    ]

    operations = [
        migrations.RunPython(_persistence("UNLOGGED"), _persistence("LOGGED")),
    ]
