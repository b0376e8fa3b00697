"""The API workflow code uses: decorators, activities, timers, conditions, deterministic helpers.

Every function here except the decorators must be called from workflow code, while the
engine runs a workflow; it reaches the engine only through the ``_Runtime`` interface in
``_interface``, so this package imports no engine code (an import-linter contract says so).
"""

from __future__ import annotations

from sdk.workflow._activities import (
    execute_activity,
    execute_local_activity,
    start_activity,
    start_local_activity,
)
from sdk.workflow._context import (
    deprecate_patch,
    get_last_completion_result,
    get_last_failure,
    has_last_completion_result,
    info,
    logger,
    memo,
    now,
    patched,
    random,
    sleep,
    time,
    upsert_search_attributes,
    uuid4,
    wait_condition,
)
from sdk.workflow._definition import defn, init, query, run, signal
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
    start_child_workflow,
)

__all__ = [
    "ActivityCancellationType",
    "ChildWorkflowCancellationType",
    "ChildWorkflowHandle",
    "ContinueAsNewError",
    "ExternalWorkflowHandle",
    "Info",
    "ParentClosePolicy",
    "ParentInfo",
    "continue_as_new",
    "defn",
    "deprecate_patch",
    "execute_activity",
    "execute_child_workflow",
    "execute_local_activity",
    "get_external_workflow_handle",
    "get_last_completion_result",
    "get_last_failure",
    "has_last_completion_result",
    "info",
    "init",
    "logger",
    "memo",
    "now",
    "patched",
    "query",
    "random",
    "run",
    "signal",
    "sleep",
    "start_activity",
    "start_child_workflow",
    "start_local_activity",
    "time",
    "upsert_search_attributes",
    "uuid4",
    "wait_condition",
]
