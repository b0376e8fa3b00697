"""The skipped clock's one row: how far a time-skipping stack is ahead of real time.

Only a stack started with ``CHRONICLE_TIME_SKIPPING`` (the SDK's time-skipping test
environment) reads or writes it, through :mod:`chronicle.clock` (raw SQL on this table, as
that ground module imports no app); a real deployment's table stays empty.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models

from chronicle import clock


class SkippedClock(models.Model):
    """Row ``id = 1``: the skipped offset and the holds that stop automatic skipping."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    skipped = models.DurationField(default=timedelta(0))
    # Open ``auto_time_skipping_disabled()`` blocks of test environments: the shard owner
    # skips to the next timer on its own only while this is zero (``env.sleep`` still skips).
    skipping_locks = models.IntegerField(default=0)

    class Meta:
        db_table = clock.TABLE
