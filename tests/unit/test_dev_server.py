"""The development server's helpers: database URLs for both configurations, the busy-port
check, the quiet access log, and stopping an embedded server only when no one uses it."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path

import environ
import pytest

from chronicle.dev_asgi import QuietLongPolls
from chronicle.embedded_postgres import postmaster_pid, settings_database_url, stop_server
from chronicle.launcher import DEV_APP, stack_processes
from chronicle.management.commands.start_dev import port_problem


@pytest.mark.parametrize(
    "db",
    [
        {"NAME": "test_postgres", "USER": "postgres", "HOST": "/srv/chronicle/pg sock", "PORT": 5432},
        {"NAME": "test_postgres", "USER": "postgres", "HOST": "/tmp/pg", "PORT": 5433},
        {"NAME": "test_fh", "USER": "postgres", "HOST": "127.0.0.1", "PORT": 5432},
        {"NAME": "test_fh", "USER": "app", "PASSWORD": "p@ss:word/", "HOST": "db.internal", "PORT": 6432},
    ],
    ids=["embedded-socket", "socket-other-port", "tcp", "tcp-password"],
)
def test_a_database_url_names_the_same_server_and_database_in_both_configurations(
    db: dict[str, object],
) -> None:
    parsed = environ.Env.db_url_config(settings_database_url(db))
    assert (parsed["NAME"], parsed["USER"], parsed["HOST"]) == (db["NAME"], db["USER"], db["HOST"])
    assert int(parsed.get("PORT") or parsed.get("OPTIONS", {}).get("port") or 5432) == db["PORT"]
    assert parsed.get("PASSWORD", "") == db.get("PASSWORD", "")


def test_a_password_on_a_socket_database_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="DATABASE_URL"):
        settings_database_url({"NAME": "x", "USER": "u", "PASSWORD": "p", "HOST": "/tmp/pg"})


def test_a_busy_port_is_reported_and_a_free_one_is_not() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_problem(port) is not None
    assert port_problem(port) is None


def test_the_dev_access_log_leaves_out_long_polls_only() -> None:
    quiet = QuietLongPolls()

    def kept(path: str) -> bool:
        args = ("127.0.0.1:5555", "POST", path, "1.1", 200)
        return quiet.filter(
            logging.LogRecord("uvicorn.access", 20, "", 0, '%s - "%s %s HTTP/%s" %d', args, None)
        )

    assert not kept("/api/v1/namespaces/default/task-queues/demo/workflow-tasks/poll")
    assert not kept("/api/v1/namespaces/default/task-queues/demo/activity-tasks/poll")
    assert not kept("/api/v1/namespaces/default/workflows/w/history?wait_new_event=true")
    assert kept("/api/v1/namespaces/default/workflows/w/history")
    assert kept("/api/v1/namespaces/default/task-queues/demo/workflow-tasks/complete")
    assert kept("/ns/default/")


def test_the_dev_stack_serves_the_dev_application() -> None:
    assert DEV_APP in stack_processes(7243, app=DEV_APP)[0].argv


def test_stopping_a_server_that_is_gone_or_never_ran_succeeds(tmp_path: Path) -> None:
    assert postmaster_pid(tmp_path) is None and stop_server(tmp_path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    (tmp_path / "postmaster.pid").write_text(gone.stdout.decode())
    assert postmaster_pid(tmp_path) is None and stop_server(tmp_path)


def test_stop_server_ends_the_postmaster_with_a_fast_shutdown(tmp_path: Path) -> None:
    """SIGINT is PostgreSQL's fast shutdown; a stand-in that exits on it is stopped."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # The postmaster is no child of ours (pg_ctl detaches it): reap the stand-in at once.
    reaper = threading.Thread(target=child.wait, daemon=True)
    reaper.start()
    try:
        (tmp_path / "postmaster.pid").write_text(f"{child.pid}\n{tmp_path}\n")
        assert postmaster_pid(tmp_path) == child.pid
        assert stop_server(tmp_path, timeout=5)
        reaper.join(timeout=5)
        assert child.returncode not in (None, 0)
    finally:
        if child.returncode is None:
            child.kill()
        reaper.join(timeout=5)
