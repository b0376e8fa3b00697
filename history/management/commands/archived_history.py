"""``python manage.py archived_history NAMESPACE WORKFLOW_ID``: print an archived run's history."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from history.kernel.archival import find_archive, read_archive
from namespaces.models import Namespace


def archived_run(
    namespace: Namespace, workflow_id: str, run_id: str | None
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The archived run of ``workflow_id`` in ``namespace`` (the given run, else the latest),
    or None, the same None whether no such archive exists or the ids name another
    namespace's: a run id must be a UUID (so it cannot step out of the workflow's
    directory), and the archive found must say it is this namespace's run of that workflow.
    """
    if run_id is not None:
        try:
            run_id = str(uuid.UUID(run_id))
        except ValueError:
            return None
    name = find_archive(namespace, workflow_id, run_id)
    if name is None:
        return None
    execution, events = read_archive(name)
    if execution.get("namespace") != namespace.name or execution.get("workflow_id") != workflow_id:
        return None
    if run_id is not None and execution.get("run_id") != run_id:
        return None
    return execution, events


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
        found = archived_run(namespace, options["workflow_id"], options["run_id"])
        if found is None:
            raise CommandError(f"no archived history for workflow {options['workflow_id']!r}")
        execution, events = found
        history = {
            "workflow_id": execution["workflow_id"],
            "run_id": execution["run_id"],
            "execution": execution,
            "events": events,
        }
        self.stdout.write(json.dumps(history, indent=2))
