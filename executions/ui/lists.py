"""The executions list: the visibility query with quick filters, saved and built-in views,
and the CSV export of every matching run."""

from __future__ import annotations

import csv
import io
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from chronicle.errors import ChronicleError, ErrorCode
from executions import audit, saved_views, visibility
from executions.models import AuditAction
from executions.ui import errors, feedback, runs
from executions.ui.access import actor, form_request_id, memberships, reader
from history.models import ExecutionStatus, WorkflowExecution
from namespaces.models import Namespace

SORTABLE = ("StartTime", "CloseTime")
LIST_PAGE_SIZE = 50
EXPORT_PAGE_SIZE = 1000
EXPORT_COLUMNS = ("workflow_id", "run_id", "workflow_type", "status", "start_time", "close_time")
EXPORT_FIELDS = ("workflow_id", "workflow_type", "status")
QUERY_EXAMPLES = (
    'ExecutionStatus = "Running"',
    'WorkflowType = "Order" AND StartTime > "2026-01-01T00:00:00Z"',
    'WorkflowId STARTS_WITH "order-" ORDER BY CloseTime DESC',
    "WorkflowTaskAttempt > 1",
    'FailureMessage = "card 4242 declined"',
)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _split_order(namespace: Namespace, query: str) -> tuple[str, str]:
    """The query's filter and its ORDER BY clause, after checking the whole query is valid."""
    visibility.search(namespace, query)  # raises VisibilityQueryError with the caret position
    order = next((t for t in visibility.tokenize(query) if t.kind == "keyword" and t.text == "ORDER"), None)
    if order is None:
        return query, ""
    return query[: order.position].strip(), query[order.position :].strip()


# One token with no spaces, quotes, comparisons or parentheses is never a valid query: it is
# read as a workflow id (or its start) pasted from a ticket, or a run id.
ID_LIKE = re.compile(r"[^\s\"'=<>!(),]+")


def id_query(typed: str) -> str:
    """The query a bare id stands for (``WorkflowId STARTS_WITH``, or ``RunId =`` as well for
    a uuid), or "" when ``typed`` is not a bare id."""
    if not ID_LIKE.fullmatch(typed):
        return ""
    by_workflow_id = f"WorkflowId STARTS_WITH {_quoted(typed)}"
    try:
        run_id = uuid.UUID(typed)
    except ValueError:
        return by_workflow_id
    return f"RunId = {_quoted(str(run_id))} OR {by_workflow_id}"


def _compose(*filters: str) -> str:
    return " AND ".join(f"({f})" for f in filters if f)


@dataclass
class ListRequest:
    query: str
    status: str
    workflow_type: str
    sort: str
    descending: bool
    token: str
    view: str = ""
    typed: str = ""  # the search box as typed (a bare id is listed through ``id_query``)
    by_id: bool = False

    @classmethod
    def of(cls, request: HttpRequest) -> ListRequest:
        get = request.GET
        status = get.get("status", "")
        sort = get.get("sort", "StartTime")
        view = saved_views.builtin(get.get("view", ""))
        typed = get.get("q", "").strip()
        by_id = id_query(typed) if not view else ""
        return cls(
            query=view.query() if view else (by_id or typed),
            status=status if status in ExecutionStatus.values else "",
            workflow_type=get.get("type", "").strip(),
            sort=sort if sort in SORTABLE else "StartTime",
            descending=get.get("dir", "desc") != "asc",
            token=get.get("token", ""),
            view=view.slug if view else "",
            typed=view.query() if view else typed,
            by_id=bool(by_id),
        )

    def queries(self, namespace: Namespace) -> tuple[str, str]:
        """(the listing query with filters and order, the query the status counts use)."""
        where, order = _split_order(namespace, self.query)
        type_filter = f"WorkflowType = {_quoted(self.workflow_type)}" if self.workflow_type else ""
        status_filter = f"ExecutionStatus = {_quoted(self.status)}" if self.status else ""
        order = order or f"ORDER BY {self.sort} {'DESC' if self.descending else 'ASC'}"
        return f"{_compose(where, type_filter, status_filter)} {order}".strip(), _compose(where, type_filter)

    def filter_query(self, namespace: Namespace) -> str:
        """The whole selection as one query without an order: what batch jobs and views keep."""
        where, _ = _split_order(namespace, self.query)
        type_filter = f"WorkflowType = {_quoted(self.workflow_type)}" if self.workflow_type else ""
        status_filter = f"ExecutionStatus = {_quoted(self.status)}" if self.status else ""
        return _compose(where, type_filter, status_filter)


def list_url(namespace: str, query: str) -> str:
    """The executions list showing ``query``'s matches."""
    return reverse("ui-executions", args=[namespace]) + "?" + urlencode({"q": query})


def _exact_run_url(namespace: Namespace, typed: str) -> str:
    """The page a bare id names exactly (its workflow's latest run, or the run with that
    run id), or "" when it is only the start of ids."""
    if runs.latest_run(namespace, typed) is not None:
        return runs.workflow_url(namespace.name, typed)
    try:
        run = WorkflowExecution.objects.filter(namespace=namespace, run_id=uuid.UUID(typed)).first()
    except ValueError:
        return ""
    return runs.run_url(namespace.name, run.workflow_id, run.run_id) if run else ""


@login_required
@require_GET
def execution_list(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    wanted = ListRequest.of(request)
    if wanted.by_id and not wanted.token and (exact := _exact_run_url(access.namespace, wanted.typed)):
        return redirect(exact)
    context: dict[str, Any] = {"access": access, "wanted": wanted, "examples": QUERY_EXAMPLES}
    context["statuses"] = ExecutionStatus.values
    context["memberships"] = memberships(request)
    context["builtin_views"] = saved_views.BUILTIN_VIEWS
    context["saved_views"] = [
        (view, saved_views.deletable(view, _user_id(request), is_admin=access.is_admin))
        for view in saved_views.visible_views(access.namespace, _user_id(request))
    ]
    context["request_id"] = form_request_id(request)
    try:
        listing, counted = wanted.queries(access.namespace)
        rows, token = visibility.page(
            access.namespace, listing, page_size=LIST_PAGE_SIZE, next_page_token=wanted.token
        )
        context["counts"] = visibility.count_by_status(access.namespace, counted)
        context["selection"] = selection = wanted.filter_query(access.namespace)
    except ChronicleError as error:
        context["error"] = error
        context["snippet"] = error.details.get("snippet", "")
        return render(request, "ui/executions.html", context, status=error.status)
    next_params = request.GET.copy()
    next_params["token"] = token or ""
    context.update(rows=rows, next_query=next_params.urlencode() if token else "")
    context["selection_params"] = urlencode({"q": selection})
    return render(request, "ui/executions.html", context)


# ---------------------------------------------------------------- saved views


def _sort_of(request: HttpRequest) -> str:
    """The list's sort picker as a view keeps it ("CloseTime asc"); '' for the default."""
    field, direction = request.POST.get("sort", ""), request.POST.get("dir", "desc")
    return f"{field} {'asc' if direction == 'asc' else 'desc'}" if field in SORTABLE else ""


def _user_id(request: HttpRequest) -> int:
    """The signed-in user's id (every page here needs a sign-in)."""
    return request.user.pk or 0


@login_required
@require_POST
def view_save(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    request_id = form_request_id(request)
    query = request.POST.get("q", "").strip()
    if audit.already_done(access.namespace, request_id) is None:
        try:
            view = saved_views.save_view(
                access.namespace,
                _user_id(request),
                name=request.POST.get("name", ""),
                query=query,
                shared=request.POST.get("shared") == "on",
                may_share=access.can_act,
                sort=_sort_of(request),
            )
        except ChronicleError as error:
            if error.code == ErrorCode.PERMISSION_DENIED:
                raise PermissionDenied(error.message) from None
            return errors.refused(request, error.message, error.status)
        saved = audit.record(
            access.namespace,
            actor=actor(request),
            action=AuditAction.VIEW_SAVE,
            request_id=request_id,
            target=f"view:{view.name}",
            new={"query": view.query, "shared": view.shared},
        )
        feedback.announce(request, saved)
    return redirect(list_url(namespace, query))


@login_required
@require_POST
def view_delete(request: HttpRequest, namespace: str, view_id: int) -> HttpResponse:
    access = reader(request, namespace)
    request_id = form_request_id(request)
    if audit.already_done(access.namespace, request_id) is None:
        try:
            view = saved_views.delete_view(
                access.namespace, _user_id(request), view_id, is_admin=access.is_admin
            )
        except ChronicleError as error:
            if error.code == ErrorCode.NOT_FOUND:
                raise Http404(error.message) from None
            raise PermissionDenied(error.message) from None
        deleted = audit.record(
            access.namespace,
            actor=actor(request),
            action=AuditAction.VIEW_DELETE,
            request_id=request_id,
            target=f"view:{view.name}",
            old={"query": view.query, "shared": view.shared},
        )
        feedback.announce(request, deleted)
    return redirect(reverse("ui-executions", args=[namespace]))


# ---------------------------------------------------------------- export


def _csv_line(values: Iterable[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()


def _export_row(run: WorkflowExecution) -> str:
    close = run.close_time.isoformat() if run.close_time else ""
    return _csv_line(
        (run.workflow_id, run.run_id, run.workflow_type, run.status, run.start_time.isoformat(), close)
    )


def export_pages(namespace: Namespace, query: str) -> Iterable[str]:
    """The CSV of every run ``query`` matches, one keyset page of rows in memory at a time."""
    yield _csv_line(EXPORT_COLUMNS)
    token = ""
    while True:
        rows, next_token = visibility.page(
            namespace, query, page_size=EXPORT_PAGE_SIZE, next_page_token=token, only=EXPORT_FIELDS
        )
        yield "".join(_export_row(run) for run in rows)
        if next_token is None:
            return
        token = next_token


async def _streamed(pages: Iterable[str]) -> AsyncIterator[str]:
    """Each page is read in the sync world (the ORM) and sent before the next is read."""
    iterator = iter(pages)
    while (chunk := await sync_to_async(_next_chunk)(iterator)) is not None:
        yield chunk


def _next_chunk(chunks: Iterator[str]) -> str | None:
    return next(chunks, None)


@login_required
@require_GET
def export_csv(request: HttpRequest, namespace: str) -> HttpResponse | StreamingHttpResponse:
    access = reader(request, namespace)
    wanted = ListRequest.of(request)
    try:
        listing, _ = wanted.queries(access.namespace)
        visibility.search(access.namespace, listing)
    except ChronicleError as error:
        return HttpResponse(error.message, status=error.status, content_type="text/plain")
    response = StreamingHttpResponse(
        _streamed(export_pages(access.namespace, listing)), content_type="text/csv"
    )
    response["Content-Disposition"] = f'attachment; filename="{access.namespace.name}-executions.csv"'
    return response
