"""``python manage.py run_batch_jobs``: run batch operations (reset, terminate, cancel, signal)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from chronicle import heap
from chronicle.db import protect_as
from executions.batch_runner import BatchRunner


class Command(BaseCommand):
    help = "Run batch jobs: claim one at a time by lease and apply its operation at its rate."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--owner", default=None, help="runner name (default host:pid)")
        parser.add_argument(
            "--lease-seconds",
            type=float,
            default=30.0,
            help="how long a job stays claimed without progress before another runner takes it",
        )
        parser.add_argument("--poll-interval", type=float, default=1.0, help="seconds between looks for work")

    def handle(self, *args: Any, **options: Any) -> None:
        protect_as("daemon")
        heap.settle_after_start()
        BatchRunner(
            options["owner"], lease_seconds=options["lease_seconds"], poll_interval=options["poll_interval"]
        ).run()
