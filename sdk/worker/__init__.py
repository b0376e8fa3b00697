"""The worker: polls task queues and runs registered workflows and activities."""

from __future__ import annotations

from sdk._runtime.replayer import Replayer, WorkflowReplayResult, WorkflowReplayResults
from sdk._worker_interceptor import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    ContinueAsNewInput,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    HandleQueryInput,
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    SignalChildWorkflowInput,
    SignalExternalWorkflowInput,
    StartActivityInput,
    StartChildWorkflowInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)
from sdk.worker._shared_state import SharedStateManager
from sdk.worker._worker import Worker
from sdk.worker.workflow_sandbox import SandboxedWorkflowRunner, UnsandboxedWorkflowRunner, WorkflowRunner

__all__ = [
    "ActivityInboundInterceptor",
    "ActivityOutboundInterceptor",
    "ContinueAsNewInput",
    "ExecuteActivityInput",
    "ExecuteWorkflowInput",
    "HandleQueryInput",
    "HandleSignalInput",
    "HandleUpdateInput",
    "Interceptor",
    "Replayer",
    "SandboxedWorkflowRunner",
    "SharedStateManager",
    "SignalChildWorkflowInput",
    "SignalExternalWorkflowInput",
    "StartActivityInput",
    "StartChildWorkflowInput",
    "StartLocalActivityInput",
    "UnsandboxedWorkflowRunner",
    "Worker",
    "WorkflowInboundInterceptor",
    "WorkflowInterceptorClassInput",
    "WorkflowOutboundInterceptor",
    "WorkflowReplayResult",
    "WorkflowReplayResults",
    "WorkflowRunner",
]
