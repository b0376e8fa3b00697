"""``python manage.py archived_history NAMESPACE WORKFLOW_ID``: print an archived run's history."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from history.kernel.archival import find_archive, read_archive
from namespaces.models import Namespace


class Command(BaseCommand):
    help = (
        "Print an archived history as JSON (the shape the SDK's WorkflowHistory.from_json and "
        "Replayer read), with the run's summary under 'execution'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("namespace")
        parser.add_argument("workflow_id")
        parser.add_argument("--run-id", default=None, help="the run (default: the latest archived run)")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = Namespace.objects.filter(name=options["namespace"]).first()
        if namespace is None:
            raise CommandError(f"namespace {options['namespace']!r} not found")
        name = find_archive(namespace, options["workflow_id"], options["run_id"])
        if name is None:
            raise CommandError(f"no archived history for workflow {options['workflow_id']!r}")
        execution, events = read_archive(name)
        history = {
            "workflow_id": execution["workflow_id"],
            "run_id": execution["run_id"],
            "execution": execution,
            "events": events,
        }
        self.stdout.write(json.dumps(history, indent=2))
