"""The worker: polls task queues and runs registered workflows and activities."""

from __future__ import annotations

from sdk._runtime.replayer import Replayer
from sdk.worker._worker import Worker

__all__ = ["Replayer", "Worker"]
