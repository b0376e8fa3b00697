"""Test helpers, as Temporal's ``temporalio.testing``: ``ActivityEnvironment`` runs one activity
without a worker; ``WorkflowEnvironment`` gives a client on a Chronicle server for tests."""

from __future__ import annotations

from sdk.testing._activity import ActivityEnvironment
from sdk.testing._workflow import WorkflowEnvironment

__all__ = ["ActivityEnvironment", "WorkflowEnvironment"]
