"""Namespace settings pages for tenant admins: general settings, rate limits, search
attributes, members and API keys.

Any member reads the general settings, the rate limits and the search attributes (an
operator chasing a throttled worker needs them); only admins change them, and only admins
see members and keys. Every change goes through ``namespaces.services`` (or the search
attribute service) and is audited old → new; a key's secret is shown once and never logged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from chronicle.errors import ChronicleError
from executions import audit
from executions import search_attributes as search_attribute_service
from executions.models import AuditAction
from executions.ui import feedback
from executions.ui.access import Access, actor, admin, form_request_id, memberships, reader
from namespaces import services
from namespaces.models import (
    ApiKey,
    IndexedValueType,
    MemberRole,
    Membership,
    Namespace,
    Role,
    TaskQueueLimit,
)
from namespaces.rate_limits import (
    bucket_counts,
    dispatch_bucket_key,
    dispatch_limit_in_force,
    request_bucket_key,
)

TABS = (
    ("ui-settings", "General"),
    ("ui-settings-rate-limits", "Rate limits"),
    ("ui-settings-search-attributes", "Search attributes"),
    ("ui-settings-members", "Members"),
    ("ui-settings-api-keys", "API keys"),
)
ADMIN_ONLY_TABS = frozenset({"ui-settings-members", "ui-settings-api-keys"})


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=2000, strip=True, label="Reason")


def _settings_form(fields: tuple[str, ...]) -> type[forms.ModelForm[Namespace]]:
    """A form for these Namespace fields, validated by the model's own field definitions."""
    return forms.modelform_factory(Namespace, fields=fields)


GeneralForm = _settings_form(services.GENERAL_SETTINGS)
RateLimitForm = _settings_form(services.RATE_LIMIT_SETTINGS)
RateLimitForm.base_fields["request_rps"].label = "Requests per second"
RateLimitForm.base_fields["request_burst_ratio"].label = "Burst (× the request rate)"
RateLimitForm.base_fields["dispatch_rps"].label = "Task dispatches per second (0: no limit)"


class QueueLimitForm(forms.Form):
    task_queue = forms.CharField(max_length=255, label="Task queue")
    dispatch_rps = forms.FloatField(
        min_value=0, required=False, label="Dispatches per second (empty: remove)"
    )


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=[*MemberRole.choices, ("", "Remove from namespace")], required=False)


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=200, label="Key name")
    roles = forms.MultipleChoiceField(choices=Role.choices, widget=forms.CheckboxSelectMultiple)


class SearchAttributeForm(forms.Form):
    name = forms.CharField(max_length=255, label="Name")
    type = forms.ChoiceField(choices=IndexedValueType.choices, label="Type")


# -- shared page plumbing ------------------------------------------------------------------


def _page(
    request: HttpRequest, access: Access, tab: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    tabs = [(name, label) for name, label in TABS if access.is_admin or name not in ADMIN_ONLY_TABS]
    context.update(access=access, tab=tab, tabs=tabs, memberships=memberships(request))
    # A fresh id per rendered page: a resubmitted form repeats its id, a new one does not.
    context["request_id"] = str(uuid.uuid4())
    template = tab.removeprefix("ui-settings").strip("-").replace("-", "_") or "general"
    return render(request, f"ui/settings_{template}.html", context, status=status)


def _changing(
    request: HttpRequest, access: Access, action: str, target: str, change: Callable[[], dict[str, Any]]
) -> str | None:
    """Run one audited change of the namespace's settings; the error message, if refused.

    The form's request id makes a resubmitted form a no-op; an empty change (nothing
    differs) is not recorded.
    """
    reason = ReasonForm(request.POST)
    if not reason.is_valid():
        return "a reason is required"
    request_id = form_request_id(request)
    if audit.already_done(access.namespace, request_id) is not None:
        return None
    try:
        changes = change()
    except ValidationError as error:
        return "; ".join(
            f"{field.replace('_', ' ')}: {' '.join(msgs)}" for field, msgs in error.message_dict.items()
        )
    except ChronicleError as error:
        return error.message
    if not changes:
        feedback.nothing_changed(request)
        return None
    feedback.announce(
        request,
        audit.record(
            access.namespace,
            actor=actor(request),
            action=action,
            request_id=request_id,
            reason=reason.cleaned_data["reason"],
            target=target,
            old={name: value["old"] for name, value in changes.items()},
            new={name: value["new"] for name, value in changes.items()},
        ),
    )
    return None


def _read_only_unless_admin(access: Access, form: forms.BaseForm) -> forms.BaseForm:
    """Members who may not change the settings see the same fields, disabled."""
    if not access.is_admin:
        for field in form.fields.values():
            field.disabled = True
    return form


def _form_error(form: forms.BaseForm) -> str:
    return "; ".join(f"{field}: {' '.join(map(str, errors))}" for field, errors in form.errors.items())


# -- general ---------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def general(request: HttpRequest, namespace: str) -> HttpResponse:
    access = admin(request, namespace) if request.method == "POST" else reader(request, namespace)
    form = GeneralForm(instance=access.namespace)
    error = None
    if request.method == "POST":
        form = GeneralForm(request.POST, instance=Namespace.objects.get(pk=access.namespace.pk))
        if not form.is_valid():
            error = _form_error(form)
        else:
            values = {name: form.cleaned_data[name] for name in services.GENERAL_SETTINGS}
            error = _changing(
                request,
                access,
                AuditAction.SETTINGS_CHANGE,
                "namespace",
                lambda: services.namespace_settings_update(access.namespace, values),
            )
        if error is None:
            return redirect(reverse("ui-settings", args=[namespace]))
    context = {"form": _read_only_unless_admin(access, form), "error": error}
    return _page(request, access, "ui-settings", context, status=400 if error else 200)


# -- rate limits -------------------------------------------------------------------------------


def _rate_rows(namespace: Namespace) -> dict[str, Any]:
    """Each limit in force with its effective value and where that value comes from."""
    default_rps = Namespace._meta.get_field("request_rps").get_default()
    queue_limits = list(TaskQueueLimit.objects.filter(namespace=namespace).order_by("task_queue"))
    request_source = "platform default" if namespace.request_rps == default_rps else "namespace setting"
    burst = namespace.request_rps * namespace.request_burst_ratio
    rows: list[dict[str, Any]] = [
        {
            "key": request_bucket_key(namespace.id),
            "what": "API requests (namespace)",
            "effective": f"{namespace.request_rps:g}/s, bursts to {burst:g}",
            "source": request_source,
        },
        {
            "key": dispatch_bucket_key(namespace.id),
            "what": "Task dispatches (namespace)",
            "effective": f"{namespace.dispatch_rps:g}/s" if namespace.dispatch_rps > 0 else "no limit",
            "source": "namespace setting" if namespace.dispatch_rps > 0 else "platform default (none)",
        },
    ]
    for limit in queue_limits:
        in_force = dispatch_limit_in_force(namespace.dispatch_rps, limit.dispatch_rps)
        rows.append(
            {
                "key": dispatch_bucket_key(namespace.id, limit.task_queue),
                "what": f"Task dispatches on {limit.task_queue}",
                "effective": f"{in_force.rps:g}/s",
                "source": in_force.source,
                "queue": limit.task_queue,
                "queue_rps": limit.dispatch_rps,
            }
        )
    return {"rows": rows, "request_source": request_source}


@login_required
@require_http_methods(["GET", "POST"])
def rate_limits(request: HttpRequest, namespace: str) -> HttpResponse:
    access = admin(request, namespace) if request.method == "POST" else reader(request, namespace)
    form, queue_form, error = RateLimitForm(instance=access.namespace), QueueLimitForm(), None
    if request.method == "POST":
        if request.POST.get("form") == "queue":
            queue_form = QueueLimitForm(request.POST)
            error = (
                _form_error(queue_form)
                if not queue_form.is_valid()
                else _changing(
                    request,
                    access,
                    AuditAction.RATE_LIMIT_CHANGE,
                    f"task queue {queue_form.cleaned_data['task_queue']}",
                    lambda: services.queue_limit_set(
                        access.namespace,
                        queue_form.cleaned_data["task_queue"],
                        queue_form.cleaned_data["dispatch_rps"],
                    ),
                )
            )
        else:
            form = RateLimitForm(request.POST, instance=Namespace.objects.get(pk=access.namespace.pk))
            error = (
                _form_error(form)
                if not form.is_valid()
                else _changing(
                    request,
                    access,
                    AuditAction.RATE_LIMIT_CHANGE,
                    "namespace",
                    lambda: services.namespace_settings_update(
                        access.namespace,
                        {name: form.cleaned_data[name] for name in services.RATE_LIMIT_SETTINGS},
                    ),
                )
            )
        if error is None:
            return redirect(reverse("ui-settings-rate-limits", args=[namespace]))
    context = {
        "form": _read_only_unless_admin(access, form),
        "queue_form": queue_form,
        "error": error,
        **_rate_rows(access.namespace),
    }
    return _page(request, access, "ui-settings-rate-limits", context, status=400 if error else 200)


@login_required
@require_GET
def rate_counts(request: HttpRequest, namespace: str) -> JsonResponse:
    """Granted and throttled counts per limit, read by the page every few seconds for live rates."""
    access = reader(request, namespace)
    keys = [row["key"] for row in _rate_rows(access.namespace)["rows"]]
    counts = bucket_counts(keys)
    return JsonResponse(
        {
            "effective_request_rps": access.namespace.request_rps,
            "buckets": {
                key: {"granted": counts.get(key, (0, 0))[0], "throttled": counts.get(key, (0, 0))[1]}
                for key in keys
            },
        }
    )


# -- search attributes -------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def search_attributes(request: HttpRequest, namespace: str) -> HttpResponse:
    access = admin(request, namespace) if request.method == "POST" else reader(request, namespace)
    form, error = SearchAttributeForm(), None
    if request.method == "POST":
        form = SearchAttributeForm(request.POST)
        if not form.is_valid():
            error = _form_error(form)
        else:
            name, kind = form.cleaned_data["name"], form.cleaned_data["type"]

            def add() -> dict[str, Any]:
                created = search_attribute_service.add_attribute(access.namespace, name, kind)
                return {name: {"old": None, "new": kind}} if created else {}

            error = _changing(request, access, AuditAction.SEARCH_ATTRIBUTE_ADD, name, add)
        if error is None:
            return redirect(reverse("ui-settings-search-attributes", args=[namespace]))
    listed = search_attribute_service.list_attributes(access.namespace)
    context = {"form": form, "error": error, "custom": listed["custom"], "system": listed["system"]}
    return _page(request, access, "ui-settings-search-attributes", context, status=400 if error else 200)


# -- members -------------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def members(request: HttpRequest, namespace: str) -> HttpResponse:
    access = admin(request, namespace)
    form, error = MemberForm(), None
    if request.method == "POST":
        form = MemberForm(request.POST)
        if not form.is_valid():
            error = _form_error(form)
        else:
            username, role = form.cleaned_data["username"], form.cleaned_data["role"] or None
            error = _changing(
                request,
                access,
                AuditAction.MEMBER_CHANGE,
                username,
                lambda: services.membership_set(access.namespace, username, role),
            )
        if error is None:
            return redirect(reverse("ui-settings-members", args=[namespace]))
    rows = (
        Membership.objects.filter(namespace=access.namespace)
        .select_related("user")
        .order_by("user__username")
    )
    return _page(
        request,
        access,
        "ui-settings-members",
        {"form": form, "error": error, "rows": rows},
        status=400 if error else 200,
    )


# -- API keys ------------------------------------------------------------------------------------


def _revoking(request: HttpRequest, keys: QuerySet[ApiKey]) -> ApiKey | None:
    """The active key the page asks to confirm revoking (``?revoke=<id>``, or a refused revoke)."""
    source = (
        request.POST if request.method == "POST" and request.POST.get("form") == "revoke" else request.GET
    )
    raw = source.get("revoke") or source.get("key_id") or ""
    return keys.filter(pk=int(raw), revoked_at__isnull=True).first() if raw.isdigit() else None


@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request: HttpRequest, namespace: str) -> HttpResponse:
    access = admin(request, namespace)
    form, error, secret = ApiKeyForm(), None, None
    if request.method == "POST":
        if request.POST.get("form") == "revoke":
            raw_id = request.POST.get("key_id", "")
            key_id = int(raw_id) if raw_id.isdigit() else 0

            def revoke() -> dict[str, Any]:
                key = services.api_key_revoke(access.namespace, key_id)
                return {key.name: {"old": "active", "new": "revoked"}}

            error = _changing(request, access, AuditAction.API_KEY_REVOKE, f"key {key_id}", revoke)
        else:
            form = ApiKeyForm(request.POST)
            if not form.is_valid():
                error = _form_error(form)
            else:
                issued: list[str] = []

                def create() -> dict[str, Any]:
                    key, raw = services.api_key_issue(
                        namespace=access.namespace,
                        name=form.cleaned_data["name"],
                        roles=form.cleaned_data["roles"],
                    )
                    issued.append(raw)
                    return {key.name: {"old": None, "new": {"prefix": key.prefix, "roles": key.roles}}}

                error = _changing(
                    request, access, AuditAction.API_KEY_CREATE, form.cleaned_data["name"], create
                )
                # Shown on this answer only: the server keeps the key's hash, never the key.
                secret = issued[0] if issued else None
                if secret:
                    form = ApiKeyForm()
        if error is None and secret is None:
            return redirect(reverse("ui-settings-api-keys", args=[namespace]))
    keys = ApiKey.objects.filter(namespace=access.namespace).order_by("revoked_at", "-created_at")
    context = {
        "form": form,
        "error": error,
        "keys": keys,
        "secret": secret,
        "revoking": _revoking(request, keys),
    }
    return _page(request, access, "ui-settings-api-keys", context, status=400 if error else 200)
