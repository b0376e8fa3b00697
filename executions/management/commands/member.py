"""``manage.py member grant|list|revoke``: who may use a namespace's UI, and as what.

``grant --new-user`` creates the account first and prints its one-time password once.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from executions import provisioning
from executions.management.commands import _provisioning as cli
from namespaces.models import MemberRole


class Command(BaseCommand):
    help = "Grant, list or revoke a namespace's members."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="grant|list|revoke")
        grant = verbs.add_parser("grant", help="give a user a role (or change it)")
        cli.add_namespace(grant)
        grant.add_argument("username")
        grant.add_argument("--role", required=True, choices=MemberRole.values)
        grant.add_argument(
            "--new-user", action="store_true", help="create the account, with a one-time password"
        )
        grant.add_argument("--email", default="")
        cli.add_common(grant)
        listing = verbs.add_parser("list", help="the members and their roles")
        cli.add_namespace(listing)
        cli.add_common(listing, reason=False)
        revoke = verbs.add_parser("revoke", help="remove a user from the namespace")
        cli.add_namespace(revoke)
        revoke.add_argument("username")
        cli.add_common(revoke)

    def handle(self, *args: Any, **options: Any) -> None:
        ns = cli.namespace(options["namespace"])
        caller = cli.caller(options)
        verb = options["verb"]
        if verb == "list":
            rows = provisioning.member_rows(ns)
            cli.emit(self, options, {"members": rows}, cli.table(rows, ("username", "role")))
        elif verb == "grant" and options["new_user"]:
            username, password = cli.attempt(
                lambda: provisioning.member_create_user(
                    caller, ns, options["username"], options["role"], options["email"]
                )
            )
            value = {"member": {"username": username, "role": options["role"]}, "one_time_password": password}
            lines = [
                f"user {username} created as {options['role']} of {ns.name}; one-time password, shown once:",
                password,
            ]
            cli.emit(self, options, value, lines)
        else:
            role = options["role"] if verb == "grant" else None
            changed = cli.attempt(lambda: provisioning.member_set(caller, ns, options["username"], role))
            cli.emit(self, options, {"changed": changed}, cli.changes(changed))
