"""Django's PostgreSQL backend, its connection pool checking connections the cheap way.

Django builds the pool itself and gives it either no check or an empty query on every
hand-out (``CONN_HEALTH_CHECKS``); this backend gives it :func:`check_pooled` instead,
which sends the query only when a connection may be dead (see ``chronicle.pool_checks``).
Everything else is Django's backend as it is.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base

from chronicle import pool_checks


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool  # type: ignore[misc]  # (the stubs predate Django's pool)
        if pool is not None and self.settings_dict.get("CHRONICLE_POOL_CHECKS"):
            # Django gives the pool its check when it builds it (before the pool opens).
            pool._check = pool_checks.check_pooled
        return pool

    def _close(self) -> None:
        """Hand the connection back to the pool, noting when (the pool's own ``reset``
        hook would move every return onto its worker thread)."""
        if self.connection is not None:
            pool_checks.remember_return(self.connection)
        super()._close()  # type: ignore[misc]
