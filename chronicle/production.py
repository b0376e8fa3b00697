"""The settings' refusals: what a deployment must not start with.

``chronicle.settings`` calls these while it reads the environment, so an unsafe setup
stops every process (frontend, daemons, ``manage.py``) at once, with a message naming the
variable to set, instead of running with a key anyone can read in the source. And the
key of a development checkout, which ``manage.py`` supplies before the settings are read.

This module imports no Django setting (it runs while they are being read).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import MutableMapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

# Host names that reach only this machine: ALLOWED_HOSTS' default.
LOCAL_HOSTS = ("127.0.0.1", "localhost")
_LOOPBACK = {*LOCAL_HOSTS, "::1", "[::1]", "testserver"}

# Known to everyone who reads this file, so never fit to sign anything of a real
# deployment: task tokens, page tokens, sessions and CSRF tokens are signed with the key.
# Used only with CHRONICLE_DEBUG on. The "django-insecure-" prefix makes
# `manage.py check --deploy` flag it too (security.W009).
DEVELOPMENT_SECRET_KEY = "django-insecure-chronicle-development-only-secret-key-change-me"

NEW_KEY_HINT = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"

# A development checkout's own key, in its state folder (.chronicle/ or CHRONICLE_STATE_DIR).
DEVELOPMENT_KEY_FILE = "secret_key"


def secret_key(configured: str, *, debug: bool) -> str:
    """The key to sign with: ``SECRET_KEY`` when set, the development key with
    ``CHRONICLE_DEBUG`` on, else a refusal naming the variable.

    Where the database lives says nothing about who can reach the frontend, so a
    single-host deployment with PostgreSQL on loopback is refused like any other. What
    runs Chronicle for itself brings its own key instead: ``manage.py`` gives ``start_dev``
    the checkout's (:func:`supply_development_key`), the test suite and the benchmarks
    make a random one per run (``chronicle.launcher.ensure_secret_key``).
    """
    if configured:
        return configured
    if debug:
        return DEVELOPMENT_SECRET_KEY
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. Chronicle signs task tokens, sessions and CSRF tokens with it, "
        "so a deployment must set it to a long random string kept private, the same on every "
        f"process (e.g. {NEW_KEY_HINT}); see platform/env.example. On a development machine, "
        "`make run` keeps its own in .chronicle/secret_key: give a command the same one with "
        "SECRET_KEY=$(cat .chronicle/secret_key), or set CHRONICLE_DEBUG=true."
    )


def supply_development_key(command: str, environ: MutableMapping[str, str], base_dir: Path) -> None:
    """Set ``SECRET_KEY`` for a ``manage.py`` command that runs a development Chronicle,
    before the settings read it: ``start_dev`` (``make run``), and any command when there
    is no ``DATABASE_URL`` (the embedded PostgreSQL, which only a development checkout
    has: the container image leaves it out), so ``createsuperuser`` beside a ``make run``
    uses the same key as that server.

    The key is this checkout's own: random, made on first use, kept in the state folder
    (:func:`development_key`), never a known one. ``start_dev`` hands it to the processes
    it starts through the environment. A ``SECRET_KEY`` already set wins; any other
    process without one is refused by :func:`secret_key`.
    """
    if environ.get("SECRET_KEY") or (command != "start_dev" and environ.get("DATABASE_URL")):
        return
    # Where chronicle.settings puts CHRONICLE_STATE_DIR, read the same way.
    state_dir = Path(environ.get("CHRONICLE_STATE_DIR", str(base_dir / ".chronicle")))
    environ["SECRET_KEY"] = development_key(state_dir)


def development_key(state_dir: Path) -> str:
    """The key in ``state_dir``/secret_key, made (mode 0600) when there is none yet.

    A new key is written to a file of its own and then linked into place, so two processes
    starting at once never read a half-written key, and the second keeps the first one's
    key instead of replacing it.
    """
    path = state_dir / DEVELOPMENT_KEY_FILE
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        draft = state_dir / f".{DEVELOPMENT_KEY_FILE}.{secrets.token_hex(8)}"
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(secrets.token_urlsafe(50) + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another process made it first: its key is the checkout's
        finally:
            draft.unlink()
    key = path.read_text(encoding="utf-8").strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it, and the next start makes a new key.")
    return key


def require_safe_debug(debug: bool, allowed_hosts: list[str]) -> None:
    """Refuse ``CHRONICLE_DEBUG`` on a server that answers to a public host name: debug
    pages show settings, SQL and stack frames to whoever asks."""
    public = [host for host in allowed_hosts if host.split(":")[0] not in _LOOPBACK]
    if debug and public:
        raise ImproperlyConfigured(
            f"CHRONICLE_DEBUG is on while ALLOWED_HOSTS names {', '.join(public)}: debug pages would "
            "show settings and stack frames to anyone. Turn CHRONICLE_DEBUG off in production."
        )
