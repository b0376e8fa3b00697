"""``manage.py namespace create|update|list|describe|delete``: an operator's namespaces.

Settings are given as ``--set name=value`` (the names ``namespace describe`` lists) and
checked as the settings pages and the REST API check them.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from executions import provisioning
from executions.management.commands import _provisioning as cli
from executions.provisioning_schemas import NamespaceSettingsSerializer


def _settings(pairs: list[str]) -> dict[str, Any]:
    """``name=value`` pairs, typed and bounded by the namespace's fields."""
    raw: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"--set takes name=value, not {pair!r}")
        raw[name.strip()] = value
    unknown = sorted(set(raw) - set(provisioning.SETTINGS))
    if unknown:
        raise CommandError(
            f"not a namespace setting: {', '.join(unknown)} (see: {', '.join(provisioning.SETTINGS)})"
        )
    body = NamespaceSettingsSerializer(data=raw)
    if not body.is_valid():
        raise CommandError(
            "; ".join(f"{name}: {' '.join(map(str, msgs))}" for name, msgs in body.errors.items())
        )
    return body.settings()


def _describe_lines(view: dict[str, Any]) -> list[str]:
    lines = [
        f"name: {view['name']}",
        f"id: {view['id']}",
        f"created_at: {view['created_at']:%Y-%m-%d %H:%M:%S %Z}",
    ]
    lines += [f"{name}: {value}" for name, value in view["settings"].items()]
    lines += [f"active_api_keys: {view['active_api_keys']}", f"members: {view['members']}"]
    lines += [
        f"task queue limit: {row['task_queue']} {row['dispatch_rps']:g}/s"
        for row in view["task_queue_limits"]
    ]
    return lines


class Command(BaseCommand):
    help = "Create, change, list, describe or delete namespaces (tenants)."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(
            dest="verb", required=True, metavar="create|update|list|describe|delete"
        )
        for verb in ("create", "update"):
            sub = verbs.add_parser(verb, help=f"{verb} a namespace")
            sub.add_argument("name")
            sub.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE")
            cli.add_common(sub)
        cli.add_common(verbs.add_parser("list", help="list every namespace"), reason=False)
        describe = verbs.add_parser("describe", help="a namespace's settings, keys, members and limits")
        describe.add_argument("name")
        cli.add_common(describe, reason=False)
        delete = verbs.add_parser("delete", help="delete a namespace and everything it holds")
        delete.add_argument("name")
        delete.add_argument("--confirm", default=None, help="the name again (asked for when omitted)")
        cli.add_common(delete)

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['verb']}")(options)

    def _create(self, options: dict[str, Any]) -> None:
        values = _settings(options["set"])
        ns = cli.attempt(lambda: provisioning.namespace_create(cli.caller(options), options["name"], values))
        view = provisioning.namespace_view(ns)
        cli.emit(self, options, view, [f"namespace {ns.name} created", *_describe_lines(view)])

    def _update(self, options: dict[str, Any]) -> None:
        ns = cli.namespace(options["name"])
        values = _settings(options["set"])
        if not values:
            raise CommandError("update needs at least one --set name=value")
        changed = cli.attempt(lambda: provisioning.namespace_update(cli.caller(options), ns, values))
        cli.emit(self, options, {"changed": changed}, cli.changes(changed))

    def _list(self, options: dict[str, Any]) -> None:
        rows = provisioning.namespace_rows()
        cli.emit(self, options, {"namespaces": rows}, cli.table(rows, ("name", "description", "created_at")))

    def _describe(self, options: dict[str, Any]) -> None:
        view = provisioning.namespace_view(cli.namespace(options["name"]))
        cli.emit(self, options, view, _describe_lines(view))

    def _delete(self, options: dict[str, Any]) -> None:
        ns = cli.namespace(options["name"])
        confirm = options["confirm"]
        if confirm is None:
            if not sys.stdin.isatty():
                raise CommandError("pass --confirm <name>: deleting removes every run, key and member of it")
            confirm = input(
                f"Deleting {ns.name} removes all its runs, history, keys and members. Type its name: "
            )
        removed = cli.attempt(lambda: provisioning.namespace_delete(cli.caller(options), ns, confirm.strip()))
        total = sum(removed.values())
        cli.emit(
            self,
            options,
            {"deleted": ns.name, "removed": removed},
            [f"namespace {ns.name} deleted ({total} rows)"],
        )
