"""``manage.py migrate``, failing at once with one message when PostgreSQL is unreachable."""

from __future__ import annotations

from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrate

from chronicle.db import require_reachable_database


class Command(DjangoMigrate):
    def handle(self, *args: Any, **options: Any) -> None:
        require_reachable_database()
        super().handle(*args, **options)
