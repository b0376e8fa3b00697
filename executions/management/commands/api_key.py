"""``manage.py api_key create|list|revoke|rotate``: a namespace's API keys.

A created or rotated key is printed once (its hash is all the server keeps).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from executions import provisioning
from executions.management.commands import _provisioning as cli
from namespaces.models import Role

COLUMNS = ("id", "name", "prefix", "roles", "state", "created_at", "last_used_at", "expires_at")


def _expiry(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    when = parse_datetime(raw)
    if when is None or when.tzinfo is None:
        raise CommandError(
            f"--expires-at takes an ISO 8601 time with its zone, e.g. 2027-01-31T00:00:00Z, not {raw!r}"
        )
    return when


class Command(BaseCommand):
    help = "Create, list, revoke or rotate a namespace's API keys."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="create|list|revoke|rotate")
        create = verbs.add_parser("create", help="issue a key (printed once)")
        cli.add_namespace(create)
        create.add_argument("--name", required=True)
        create.add_argument("--role", action="append", required=True, choices=Role.values, dest="roles")
        create.add_argument("--expires-at", default=None, help="ISO 8601 time after which it is refused")
        cli.add_common(create)
        listing = verbs.add_parser("list", help="the namespace's keys (never the keys themselves)")
        cli.add_namespace(listing)
        cli.add_common(listing, reason=False)
        revoke = verbs.add_parser("revoke", help="refuse a key from now on")
        cli.add_namespace(revoke)
        revoke.add_argument("key_id", type=int)
        cli.add_common(revoke)
        rotate = verbs.add_parser("rotate", help="a new key now; the old one expires after a grace period")
        cli.add_namespace(rotate)
        rotate.add_argument("key_id", type=int)
        rotate.add_argument(
            "--grace-seconds", type=int, default=86_400, help="how long the old key still works"
        )
        cli.add_common(rotate)

    def handle(self, *args: Any, **options: Any) -> None:
        ns = cli.namespace(options["namespace"])
        caller = cli.caller(options)
        verb = options["verb"]
        if verb == "create":
            expires_at = _expiry(options["expires_at"])
            key, raw = cli.attempt(
                lambda: provisioning.api_key_create(caller, ns, options["name"], options["roles"], expires_at)
            )
            view = provisioning.key_view(key)
            cli.emit(
                self,
                options,
                {"key": view, "api_key": raw},
                [f"key {key.pk} ({key.name}) created; shown once:", raw],
            )
        elif verb == "list":
            rows = provisioning.key_rows(ns)
            shown = [{**row, "roles": ",".join(row["roles"])} for row in rows]
            cli.emit(self, options, {"api_keys": rows}, cli.table(shown, COLUMNS))
        elif verb == "revoke":
            key = cli.attempt(lambda: provisioning.api_key_revoke(caller, ns, options["key_id"]))
            cli.emit(self, options, provisioning.key_view(key), [f"key {key.pk} ({key.name}) revoked"])
        else:
            grace = timedelta(seconds=options["grace_seconds"])
            old, new, raw = cli.attempt(
                lambda: provisioning.api_key_rotate(caller, ns, options["key_id"], grace)
            )
            value = {"old_key": provisioning.key_view(old), "key": provisioning.key_view(new), "api_key": raw}
            lines = [
                f"key {old.pk} expires at {old.expires_at:%Y-%m-%d %H:%M:%S %Z}; new key {new.pk} (once):",
                raw,
            ]
            cli.emit(self, options, value, lines)
