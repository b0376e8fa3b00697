"""The worker: polls task queues and runs registered workflows and activities."""

from __future__ import annotations

from sdk._runtime.replayer import Replayer
from sdk.worker._shared_state import SharedStateManager
from sdk.worker._worker import Worker
from sdk.worker.workflow_sandbox import SandboxedWorkflowRunner, UnsandboxedWorkflowRunner, WorkflowRunner

__all__ = [
    "Replayer",
    "SandboxedWorkflowRunner",
    "SharedStateManager",
    "UnsandboxedWorkflowRunner",
    "Worker",
    "WorkflowRunner",
]
