"""A development PostgreSQL started from the ``pgserver`` wheel.

When no ``DATABASE_URL`` is configured, :mod:`chronicle.settings` calls
:func:`embedded_database_url` to start (or reuse) a private PostgreSQL whose
data directory lives under ``.chronicle/pgdata``. The server is started with
``cleanup_mode=None`` so it keeps running after the Python process that started
it exits; every later process (the frontend, the shard owner, the test run)
reuses the same server by pointing at the same data directory.

The returned URL names the unix-socket directory as a percent-encoded path
segment (``postgresql://postgres@/%2Fpath%2Fto%2Fsockets/postgres``), which is
the form django-environ's ``db_url_config`` turns into ``HOST=<socket dir>`` and
``NAME=postgres``.
"""

from __future__ import annotations

import logging
import pathlib
from urllib.parse import quote

DEFAULT_USER = "postgres"
DEFAULT_DATABASE = "postgres"


def socket_database_url(
    socket_dir: str | pathlib.Path,
    *,
    user: str = DEFAULT_USER,
    database: str = DEFAULT_DATABASE,
    port: int | str | None = None,
) -> str:
    """Build a django-environ compatible URL for a server on a unix socket.

    ``port`` only selects the socket file name (``.s.PGSQL.<port>``); a
    non-default one is passed as the ``port`` option (kept out of the path so
    the parsed ``HOST`` stays the directory).
    """
    host = quote(str(socket_dir), safe="")
    url = f"postgresql://{quote(user, safe='')}@/{host}/{quote(database, safe='')}"
    if port and int(port) != 5432:
        url += f"?port={int(port)}"
    return url


def embedded_database_url(data_dir: pathlib.Path) -> str:
    """Start (or reuse) the embedded PostgreSQL in ``data_dir`` and return its URL.

    The folder is created if needed. The server is left running when this
    process exits so that sibling and later processes share it.
    """
    import pgserver  # imported lazily: only development setups need it

    # pgserver logs routine INFO lines, including from an atexit hook that runs
    # after pytest has closed its captured streams ("--- Logging error ---").
    # Keep only its warnings unless someone configured the logger explicitly.
    pg_logger = logging.getLogger("pgserver")
    if pg_logger.level == logging.NOTSET:
        pg_logger.setLevel(logging.WARNING)

    data_dir = pathlib.Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(data_dir), cleanup_mode=None)  # type: ignore[attr-defined]
    info = server.get_postmaster_info()
    if info.socket_dir is not None:
        return socket_database_url(info.socket_dir, port=info.port)
    if info.hostname is not None and info.port is not None:
        # Platforms without unix sockets (Windows) listen on TCP instead.
        return f"postgresql://{DEFAULT_USER}@{info.hostname}:{info.port}/{DEFAULT_DATABASE}"
    raise RuntimeError(f"embedded PostgreSQL in {data_dir} reports neither socket nor port")
