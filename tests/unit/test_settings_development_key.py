"""Where a process's SECRET_KEY comes from when nobody set one: ``manage.py`` gives
``start_dev``, and commands on the embedded development database, the checkout's own key
(made once, mode 0600); a run of tests or benchmarks makes one of its own; every other
process is refused by the settings."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from chronicle.launcher import ensure_secret_key
from chronicle.production import DEVELOPMENT_SECRET_KEY, development_key, supply_development_key

REMOTE = "postgres://chronicle@db.example.internal:5432/chronicle"
LOOPBACK = "postgres://postgres@127.0.0.1:5432/chronicle"


def test_start_dev_makes_the_checkouts_key_once_private_and_reuses_it(tmp_path: Path) -> None:
    environ: dict[str, str] = {}
    supply_development_key("start_dev", environ, tmp_path)
    key_file = tmp_path / ".chronicle" / "secret_key"
    assert environ["SECRET_KEY"] == key_file.read_text().strip()
    assert len(environ["SECRET_KEY"]) >= 50 and environ["SECRET_KEY"] != DEVELOPMENT_SECRET_KEY
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [path.name for path in key_file.parent.iterdir()] == ["secret_key"]  # no draft left

    again: dict[str, str] = {}
    supply_development_key("start_dev", again, tmp_path)
    assert again["SECRET_KEY"] == environ["SECRET_KEY"]  # sessions and tokens survive a restart


def test_start_dev_gets_the_key_on_any_database_and_in_the_state_folder_it_is_given(tmp_path: Path) -> None:
    state = tmp_path / "state"
    environ = {"DATABASE_URL": LOOPBACK, "CHRONICLE_STATE_DIR": str(state)}
    supply_development_key("start_dev", environ, tmp_path)
    assert environ["SECRET_KEY"] == (state / "secret_key").read_text().strip()
    assert not (tmp_path / ".chronicle").exists()


@pytest.mark.parametrize("url", [LOOPBACK, REMOTE])
def test_other_commands_on_a_database_url_get_no_key(tmp_path: Path, url: str) -> None:
    environ = {"DATABASE_URL": url}
    for command in ("check", "run_shard_owner", "migrate", ""):
        supply_development_key(command, environ, tmp_path)
    assert environ == {"DATABASE_URL": url}  # so the settings refuse to start
    assert not (tmp_path / ".chronicle").exists()


def test_commands_on_the_embedded_database_share_the_checkouts_key(tmp_path: Path) -> None:
    served: dict[str, str] = {}
    supply_development_key("start_dev", served, tmp_path)
    shell = {"DATABASE_URL": ""}  # empty counts as unset, as in the settings
    supply_development_key("createsuperuser", shell, tmp_path)
    assert shell["SECRET_KEY"] == served["SECRET_KEY"]


def test_a_key_already_set_wins(tmp_path: Path) -> None:
    environ = {"SECRET_KEY": "k" * 60}
    supply_development_key("start_dev", environ, tmp_path)
    assert environ == {"SECRET_KEY": "k" * 60}
    assert not (tmp_path / ".chronicle").exists()


def test_processes_starting_at_once_all_read_the_one_key(tmp_path: Path) -> None:
    start = threading.Barrier(8)
    keys: list[str] = []

    def read() -> None:
        start.wait()
        keys.append(development_key(tmp_path))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8 and set(keys) == {(tmp_path / "secret_key").read_text().strip()}
    assert [path.name for path in tmp_path.iterdir()] == ["secret_key"]


def test_an_empty_key_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "secret_key").write_text("\n")
    with pytest.raises(ImproperlyConfigured, match=r"secret_key is empty: delete it"):
        development_key(tmp_path)


def test_a_run_of_its_own_makes_one_key_for_all_its_processes() -> None:
    environ: dict[str, str] = {"SECRET_KEY": ""}
    key = ensure_secret_key(environ)
    assert len(key) >= 50 and environ["SECRET_KEY"] == key
    assert ensure_secret_key(environ) == key  # set once: every child inherits the same
    assert ensure_secret_key({"SECRET_KEY": "given"}) == "given"
