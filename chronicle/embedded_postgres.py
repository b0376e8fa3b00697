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
``NAME=postgres``. That form is django-environ's only: libpq reads the same URL as a
database named after the path, so a raw psycopg connection takes a conninfo string
(:func:`chronicle.db.listen_conninfo`) instead.

Whoever runs the server owns stopping it: ``start_dev`` on Ctrl-C and the test session
at its end call :func:`stop_if_unused`, which stops the server unless someone else is
still connected (``make run`` and ``make test`` at once share one server).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import signal
import time
import warnings
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import psycopg

STOP_TIMEOUT_SECONDS = 15.0
SESSIONS_GRACE_SECONDS = 3.0
KEPT = "left the embedded PostgreSQL running"

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


def settings_database_url(db: Mapping[str, Any]) -> str:
    """A django-environ ``DATABASE_URL`` for a ``DATABASES`` entry, for child processes.

    Both configurations: a unix-socket server (the embedded one) and a TCP one, with its
    password if it has one.
    """
    name = str(db.get("NAME") or DEFAULT_DATABASE)
    user = str(db.get("USER") or DEFAULT_USER)
    host = str(db.get("HOST") or "")
    port = db.get("PORT") or ""
    password = str(db.get("PASSWORD") or "")
    if host.startswith("/"):
        if password:
            raise ValueError("a password-protected unix-socket database needs DATABASE_URL set")
        return socket_database_url(host, user=user, database=name, port=port or None)
    auth = quote(user, safe="")
    if password:
        auth += ":" + quote(password, safe="")
    netloc = f"{auth}@{host or '127.0.0.1'}"
    if port:
        netloc += f":{int(port)}"
    return f"postgresql://{netloc}/{quote(name, safe='')}"


def embedded_database_url(data_dir: pathlib.Path) -> str:
    """Start (or reuse) the embedded PostgreSQL in ``data_dir`` and return its URL.

    The folder is created if needed. The server is left running when this
    process exits so that sibling and later processes share it.
    """
    with warnings.catch_warnings():
        # platformdirs warns on every start when XDG_RUNTIME_DIR is unset (containers, CI)
        # and falls back to /tmp; the fallback is fine for the lock file pgserver keeps there.
        warnings.simplefilter("ignore")
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


def postmaster_pid(data_dir: pathlib.Path) -> int | None:
    """The pid of the server running on ``data_dir``, or None when none runs."""
    try:
        pid = int((pathlib.Path(data_dir) / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user (pgserver's, when started by root)
        return True
    return True


def other_sessions(conninfo: str) -> list[str]:
    """The application names of the client sessions on the server besides this one."""
    with psycopg.connect(conninfo, connect_timeout=5, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT coalesce(nullif(application_name, ''), usename, '?') FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [str(row[0]) for row in rows]


def stop_server(data_dir: pathlib.Path, timeout: float = STOP_TIMEOUT_SECONDS) -> bool:
    """Stop the server on ``data_dir`` (fast shutdown: sessions are ended, data is safe).

    True once no server runs there. SIGINT is PostgreSQL's fast shutdown; a server that
    has not exited by ``timeout`` gets SIGQUIT (immediate shutdown, recovered at the next
    start) rather than being left behind.
    """
    pid = postmaster_pid(data_dir)
    if pid is None:
        return True
    for signum, wait in ((signal.SIGINT, timeout), (signal.SIGQUIT, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.1)
    return not _alive(pid)


def stop_if_unused(data_dir: pathlib.Path, conninfo: str) -> str:
    """Stop the embedded server unless other sessions still use it; say what was done.

    Called once this process has closed its own connections. A server another process
    still uses (``make test`` beside ``make run``) is left running for that one.
    """
    if postmaster_pid(data_dir) is None:
        return "the embedded PostgreSQL is not running"
    # The backends of processes that just exited linger a moment; give them time to end.
    deadline = time.monotonic() + SESSIONS_GRACE_SECONDS
    while True:
        try:
            others = other_sessions(conninfo)
        except psycopg.Error as exc:
            others = []
            logging.getLogger(__name__).warning("could not list sessions before stopping: %s", exc)
        if not others or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if others:
        names = ", ".join(sorted(set(others)))
        return f"{KEPT}: {len(others)} other session(s) use it ({names})"
    if stop_server(data_dir):
        return f"stopped the embedded PostgreSQL in {data_dir}"
    return f"could not stop the embedded PostgreSQL in {data_dir} (pid {postmaster_pid(data_dir)})"
