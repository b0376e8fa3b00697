"""The line a page shows after an action succeeded ("Terminated order-42.").

Every action the UI takes is recorded in the audit log first, so the message is phrased
from that entry (its action, run, target and details): one place says what each action
did, in words, whichever page took it. Pages show it through Django's messages framework
on the page the action redirects to (``ui/base.html`` draws the list).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib import messages
from django.http import HttpRequest

from executions.models import AuditAction, AuditEntry

WORDS: dict[str, str] = {
    AuditAction.TERMINATE: "Terminated {workflow_id}.",
    AuditAction.CANCEL: "Asked {workflow_id} to cancel; the workflow decides how it stops.",
    AuditAction.SIGNAL: "Sent signal “{signal_name}” to {workflow_id}.",
    AuditAction.RESET: "Reset {workflow_id} to event {point}: this is the new run.",
    AuditAction.BATCH_START: "Started batch job {target}.",
    AuditAction.BATCH_RATE: "Changed the rate cap of batch job {target}.",
    AuditAction.BATCH_STOP: "Stopped batch job {target}.",
    AuditAction.VIEW_SAVE: "Saved the view “{target}”.",
    AuditAction.VIEW_DELETE: "Deleted the view “{target}”.",
    AuditAction.SCHEDULE_PAUSE: "Paused schedule {target}.",
    AuditAction.SCHEDULE_UNPAUSE: "Unpaused schedule {target}.",
    AuditAction.SCHEDULE_TRIGGER: "Triggered schedule {target}.",
    AuditAction.SCHEDULE_BACKFILL: "Started the backfill of schedule {target}.",
    AuditAction.SCHEDULE_DELETE: "Deleted schedule {target}.",
    AuditAction.SETTINGS_CHANGE: "Saved the namespace settings.",
    AuditAction.RATE_LIMIT_CHANGE: "Saved the rate limits ({target}).",
    AuditAction.SEARCH_ATTRIBUTE_ADD: "Added the search attribute {target}.",
    AuditAction.MEMBER_CHANGE: "Changed the membership of {target}.",
    AuditAction.API_KEY_CREATE: "Created the API key {target}.",
    AuditAction.API_KEY_REVOKE: "Revoked the API key ({target}).",
}


def words_for(entry: AuditEntry) -> str:
    """What ``entry``'s action did, in a sentence (a missing detail reads as "")."""
    values: defaultdict[str, Any] = defaultdict(str, entry.details or {})
    values.update(workflow_id=entry.workflow_id or "", target=(entry.target or "").split(":", 1)[-1])
    return WORDS.get(entry.action, "Done.").format_map(values)


def announce(request: HttpRequest, entry: AuditEntry) -> None:
    """Show the success of ``entry``'s action on the next page."""
    messages.success(request, words_for(entry))


def nothing_changed(request: HttpRequest) -> None:
    messages.info(request, "Nothing changed: the form held the values already in force.")
