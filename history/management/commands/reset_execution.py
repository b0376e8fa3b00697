"""``python manage.py reset_execution NAMESPACE WORKFLOW_ID``: reset a run from the shell."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chronicle.errors import ChronicleError
from history import kernel
from namespaces.models import Namespace


class Command(BaseCommand):
    help = "Reset a workflow to a workflow task (first, last or an event id) and print the new run id."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("namespace")
        parser.add_argument("workflow_id")
        parser.add_argument("--run-id", default=None, help="the base run (default: the current run)")
        point = parser.add_mutually_exclusive_group(required=True)
        point.add_argument("--event-id", type=int, help="a WorkflowTaskCompleted event id")
        point.add_argument("--reset-type", choices=["FirstWorkflowTask", "LastWorkflowTask"])
        parser.add_argument("--reason", required=True)
        parser.add_argument("--no-reapply-signals", action="store_true", help="drop signals after the point")
        parser.add_argument("--request-id", default="", help="repeat it to make a retry a no-op")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = Namespace.objects.filter(name=options["namespace"]).first()
        if namespace is None:
            raise CommandError(f"namespace {options['namespace']!r} not found")
        point: kernel.ResetPoint = options["event_id"] or (
            "first" if options["reset_type"] == "FirstWorkflowTask" else "last"
        )
        try:
            run_id = kernel.reset_workflow_execution(
                namespace,
                workflow_id=options["workflow_id"],
                run_id=options["run_id"],
                point=point,
                reason=options["reason"],
                reapply_signals=not options["no_reapply_signals"],
                request_id=options["request_id"],
                identity="system:cli",
            )
        except ChronicleError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(run_id)
