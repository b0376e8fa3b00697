"""The worker: polls task queues and runs registered workflows and activities."""

from __future__ import annotations

from sdk.worker._worker import Worker

__all__ = ["Worker"]
