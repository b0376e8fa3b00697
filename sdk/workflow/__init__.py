"""The API workflow code uses: decorators, activities, timers, conditions, deterministic helpers.

Every function here except the decorators must be called from workflow code, while the
engine runs a workflow; it reaches the engine only through the ``_Runtime`` interface in
``_interface``, so this package imports no engine code (an import-linter contract says so).
"""

from __future__ import annotations

import asyncio
from typing import Any

from sdk.exceptions import NondeterminismError, ReadOnlyContextError
from sdk.workflow import unsafe
from sdk.workflow._activities import (
    execute_activity,
    execute_activity_class,
    execute_activity_method,
    execute_local_activity,
    execute_local_activity_class,
    execute_local_activity_method,
    start_activity,
    start_activity_class,
    start_activity_method,
    start_local_activity,
    start_local_activity_class,
    start_local_activity_method,
)
from sdk.workflow._context import (
    LoggerAdapter,
    as_completed,
    deprecate_patch,
    get_last_completion_result,
    get_last_failure,
    has_last_completion_result,
    in_workflow,
    info,
    logger,
    memo,
    memo_value,
    now,
    patched,
    payload_converter,
    random,
    sleep,
    time,
    time_ns,
    upsert_search_attributes,
    uuid4,
    wait,
    wait_condition,
)
from sdk.workflow._definition import (
    HandlerUnfinishedPolicy,
    UnfinishedSignalHandlersWarning,
    defn,
    init,
    query,
    run,
    signal,
)
from sdk.workflow._handlers import (
    all_handlers_finished,
    get_dynamic_query_handler,
    get_dynamic_signal_handler,
    get_query_handler,
    get_signal_handler,
    set_dynamic_query_handler,
    set_dynamic_signal_handler,
    set_query_handler,
    set_signal_handler,
)
from sdk.workflow._interface import (
    ActivityCancellationType,
    ChildWorkflowCancellationType,
    ChildWorkflowHandle,
    ContinueAsNewError,
    Info,
    ParentInfo,
)
from sdk.workflow._interface import _Runtime as _Runtime
from sdk.workflow._workflow_ops import (
    ExternalWorkflowHandle,
    ParentClosePolicy,
    continue_as_new,
    execute_child_workflow,
    get_external_workflow_handle,
    get_external_workflow_handle_for,
    start_child_workflow,
)

ActivityHandle = asyncio.Task[Any]
"""What ``start_activity`` returns: a task; await it for the result, cancel it to cancel."""

__all__ = [
    "ActivityCancellationType",
    "ActivityHandle",
    "ChildWorkflowCancellationType",
    "ChildWorkflowHandle",
    "ContinueAsNewError",
    "ExternalWorkflowHandle",
    "HandlerUnfinishedPolicy",
    "Info",
    "LoggerAdapter",
    "NondeterminismError",
    "ParentClosePolicy",
    "ParentInfo",
    "ReadOnlyContextError",
    "UnfinishedSignalHandlersWarning",
    "all_handlers_finished",
    "as_completed",
    "continue_as_new",
    "defn",
    "deprecate_patch",
    "execute_activity",
    "execute_activity_class",
    "execute_activity_method",
    "execute_child_workflow",
    "execute_local_activity",
    "execute_local_activity_class",
    "execute_local_activity_method",
    "get_dynamic_query_handler",
    "get_dynamic_signal_handler",
    "get_external_workflow_handle",
    "get_external_workflow_handle_for",
    "get_last_completion_result",
    "get_last_failure",
    "get_query_handler",
    "get_signal_handler",
    "has_last_completion_result",
    "in_workflow",
    "info",
    "init",
    "logger",
    "memo",
    "memo_value",
    "now",
    "patched",
    "payload_converter",
    "query",
    "random",
    "run",
    "set_dynamic_query_handler",
    "set_dynamic_signal_handler",
    "set_query_handler",
    "set_signal_handler",
    "signal",
    "sleep",
    "start_activity",
    "start_activity_class",
    "start_activity_method",
    "start_child_workflow",
    "start_local_activity",
    "start_local_activity_class",
    "start_local_activity_method",
    "time",
    "time_ns",
    "unsafe",
    "upsert_search_attributes",
    "uuid4",
    "wait",
    "wait_condition",
]
