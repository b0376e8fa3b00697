"""``manage.py search_attribute create|list|remove``: an operator's search attribute admin."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chronicle.errors import ChronicleError
from executions import search_attributes
from namespaces.models import IndexedValueType, Namespace


class Command(BaseCommand):
    help = "Create, list or remove a namespace's custom search attributes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["create", "list", "remove"])
        parser.add_argument("--namespace", required=True)
        parser.add_argument("--name", help="the attribute name (create, remove)")
        parser.add_argument("--type", choices=IndexedValueType.values, help="the attribute type (create)")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = Namespace.objects.filter(name=options["namespace"]).first()
        if namespace is None:
            raise CommandError(f"namespace {options['namespace']!r} not found")
        action, name, kind = options["action"], options["name"], options["type"]
        if action != "list" and not name:
            raise CommandError(f"{action} needs --name")
        if action == "create" and not kind:
            raise CommandError("create needs --type")
        try:
            if action == "create":
                created = search_attributes.add_attribute(namespace, name, kind)
                self.stdout.write(f"{name} ({kind}) {'added' if created else 'already registered'}")
            elif action == "remove":
                search_attributes.remove_attribute(namespace, name)
                self.stdout.write(f"{name} removed")
        except ChronicleError as exc:
            raise CommandError(exc.message) from None
        if action == "list":
            listing = search_attributes.list_attributes(namespace)
            for group in ("system", "custom"):
                for attribute, attribute_type in listing[group].items():
                    self.stdout.write(f"{group}\t{attribute}\t{attribute_type}")
