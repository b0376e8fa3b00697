"""``manage.py queue_limit set|remove|list``: per-task-queue dispatch limits."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from executions import provisioning
from executions.management.commands import _provisioning as cli


class Command(BaseCommand):
    help = "Set, remove or list a namespace's task-queue dispatch limits."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="set|remove|list")
        set_ = verbs.add_parser("set", help="limit a queue's dispatches per second (0: no limit)")
        cli.add_namespace(set_)
        set_.add_argument("task_queue")
        set_.add_argument("dispatch_rps", type=float)
        cli.add_common(set_)
        remove = verbs.add_parser("remove", help="remove a queue's limit")
        cli.add_namespace(remove)
        remove.add_argument("task_queue")
        cli.add_common(remove)
        listing = verbs.add_parser("list", help="the namespace's queue limits")
        cli.add_namespace(listing)
        cli.add_common(listing, reason=False)

    def handle(self, *args: Any, **options: Any) -> None:
        ns = cli.namespace(options["namespace"])
        if options["verb"] == "list":
            rows = provisioning.queue_limit_rows(ns)
            cli.emit(
                self, options, {"task_queue_limits": rows}, cli.table(rows, ("task_queue", "dispatch_rps"))
            )
            return
        rps = options["dispatch_rps"] if options["verb"] == "set" else None
        changed = cli.attempt(
            lambda: provisioning.queue_limit_set(cli.caller(options), ns, options["task_queue"], rps)
        )
        cli.emit(self, options, {"changed": changed}, cli.changes(changed))
