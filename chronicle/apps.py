from __future__ import annotations

import os

from django.apps import AppConfig


class ChronicleConfig(AppConfig):
    name = "chronicle"
    verbose_name = "Chronicle"

    def ready(self) -> None:
        from chronicle import db

        # CHRONICLE_DB_ROLE=frontend|daemon bounds lock waits, statements and idle
        # transactions on this process's connections (docs/reliability.md).
        db.protect_by_role(os.environ.get(db.ROLE_VARIABLE, ""))
