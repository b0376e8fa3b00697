"""A superuser creates a namespace from the UI, as ``chronicle namespace create``, ``manage.py
namespace create`` and ``POST /api/v1/namespaces`` do: the same operation
(:func:`executions.provisioning.namespace_create`), so the same checks and the same first
entry in the new namespace's audit log.

Creating namespaces is above every tenant, so only a superuser sees the link and the page
(anyone else gets 403). A namespace nobody belongs to cannot be opened in the UI, so by
default the superuser also becomes its admin (an audited membership, as the members page
grants it) and lands on its settings.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from chronicle.errors import ChronicleError
from executions import provisioning
from executions.ui.access import actor, memberships
from namespaces.models import MemberRole, Namespace


class NewNamespaceForm(forms.Form):
    name = forms.CharField(max_length=255, label="Name")
    description = forms.CharField(required=False, max_length=2000, label="Description (optional)")
    retention_days = forms.IntegerField(
        required=False, min_value=0, label="Retention of closed runs, in days (empty: the default)"
    )
    join_as_admin = forms.BooleanField(required=False, initial=True, label="Make me its admin")
    reason = forms.CharField(max_length=2000, label="Reason")

    def settings(self) -> dict[str, Any]:
        """The settings the operator filled in (an empty field keeps the default)."""
        data = self.cleaned_data
        return {key: data[key] for key in ("description", "retention_days") if data[key] not in (None, "")}


def _create(request: HttpRequest, form: NewNamespaceForm) -> Namespace:
    """The namespace and, if asked, the superuser's admin membership: both or neither."""
    data = form.cleaned_data
    caller = provisioning.Caller(actor(request), data["reason"])
    with transaction.atomic():
        namespace = provisioning.namespace_create(caller, data["name"], form.settings())
        if data["join_as_admin"]:
            provisioning.member_set(caller, namespace, actor(request), MemberRole.ADMIN)
    return namespace


@login_required
@require_http_methods(["GET", "POST"])
def new_namespace(request: HttpRequest) -> HttpResponse:
    if not request.user.is_superuser:
        raise PermissionDenied("creating a namespace needs a superuser")
    form = NewNamespaceForm(request.POST or None)
    error = None
    if request.method == "POST":
        if not form.is_valid():
            error = "; ".join(f"{name}: {' '.join(map(str, errs))}" for name, errs in form.errors.items())
        else:
            try:
                namespace = _create(request, form)
            except ChronicleError as refused:
                error = refused.message
            else:
                messages.success(request, f"Namespace {namespace.name} created.")
                if form.cleaned_data["join_as_admin"]:
                    return redirect("ui-settings", namespace.name)
                return redirect("ui-namespace-new")
    context = {"memberships": memberships(request), "form": form, "error": error}
    return render(request, "ui/namespace_new.html", context, status=400 if error else 200)
