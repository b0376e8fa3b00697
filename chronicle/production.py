"""The settings' refusals: what a deployment must not start with.

``chronicle.settings`` calls these while it reads the environment, so an unsafe setup
stops every process (frontend, daemons, ``manage.py``) at once, with a message naming the
variable to set, instead of running with a key anyone can read in the source.

This module imports no Django setting (it runs while they are being read).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

# Host names that reach only this machine: ALLOWED_HOSTS' default, and where a database
# counts as a development one.
LOCAL_HOSTS = ("127.0.0.1", "localhost")
_LOOPBACK = {*LOCAL_HOSTS, "::1", "[::1]", "testserver"}

# Known to everyone who reads this file, so never fit to sign anything of a real
# deployment: task tokens, page tokens, sessions and CSRF tokens are signed with the key.
# The "django-insecure-" prefix makes `manage.py check --deploy` flag it too (security.W009).
DEVELOPMENT_SECRET_KEY = "django-insecure-chronicle-development-only-secret-key-change-me"

NEW_KEY_HINT = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"


def secret_key(configured: str, *, debug: bool, database_host: str) -> str:
    """The key to sign with: ``SECRET_KEY`` when set, else the development key where that
    is safe, else a refusal naming the variable.

    The development key is safe where nothing outside this machine can be reached through
    it: with ``CHRONICLE_DEBUG`` on, or on a PostgreSQL of this machine (the embedded
    server's socket folder, another unix socket, or loopback) —
    what every development machine, test run and benchmark here uses. A deployment whose
    database lives elsewhere must set ``SECRET_KEY``: a production example
    (``platform/env.example``) sets it, and ``manage.py check --deploy`` flags the
    development key wherever it is in use.
    """
    if configured:
        return configured
    if debug or _on_this_machine(database_host):
        return DEVELOPMENT_SECRET_KEY
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. Chronicle signs task tokens, sessions and CSRF tokens with it, "
        "so a deployment must set it to a long random string kept private, the same on every "
        f"process (e.g. {NEW_KEY_HINT}); see platform/env.example. "
        "(A development machine may set CHRONICLE_DEBUG=true instead.)"
    )


def require_safe_debug(debug: bool, allowed_hosts: list[str]) -> None:
    """Refuse ``CHRONICLE_DEBUG`` on a server that answers to a public host name: debug
    pages show settings, SQL and stack frames to whoever asks."""
    public = [host for host in allowed_hosts if host.split(":")[0] not in _LOOPBACK]
    if debug and public:
        raise ImproperlyConfigured(
            f"CHRONICLE_DEBUG is on while ALLOWED_HOSTS names {', '.join(public)}: debug pages would "
            "show settings and stack frames to anyone. Turn CHRONICLE_DEBUG off in production."
        )


def _on_this_machine(host: str) -> bool:
    """Whether a database host reaches only this machine: none (libpq's default socket), a
    unix-socket folder (the embedded server's) or a loopback address."""
    return not host or host.startswith("/") or host in _LOOPBACK
