"""A workflow run's interceptor chain, as the instance runs it (``sdk._worker_interceptor``
describes the API).

With no workflow interceptor the instance keeps ``_inbound`` and ``_outbound`` None and every
path below is a None check. With some, ``Intercepted``'s overrides turn what workflow code
asked (``workflow.start_activity``, ...) into Temporal's ``*Input`` and send it down the
outbound chain; its innermost link, ``_Outbound``, turns the input, as the interceptors left
it, back into the command the instance issues. The inbound chain ends in ``_Inbound``, which
runs the run method and the handlers. Everything here runs on the run's deterministic loop,
so a replay takes the same path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from sdk._runtime.activities import Activities
from sdk._runtime.children import ChildWorkflows
from sdk._worker_interceptor import (
    ContinueAsNewInput,
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
    headers_from_wire,
    headers_to_wire,
)
from sdk.api.common.v1 import Payload
from sdk.common import RetryPolicy, WorkflowIDReusePolicy, to_seconds
from sdk.workflow import (
    ActivityCancellationType,
    ChildWorkflowCancellationType,
    ChildWorkflowHandle,
    ContinueAsNewError,
    Info,
    ParentClosePolicy,
)
from sdk.workflow._definition import DYNAMIC

if TYPE_CHECKING:
    from sdk._runtime.instance import WorkflowInstance

_PARENT_CLOSE = "PARENT_CLOSE_POLICY_"
_REUSE = "WORKFLOW_ID_REUSE_POLICY_"


def _timedelta(seconds: Any) -> timedelta | None:
    return timedelta(seconds=float(seconds)) if seconds else None


def _encoded(converter: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: converter.to_payload(value) for key, value in values.items()}


def _with_header(options: dict[str, Any], headers: Mapping[str, Payload]) -> dict[str, Any]:
    if headers:
        options["header"] = headers_to_wire(headers)
    return options


def build_chain(
    instance: WorkflowInstance, interceptors: Sequence[Interceptor]
) -> WorkflowInboundInterceptor | None:
    """The run's outermost inbound link (None without workflow interceptors); its ``init``
    has run, so the instance holds the outermost outbound link too."""
    classes = [
        cls
        for cls in (i.workflow_interceptor_class(WorkflowInterceptorClassInput()) for i in interceptors)
        if cls is not None
    ]
    if not classes:
        return None
    inbound: WorkflowInboundInterceptor = _Inbound(instance)
    for cls in reversed(classes):
        inbound = cls(inbound)
    with instance.installed():
        inbound.init(_Outbound(instance))
    return inbound


class _Inbound(WorkflowInboundInterceptor):
    """The innermost inbound link: runs the run method and the handlers."""

    def __init__(self, instance: WorkflowInstance) -> None:
        self.instance = instance

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        self.instance._outbound = outbound

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        return await input.run_fn(self.instance._object, *input.args)

    async def handle_signal(self, input: HandleSignalInput) -> None:
        handlers = self.instance._signal_handlers
        await _call(handlers.get(input.signal), handlers.get(DYNAMIC), input.signal, input.args)

    async def handle_query(self, input: HandleQueryInput) -> Any:
        handlers = self.instance._query_handlers
        return await _call(handlers.get(input.query), handlers.get(DYNAMIC), input.query, input.args)

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        found = self.instance._handler_for(input.update)
        validator = found[1] if found else None
        if validator is not None:
            validator(*((input.update, input.args) if found and found[2] else input.args))

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        found = self.instance._handler_for(input.update)
        if found is None:
            raise RuntimeError(f"no handler for update {input.update!r}")
        handler, _, dynamic = found
        return await _call(None if dynamic else handler, handler, input.update, input.args)


async def _call(named: Any, dynamic: Any, name: str, args: Sequence[Any]) -> Any:
    """Call the named handler with the arguments, else the dynamic one with the name and them."""
    if named is not None:
        result = named(*args)
    elif dynamic is not None:
        result = dynamic(name, list(args))
    else:
        raise RuntimeError(f"no handler for {name!r}")
    if asyncio.iscoroutine(result):
        result = await result
    return result


class _Outbound(WorkflowOutboundInterceptor):
    """The innermost outbound link: an input becomes the command the instance issues."""

    def __init__(self, instance: WorkflowInstance) -> None:
        self.instance = instance

    def info(self) -> Info:
        return self.instance.info

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        instance = self.instance
        info, converter = instance.info, instance.converter
        policy = input.retry_policy or info.retry_policy
        memo = input.memo
        attributes: dict[str, Any] = {
            "workflow_type": {"name": input.workflow or info.workflow_type},
            "task_queue": {"name": input.task_queue or info.task_queue},
            "input": converter.to_payloads(list(input.args)),
            "workflow_run_timeout": to_seconds(input.run_timeout),
            "workflow_task_timeout": to_seconds(input.task_timeout),
            "backoff_start_interval": to_seconds(input.backoff_start_interval),
            "memo": dict(info.memo)
            if memo is None
            else {k: converter.to_payload(v) for k, v in memo.items()},
            "search_attributes": dict(
                info.search_attributes if input.search_attributes is None else input.search_attributes
            ),
            "retry_policy": policy.to_wire() if policy else None,
        }
        raise ContinueAsNewError(_with_header(attributes, input.headers))

    def start_activity(self, input: StartActivityInput) -> asyncio.Task[Any]:
        options = {
            "activity_id": input.activity_id,
            "task_queue": input.task_queue,
            "schedule_to_close_timeout": to_seconds(input.schedule_to_close_timeout),
            "schedule_to_start_timeout": to_seconds(input.schedule_to_start_timeout),
            "start_to_close_timeout": to_seconds(input.start_to_close_timeout),
            "heartbeat_timeout": to_seconds(input.heartbeat_timeout),
            "retry_policy": input.retry_policy.to_wire() if input.retry_policy else None,
        }
        return Activities.workflow_start_activity(
            self.instance,
            input.activity,
            list(input.args),
            _with_header(options, input.headers),
            input.ret_type,
            input.cancellation_type,
        )

    def start_local_activity(self, input: StartLocalActivityInput) -> asyncio.Future[Any]:
        options = {
            "schedule_to_close_timeout": to_seconds(input.schedule_to_close_timeout),
            "start_to_close_timeout": to_seconds(input.start_to_close_timeout),
            "retry_policy": input.retry_policy.to_wire() if input.retry_policy else None,
        }
        return Activities.workflow_start_local_activity(
            self.instance, input.activity, list(input.args), options, input.ret_type
        )

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> ChildWorkflowHandle:
        options: dict[str, Any] = {
            "workflow_id": input.id,
            "task_queue": input.task_queue,
            "workflow_execution_timeout": to_seconds(input.execution_timeout),
            "workflow_run_timeout": to_seconds(input.run_timeout),
            "workflow_task_timeout": to_seconds(input.task_timeout),
            "parent_close_policy": _PARENT_CLOSE + input.parent_close_policy.name,
            "workflow_id_reuse_policy": _REUSE + str(input.id_reuse_policy.value),
            "retry_policy": input.retry_policy.to_wire() if input.retry_policy else None,
            "memo": dict(input.memo or {}),
            "search_attributes": dict(input.search_attributes or {}),
        }
        if input.cron_schedule:
            options["cron_schedule"] = input.cron_schedule
        return await ChildWorkflows.workflow_start_child_workflow(
            self.instance,
            input.workflow,
            list(input.args),
            _with_header(options, input.headers),
            input.ret_type,
            input.cancellation_type,
        )

    async def signal_child_workflow(self, input: SignalChildWorkflowInput) -> None:
        children = self.instance._children.values()
        run_id = next((c.run_id for c in children if c.workflow_id == input.child_workflow_id), None)
        await ChildWorkflows.workflow_signal_external(
            self.instance,
            input.child_workflow_id,
            run_id,
            input.signal,
            list(input.args),
            child_workflow_only=True,
        )

    async def signal_external_workflow(self, input: SignalExternalWorkflowInput) -> None:
        await ChildWorkflows.workflow_signal_external(
            self.instance, input.workflow_id, input.workflow_run_id, input.signal, list(input.args)
        )


class Intercepted:
    """The instance's side: what workflow code asks goes down the outbound chain when there
    is one, and the engine's calls into the run go down the inbound chain."""

    if TYPE_CHECKING:
        info: Info

    _inbound: WorkflowInboundInterceptor | None = None
    _outbound: WorkflowOutboundInterceptor | None = None

    def workflow_start_activity(
        self,
        activity_type: str,
        args: list[Any],
        options: dict[str, Any],
        result_hint: Any,
        cancellation_type: ActivityCancellationType,
    ) -> asyncio.Task[Any]:
        if self._outbound is None:
            return Activities.workflow_start_activity(
                self,  # type: ignore[arg-type]  # the instance
                activity_type,
                args,
                options,
                result_hint,
                cancellation_type,
            )
        return self._outbound.start_activity(
            StartActivityInput(
                activity=activity_type,
                args=args,
                activity_id=options.get("activity_id"),
                task_queue=options.get("task_queue"),
                schedule_to_close_timeout=_timedelta(options.get("schedule_to_close_timeout")),
                schedule_to_start_timeout=_timedelta(options.get("schedule_to_start_timeout")),
                start_to_close_timeout=_timedelta(options.get("start_to_close_timeout")),
                heartbeat_timeout=_timedelta(options.get("heartbeat_timeout")),
                retry_policy=RetryPolicy.from_wire(options.get("retry_policy")),
                cancellation_type=cancellation_type,
                headers={},
                ret_type=result_hint,
            )
        )

    def workflow_start_local_activity(
        self, activity_type: str, args: list[Any], options: dict[str, Any], result_hint: Any
    ) -> asyncio.Future[Any]:
        if self._outbound is None:
            return Activities.workflow_start_local_activity(
                self,  # type: ignore[arg-type]  # the instance
                activity_type,
                args,
                options,
                result_hint,
            )
        return self._outbound.start_local_activity(
            StartLocalActivityInput(
                activity=activity_type,
                args=args,
                activity_id=None,
                schedule_to_close_timeout=_timedelta(options.get("schedule_to_close_timeout")),
                schedule_to_start_timeout=None,
                start_to_close_timeout=_timedelta(options.get("start_to_close_timeout")),
                retry_policy=RetryPolicy.from_wire(options.get("retry_policy")),
                local_retry_threshold=None,
                cancellation_type=ActivityCancellationType.TRY_CANCEL,
                headers={},
                ret_type=result_hint,
            )
        )

    async def workflow_start_child_workflow(
        self,
        workflow_type: str,
        args: list[Any],
        options: dict[str, Any],
        result_hint: Any,
        cancellation_type: ChildWorkflowCancellationType,
    ) -> ChildWorkflowHandle:
        if self._outbound is None:
            return await ChildWorkflows.workflow_start_child_workflow(
                self,  # type: ignore[arg-type]  # the instance
                workflow_type,
                args,
                options,
                result_hint,
                cancellation_type,
            )
        close = str(options.get("parent_close_policy") or "").removeprefix(_PARENT_CLOSE)
        reuse = str(options.get("workflow_id_reuse_policy") or "").removeprefix(_REUSE)
        return await self._outbound.start_child_workflow(
            StartChildWorkflowInput(
                workflow=workflow_type,
                args=args,
                id=str(options.get("workflow_id")),
                task_queue=options.get("task_queue"),
                cancellation_type=cancellation_type,
                parent_close_policy=ParentClosePolicy[close or "TERMINATE"],
                execution_timeout=_timedelta(options.get("workflow_execution_timeout")),
                run_timeout=_timedelta(options.get("workflow_run_timeout")),
                task_timeout=_timedelta(options.get("workflow_task_timeout")),
                id_reuse_policy=WorkflowIDReusePolicy(reuse or "ALLOW_DUPLICATE"),
                retry_policy=RetryPolicy.from_wire(options.get("retry_policy")),
                cron_schedule="",
                memo=options.get("memo"),
                search_attributes=options.get("search_attributes"),
                headers={},
                ret_type=result_hint,
            )
        )

    def workflow_signal_external(
        self,
        workflow_id: str,
        run_id: str | None,
        signal_name: str,
        args: list[Any],
        *,
        child_workflow_only: bool = False,
    ) -> Any:
        if self._outbound is None:
            return ChildWorkflows.workflow_signal_external(
                self,  # type: ignore[arg-type]  # the instance
                workflow_id,
                run_id,
                signal_name,
                args,
                child_workflow_only=child_workflow_only,
            )
        if child_workflow_only:
            return self._outbound.signal_child_workflow(
                SignalChildWorkflowInput(signal_name, args, workflow_id)
            )
        namespace = self.info.namespace
        return self._outbound.signal_external_workflow(
            SignalExternalWorkflowInput(signal_name, args, namespace, workflow_id, run_id)
        )

    def workflow_continue_as_new(self, attributes: dict[str, Any], args: list[Any]) -> NoReturn:
        if self._outbound is None:
            raise ContinueAsNewError(attributes)
        converter = self.workflow_data_converter()
        memo = {k: converter.from_payload(v) for k, v in (attributes.get("memo") or {}).items()}
        self._outbound.continue_as_new(
            ContinueAsNewInput(
                workflow=(attributes.get("workflow_type") or {}).get("name"),
                args=args,
                task_queue=(attributes.get("task_queue") or {}).get("name"),
                run_timeout=_timedelta(attributes.get("workflow_run_timeout")),
                task_timeout=_timedelta(attributes.get("workflow_task_timeout")),
                backoff_start_interval=_timedelta(attributes.get("backoff_start_interval")),
                retry_policy=RetryPolicy.from_wire(attributes.get("retry_policy")),
                memo=memo,
                search_attributes=attributes.get("search_attributes"),
                headers={},
            )
        )

    if TYPE_CHECKING:

        def workflow_data_converter(self) -> Any: ...

    # -- inbound: the engine's calls into the run ---------------------------------------------

    def _execute(self, run_fn: Any, obj: Any, args: list[Any], headers: Any) -> Coroutine[Any, Any, Any]:
        if self._inbound is None:
            return run_fn(obj, *args)  # type: ignore[no-any-return]
        return self._inbound.execute_workflow(
            ExecuteWorkflowInput(type(obj), run_fn, args, headers_from_wire(headers))
        )
