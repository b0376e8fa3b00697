"""``manage.py operator_key create|list|revoke``: superusers' keys for the provisioning API.

After ``manage.py createsuperuser``, ``operator_key create --username <it>`` prints a
``chrop_...`` key once; sent as ``Authorization: Bearer``, it creates and manages
namespaces over REST (see docs/provisioning.md).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from executions.management.commands import _provisioning as cli
from executions.management.commands.api_key import _expiry
from namespaces import operator_keys

COLUMNS = ("id", "username", "name", "prefix", "created_at", "last_used_at", "revoked_at", "expires_at")


class Command(BaseCommand):
    help = "Create, list or revoke operator keys (a superuser's key for the provisioning API)."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="create|list|revoke")
        create = verbs.add_parser("create", help="issue a key for a superuser (printed once)")
        create.add_argument("--username", required=True, help="an active superuser")
        create.add_argument("--name", default="operator", help="what the key is for")
        create.add_argument("--expires-at", default=None, help="ISO 8601 time after which it is refused")
        cli.add_common(create, reason=False)
        cli.add_common(verbs.add_parser("list", help="every operator key (never the keys)"), reason=False)
        revoke = verbs.add_parser("revoke", help="refuse a key from now on")
        revoke.add_argument("key_id", type=int)
        cli.add_common(revoke, reason=False)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["verb"] == "create":
                key, raw = operator_keys.operator_key_issue(
                    username=options["username"],
                    name=options["name"],
                    expires_at=_expiry(options["expires_at"]),
                )
                value = {"id": key.pk, "prefix": key.prefix, "operator_key": raw}
                cli.emit(
                    self,
                    options,
                    value,
                    [f"operator key {key.pk} for {options['username']}; shown once:", raw],
                )
            elif options["verb"] == "list":
                rows = operator_keys.operator_key_rows()
                cli.emit(self, options, {"operator_keys": rows}, cli.table(rows, COLUMNS))
            else:
                key = operator_keys.operator_key_revoke(options["key_id"])
                cli.emit(
                    self,
                    options,
                    {"id": key.pk, "revoked_at": key.revoked_at},
                    [f"operator key {key.pk} revoked"],
                )
        except ValidationError as error:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())
            ) from None
