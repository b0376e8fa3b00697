"""What the provisioning commands share: the caller the audit log names, the namespace
by name, refusals as ``CommandError`` and output as text or JSON.

The commands run with the database's own credentials, so they need no key: whoever may
run ``manage.py`` on a frontend host already holds the platform. The audit log names them
``manage.py (<os user>)``.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.serializers.json import DjangoJSONEncoder

from chronicle.errors import ChronicleError
from executions.provisioning import Caller
from namespaces.models import Namespace

T = TypeVar("T")


def add_common(parser: CommandParser, *, reason: bool = True) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    if reason:
        parser.add_argument("--reason", default="", help="why, for the audit log")


def add_namespace(parser: CommandParser) -> None:
    parser.add_argument("--namespace", "-n", required=True, help="the namespace's name")


def caller(options: dict[str, Any]) -> Caller:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's bare user)
        user = "unknown"
    return Caller(f"manage.py ({user})", options.get("reason") or "")


def namespace(name: str) -> Namespace:
    found = Namespace.objects.filter(name=name).first()
    if found is None:
        raise CommandError(f"namespace {name!r} not found")
    return found


@contextmanager
def refusals() -> Iterator[None]:
    """A refused operation as the command's error (exit status 1), nothing changed."""
    try:
        yield
    except ChronicleError as error:
        raise CommandError(error.message) from None


def attempt(operation: Callable[[], T]) -> T:
    with refusals():
        return operation()


def emit(command: BaseCommand, options: dict[str, Any], value: Any, text: Sequence[str]) -> None:
    """``value`` as JSON with ``--json``, else the lines of ``text``."""
    if options.get("json"):
        command.stdout.write(json.dumps(value, cls=DjangoJSONEncoder, indent=2))
        return
    for line in text:
        command.stdout.write(line)


def table(rows: list[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    """Rows as aligned text columns (empty cells as "-")."""
    cells = [[("-" if row.get(c) is None else str(row.get(c))) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return lines


def changes(changed: dict[str, Any]) -> list[str]:
    if not changed:
        return ["nothing changed"]
    return [f"{name}: {value['old']!r} -> {value['new']!r}" for name, value in changed.items()]
