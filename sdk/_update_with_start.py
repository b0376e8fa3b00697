"""Update-with-start on the client: start a workflow (or use the running one) and send it an
update in one call (``Client`` takes these methods from :class:`UpdateWithStart`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sdk._client_interceptor import (
    StartWorkflowUpdateWithStartInput,
    UpdateWithStartStartWorkflowInput,
    UpdateWithStartUpdateWorkflowInput,
)
from sdk._updates import (
    NO_ARG,
    WithStartWorkflowOperation,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
    result_type_of,
    update_arguments,
)
from sdk.common import WorkflowIDReusePolicy
from sdk.converter import return_hint
from sdk.workflow._definition import workflow_name

if TYPE_CHECKING:
    from sdk._workflow_handle import HandleClient

# What ``start_workflow`` defaults to, for the options an operation leaves out.
_START_DEFAULTS: dict[str, Any] = {
    "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    "execution_timeout": None,
    "run_timeout": None,
    "task_timeout": None,
    "memo": None,
    "search_attributes": None,
    "request_id": None,
    "retry_policy": None,
    "start_delay": None,
    "cron_schedule": "",
}


class UpdateWithStart:
    """``start_update_with_start_workflow`` and ``execute_update_with_start_workflow``."""

    def _client(self) -> HandleClient:
        return self  # type: ignore[return-value]  # Client is a HandleClient

    async def start_update_with_start_workflow(
        self,
        update: str | Callable[..., Any],
        arg: Any = NO_ARG,
        *,
        start_workflow_operation: WithStartWorkflowOperation,
        wait_for_stage: WorkflowUpdateStage,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: Any = None,
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowUpdateHandle:
        """Start the operation's workflow (or, as its ``id_conflict_policy`` says, use the running
        one) and send it the update, waiting until the update is ACCEPTED or COMPLETED."""
        op = start_workflow_operation
        if op.id_conflict_policy is None or op.id_conflict_policy.name == "UNSPECIFIED":
            raise ValueError("WithStartWorkflowOperation needs an id_conflict_policy")
        options = {**_START_DEFAULTS, **op.start_options}
        workflow_result = op.result_type
        if workflow_result is None and not isinstance(op.workflow, str):
            workflow_result = return_hint(op.workflow)
        start_values = list(op.args) if op.args else ([] if op.arg is NO_ARG else [op.arg])
        name, values = update_arguments(update, arg, args)
        start = UpdateWithStartStartWorkflowInput(
            workflow=workflow_name(op.workflow),
            args=start_values,
            id=op.id,
            task_queue=op.task_queue,
            id_conflict_policy=op.id_conflict_policy,
            headers={},
            static_summary=None,
            static_details=None,
            ret_type=workflow_result,
            **options,
        )
        update_input = UpdateWithStartUpdateWorkflowInput(
            update_id=id,
            update=name,
            args=values,
            wait_for_stage=wait_for_stage,
            headers={},
            ret_type=result_type_of(update, result_type),
        )
        return await self._client().outbound.start_update_with_start_workflow(
            StartWorkflowUpdateWithStartInput(start, update_input, {}, rpc_timeout, _operation=op)
        )

    async def execute_update_with_start_workflow(
        self,
        update: str | Callable[..., Any],
        arg: Any = NO_ARG,
        *,
        start_workflow_operation: WithStartWorkflowOperation,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: Any = None,
        rpc_timeout: timedelta | None = None,
    ) -> Any:
        """Update-with-start, returning the update handler's value."""
        handle = await self.start_update_with_start_workflow(
            update,
            arg,
            start_workflow_operation=start_workflow_operation,
            wait_for_stage=WorkflowUpdateStage.COMPLETED,
            args=args,
            id=id,
            result_type=result_type,
            rpc_timeout=rpc_timeout,
        )
        return await handle.result()
