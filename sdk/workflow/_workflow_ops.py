"""Operations on workflows from workflow code: children, other workflows, and continue-as-new."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum
from typing import Any, NoReturn

from sdk.common import RetryPolicy, WorkflowIDReusePolicy, to_seconds
from sdk.converter import return_hint
from sdk.workflow._context import uuid4
from sdk.workflow._definition import DEFINITION_ATTR, signal_name, workflow_name
from sdk.workflow._interface import (
    ChildWorkflowCancellationType,
    ChildWorkflowHandle,
    _Runtime,
)


class ParentClosePolicy(IntEnum):
    """What happens to a child when its parent closes (Temporal's names; TERMINATE by default)."""

    UNSPECIFIED = 0
    TERMINATE = 1
    ABANDON = 2
    REQUEST_CANCEL = 3


_WAIT_COMPLETED = ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED


async def start_child_workflow(
    workflow: Any,
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    id: str | None = None,
    task_queue: str | None = None,
    result_type: Any = None,
    cancellation_type: ChildWorkflowCancellationType = _WAIT_COMPLETED,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
    execution_timeout: timedelta | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    retry_policy: RetryPolicy | None = None,
    memo: dict[str, Any] | None = None,
    search_attributes: dict[str, Any] | None = None,
) -> ChildWorkflowHandle:
    """Start a child workflow; returns once the server has started it.

    Raises WorkflowAlreadyStartedError when the id is in use.
    """
    runtime = _Runtime.current()
    policy = (
        parent_close_policy
        if parent_close_policy != ParentClosePolicy.UNSPECIFIED
        else ParentClosePolicy.TERMINATE
    )
    options: dict[str, Any] = {
        "workflow_id": id or str(uuid4()),
        "task_queue": task_queue,
        "workflow_execution_timeout": to_seconds(execution_timeout),
        "workflow_run_timeout": to_seconds(run_timeout),
        "workflow_task_timeout": to_seconds(task_timeout),
        "parent_close_policy": f"PARENT_CLOSE_POLICY_{policy.name}",
        "workflow_id_reuse_policy": f"WORKFLOW_ID_REUSE_POLICY_{id_reuse_policy.value}",
        "retry_policy": retry_policy.to_wire() if retry_policy else None,
        "memo": memo or {},
        "search_attributes": search_attributes or {},
    }
    hint = result_type if result_type is not None or isinstance(workflow, str) else _run_hint(workflow)
    values = list(args) if args else ([] if arg is None else [arg])
    return await runtime.workflow_start_child_workflow(
        workflow_name(workflow), values, options, hint, cancellation_type
    )


def _run_hint(workflow: Any) -> Any:
    """The result type of a run method, or of a workflow class's run method."""
    if isinstance(workflow, type):
        definition = getattr(workflow, DEFINITION_ATTR, None)
        return return_hint(definition.run_fn) if definition is not None else None
    return return_hint(workflow)


async def execute_child_workflow(workflow: Any, arg: Any = None, **options: Any) -> Any:
    """Start a child workflow and wait for its result (raises ChildWorkflowError on failure)."""
    handle = await start_child_workflow(workflow, arg, **options)
    return await handle


@dataclass(frozen=True)
class ExternalWorkflowHandle:
    """Another workflow this one can signal or cancel (it need not be a child)."""

    id: str
    run_id: str | None = None

    async def signal(self, signal: Any, arg: Any = None, *, args: Sequence[Any] = ()) -> None:
        values = list(args) if args else ([] if arg is None else [arg])
        await _Runtime.current().workflow_signal_external(self.id, self.run_id, signal_name(signal), values)

    async def cancel(self, *, reason: str = "") -> None:
        await _Runtime.current().workflow_request_cancel_external(self.id, self.run_id, reason=reason)


def get_external_workflow_handle(workflow_id: str, *, run_id: str | None = None) -> ExternalWorkflowHandle:
    _Runtime.current()  # only from workflow code
    return ExternalWorkflowHandle(workflow_id, run_id)


def get_external_workflow_handle_for(
    workflow: Any, workflow_id: str, *, run_id: str | None = None
) -> ExternalWorkflowHandle:
    """The typed form (``get_external_workflow_handle_for(MyWorkflow.run, id)``): the same handle;
    the run method only documents which workflow it is."""
    return get_external_workflow_handle(workflow_id, run_id=run_id)


def continue_as_new(
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    workflow: Any = None,
    task_queue: str | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    backoff_start_interval: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    memo: dict[str, Any] | None = None,
    search_attributes: dict[str, Any] | None = None,
) -> NoReturn:
    """Close this run and start a fresh one with new arguments (raises; never returns).

    Unset options keep the current run's: workflow type, task queue and timeouts on
    the server; memo, search attributes (with upserts) and retry policy here, as
    Temporal's SDKs do.
    """
    runtime = _Runtime.current()
    info = runtime.workflow_info()
    converter = runtime.workflow_data_converter()
    values = list(args) if args else ([] if arg is None else [arg])
    policy = retry_policy or info.retry_policy
    attributes: dict[str, Any] = {
        "workflow_type": {"name": workflow_name(workflow) if workflow else info.workflow_type},
        "task_queue": {"name": task_queue or info.task_queue},
        "input": converter.to_payloads(values),
        "workflow_run_timeout": to_seconds(run_timeout),
        "workflow_task_timeout": to_seconds(task_timeout),
        "backoff_start_interval": to_seconds(backoff_start_interval),
        "memo": dict(info.memo) if memo is None else {k: converter.to_payload(v) for k, v in memo.items()},
        "search_attributes": dict(info.search_attributes if search_attributes is None else search_attributes),
        "retry_policy": policy.to_wire() if policy else None,
    }
    runtime.workflow_continue_as_new(attributes, values)
