"""Opaque, signed task tokens, bound to the namespace that issued them.

A token names a task (its run, event ids and attempt) and the namespace id it was issued
in, and is signed over both, so a worker can neither forge nor alter it. A token is only
good where it came from: every call that carries one also says where it was made (its
``TaskScope``: the URL's namespace and task queue), and the kernel's lock step refuses a
token whose namespace, run or task queue is not that scope with the same answer an
unknown task gets, so a key of one namespace learns nothing about another's runs.

A token also carries its run's shard (``h``), so the lock names it (docs/scale-out.md); a
token issued before tokens carried it locks its run by id alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core import signing

from chronicle.errors import ChronicleError, ErrorCode
from history.kernel.locks import lock_run
from history.models import WorkflowExecution

# v2 binds the namespace id; v1 tokens (no namespace) are refused with a clear message.
_SALT = "chronicle.task-token.v2"
_RETIRED_SALTS = ("chronicle.task-token.v1",)


@dataclass(frozen=True)
class TaskScope:
    """Where a token-bearing call was made: the namespace and task queue of its URL."""

    namespace_id: uuid.UUID
    task_queue: str


def encode(kind: str, namespace_id: uuid.UUID, **fields: Any) -> str:
    """A token of ``kind`` for a task of ``namespace_id``; ``fields`` name the task."""
    payload = {"k": kind, "n": str(namespace_id), **fields}
    return signing.dumps(payload, salt=_SALT, compress=True)


def decode(token: str, kind: str) -> dict[str, Any]:
    """The token's fields, if it is ours, unaltered, current and of ``kind``."""
    try:
        payload: dict[str, Any] = signing.loads(token, salt=_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        if _is_retired(token):
            raise ChronicleError(
                ErrorCode.INVALID_ARGUMENT,
                "task token was issued by an older server version; poll for the task again",
            ) from None
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "task token is not valid") from None
    if payload.get("k") != kind or not isinstance(payload.get("n"), str):
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, f"not a {kind} task token")
    return payload


def _is_retired(token: str) -> bool:
    for salt in _RETIRED_SALTS:
        try:
            signing.loads(token, salt=salt)
        except (signing.BadSignature, ValueError, TypeError):
            continue
        return True
    return False


def task_not_found() -> ChronicleError:
    """The one answer for a task that is unknown here: never exists, elsewhere or foreign."""
    return ChronicleError(ErrorCode.NOT_FOUND, "task not found")


def check_issued_in(token: dict[str, Any], scope: TaskScope) -> None:
    """Refuse, as unknown, a token issued in another namespace than the call's."""
    if token["n"] != str(scope.namespace_id):
        raise task_not_found()


def check_scope(scope: TaskScope, *, namespace_id: uuid.UUID, queues: Iterable[str]) -> None:
    """Refuse, as unknown, a task whose namespace or task queue is not the call's.

    Called in the lock step with what the locked rows say, so a token that is genuine
    but carried to another namespace's or another queue's URL moves nothing.
    """
    if namespace_id != scope.namespace_id or scope.task_queue not in {q for q in queues if q}:
        raise task_not_found()


def token_shard(token: dict[str, Any]) -> int | None:
    """The shard of the token's run, when the token carries it (``h``)."""
    shard = token.get("h")
    return shard if isinstance(shard, int) and not isinstance(shard, bool) else None


def lock_token_run(token: dict[str, Any], scope: TaskScope) -> WorkflowExecution:
    """Lock the token's run ``FOR UPDATE`` if it was issued in, and still lives in, the
    call's namespace; otherwise the unknown-task answer (a run gone since is unknown too).
    The caller checks the task queue against the task it then finds."""
    check_issued_in(token, scope)
    try:
        execution = lock_run(token["r"], token_shard(token))
    except ChronicleError:
        raise task_not_found() from None
    if execution.namespace_id != scope.namespace_id:
        raise task_not_found()
    return execution
