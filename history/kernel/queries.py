"""Query answers: written to the query row, never to history."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from chronicle.errors import ChronicleError, ErrorCode
from history.kernel import tokens
from history.kernel._mutation import HISTORY_CHANNEL, notify
from history.models import QueryState, WorkflowQuery


def query_task_token(query: WorkflowQuery) -> str:
    return tokens.encode({"k": "query", "q": str(query.id)})


def respond_query_task_completed(
    *,
    task_token: str,
    answer: Any = None,
    error_message: str = "",
) -> None:
    token = tokens.decode(task_token, "query")
    with transaction.atomic(durable=True):
        query = WorkflowQuery.objects.select_for_update().filter(id=token["q"]).first()
        if query is None or query.state != QueryState.PENDING:
            raise ChronicleError(ErrorCode.STALE_TASK, "query not found or already answered")
        query.state = QueryState.FAILED if error_message else QueryState.ANSWERED
        query.answer = answer
        query.error_message = error_message
        query.save()
        notify(HISTORY_CHANNEL, f"query:{query.id}")
