"""The audit log page: who did what to which run or setting, when and why.

Every member of the namespace reads it, viewers included: the execution page already
shows a run's actions to every reader, and knowing who changed what is how a viewer
finds whom to ask. Pages are keyset pages, newest first, on (created_at, id), so a
page costs the same however far back it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from executions import page_tokens
from executions.models import AuditAction, AuditEntry
from executions.ui.access import memberships, reader
from namespaces.models import Namespace

PAGE_SIZE = 50
SCHEDULE_ACTIONS = frozenset(a for a in AuditAction.values if a.startswith("schedule."))


@dataclass(frozen=True)
class AuditFilter:
    actor: str
    action: str
    workflow_id: str
    target: str
    before: str

    @classmethod
    def of(cls, request: HttpRequest) -> AuditFilter:
        get = request.GET
        action = get.get("action", "")
        return cls(
            actor=get.get("actor", "").strip(),
            action=action if action in AuditAction.values else "",
            workflow_id=get.get("workflow_id", "").strip(),
            target=get.get("target", "").strip(),
            before=get.get("before", ""),
        )

    def entries(self, namespace: Namespace) -> QuerySet[AuditEntry]:
        qs = AuditEntry.objects.filter(namespace=namespace)
        for field, value in (
            ("actor", self.actor),
            ("action", self.action),
            ("workflow_id", self.workflow_id),
            ("target", self.target),
        ):
            if value:
                qs = qs.filter(**{field: value})
        return _after_cursor(qs, namespace, self.before).order_by("-created_at", "-id")


CURSOR_KIND = "audit"


def _cursor(namespace: Namespace, entry: AuditEntry) -> str:
    """The next page's cursor: the last entry's (time, id), signed for this namespace."""
    return page_tokens.mint(CURSOR_KIND, namespace, [entry.created_at.isoformat(), entry.pk])


def _after_cursor(qs: QuerySet[AuditEntry], namespace: Namespace, cursor: str) -> QuerySet[AuditEntry]:
    """Entries older than the cursor's. A cursor this namespace's log did not mint (one that
    does not parse, or one of another namespace) starts from the newest, as no cursor does."""
    position: Any = page_tokens.read(CURSOR_KIND, namespace, cursor) if cursor else None
    try:
        created, pk = position
        moment, last_id = datetime.fromisoformat(created), int(pk)
    except (TypeError, ValueError):
        return qs
    return qs.filter(Q(created_at__lt=moment) | Q(created_at=moment, id__lt=last_id))


def _pretty(value: Any) -> str:
    return "" if value is None else json.dumps(value, indent=2, sort_keys=True, default=str)


@dataclass(frozen=True)
class AuditRow:
    entry: AuditEntry
    old: str
    new: str
    schedule_link: bool
    started: list[dict[str, Any]]


def _row(entry: AuditEntry) -> AuditRow:
    started = entry.details.get("started") if isinstance(entry.details, dict) else None
    return AuditRow(
        entry=entry,
        old=_pretty(entry.old),
        new=_pretty(entry.new),
        schedule_link=entry.action in SCHEDULE_ACTIONS and entry.action != AuditAction.SCHEDULE_DELETE,
        started=started if isinstance(started, list) else [],
    )


@login_required
@require_GET
def audit_log(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    wanted = AuditFilter.of(request)
    entries = list(wanted.entries(access.namespace)[: PAGE_SIZE + 1])
    more = len(entries) > PAGE_SIZE
    entries = entries[:PAGE_SIZE]
    next_params = request.GET.copy()
    if more:
        next_params["before"] = _cursor(access.namespace, entries[-1])
    context = {
        "access": access,
        "memberships": memberships(request),
        "wanted": wanted,
        "actions": AuditAction.choices,
        "rows": [_row(e) for e in entries],
        "next_query": next_params.urlencode() if more else "",
    }
    return render(request, "ui/audit_log.html", context)
