"""A tenant admin adds a person who has no account yet: the account is created with a
one-time password, shown on this answer only, and made a member with the role chosen.

The same operation as ``manage.py member grant --new-user`` and the members REST call
with ``new_user`` (:func:`executions.provisioning.member_create_user`), audited alike.
"""

from __future__ import annotations

import uuid

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from chronicle.errors import ChronicleError
from executions import provisioning
from executions.ui.access import actor, admin, memberships
from executions.ui.settings import TABS
from namespaces.models import MemberRole


class NewPersonForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    email = forms.EmailField(required=False, label="Email (optional)")
    role = forms.ChoiceField(choices=MemberRole.choices, initial=MemberRole.VIEWER, label="Role")
    reason = forms.CharField(max_length=2000, label="Reason")


@login_required
@require_http_methods(["GET", "POST"])
def new_person(request: HttpRequest, namespace: str) -> HttpResponse:
    access = admin(request, namespace)
    form = NewPersonForm(request.POST or None)
    error = created = password = None
    if request.method == "POST":
        if not form.is_valid():
            error = "; ".join(f"{name}: {' '.join(map(str, errs))}" for name, errs in form.errors.items())
        else:
            data = form.cleaned_data
            caller = provisioning.Caller(actor(request), data["reason"])
            try:
                created, password = provisioning.member_create_user(
                    caller, access.namespace, data["username"], data["role"], data["email"]
                )
                form = NewPersonForm()
            except ChronicleError as refused:
                error = refused.message
    context = {
        "access": access,
        "tab": "ui-settings-members",
        "tabs": TABS,
        "memberships": memberships(request),
        "request_id": str(uuid.uuid4()),
        "form": form,
        "error": error,
        "created": created,
        "password": password,
    }
    return render(request, "ui/settings_new_person.html", context, status=400 if error else 200)
