"""``python manage.py run_shard_owner``: lease shards and fire their timers."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection

from chronicle import heap
from chronicle.db import listen_conninfo, protect_as, require_reachable_database
from history.shard_owner import ShardOwner


class Command(BaseCommand):
    help = "Run a shard-owner daemon: lease shards, fire their timers."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--owner", default=None, help="owner name (default host:pid)")

    def handle(self, *args: Any, **options: Any) -> None:
        protect_as("daemon")
        heap.settle_after_start()
        require_reachable_database()
        connection.ensure_connection()
        ShardOwner(owner=options["owner"]).run(listen_conninfo())
