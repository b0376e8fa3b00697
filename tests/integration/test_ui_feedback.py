"""What the UI says back: success messages, kept input, suggestions and error pages,
through Django's test client on real PostgreSQL."""

from __future__ import annotations

import pytest
from django.test import Client

from history import kernel
from matching.dispatch import poll_once
from namespaces.models import ApiKey, MemberRole, Namespace
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory, scope_of

pytestmark = pytest.mark.django_db


def member_of(namespace: Namespace, role: str) -> Client:
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=role).user)
    return client


def test_an_action_says_what_it_did_on_the_page_it_lands_on() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace, workflow_id="order-42")
    operator = member_of(namespace, MemberRole.OPERATOR)
    url = f"/ns/shop/workflows/order-42/runs/{run.run_id}/"
    form = {"request_id": "s1", "reason": "nudge", "signal_name": "approve"}
    landed = operator.post(url + "signal/", form, follow=True).content.decode()
    assert 'id="messages"' in landed and "Sent signal “approve” to order-42." in landed
    assert 'id="messages"' not in operator.get(url).content.decode()


def test_a_settings_form_that_changes_nothing_says_so_and_one_that_does_says_saved() -> None:
    namespace = NamespaceFactory(name="shop")
    admin = member_of(namespace, MemberRole.ADMIN)
    url = "/ns/shop/settings/rate-limits/"
    values = {"form": "namespace", "request_rps": namespace.request_rps, "reason": "check"}
    values.update(request_burst_ratio=namespace.request_burst_ratio, dispatch_rps=namespace.dispatch_rps)
    assert "Nothing changed" in admin.post(url, {**values, "request_id": "a"}, follow=True).content.decode()
    saved = admin.post(url, {**values, "request_rps": 99, "request_id": "b"}, follow=True).content.decode()
    assert "Saved the rate limits (namespace)." in saved


def test_a_refused_settings_form_keeps_the_reason_in_its_own_form_only() -> None:
    namespace = NamespaceFactory(name="shop")
    admin = member_of(namespace, MemberRole.ADMIN)
    form = {"form": "namespace", "request_rps": -5, "reason": "holiday traffic", "reason_for": "namespace"}
    refused = admin.post("/ns/shop/settings/rate-limits/", form)
    body = refused.content.decode()
    assert refused.status_code == 400
    assert body.count('value="holiday traffic"') == 1 and 'id="reason-namespace"' in body


def test_the_signal_form_suggests_the_signals_runs_of_the_type_received() -> None:
    namespace = NamespaceFactory(name="shop")
    earlier = ExecutionFactory(namespace=namespace, workflow_type="Order")
    kernel.signal_workflow_execution(
        namespace, workflow_id=earlier.workflow_id, run_id=None, signal_name="approve", input=[]
    )
    other_type = ExecutionFactory(namespace=namespace, workflow_type="Refund")
    kernel.signal_workflow_execution(
        namespace, workflow_id=other_type.workflow_id, run_id=None, signal_name="void", input=[]
    )
    run = ExecutionFactory(namespace=namespace, workflow_type="Order")
    page = member_of(namespace, MemberRole.OPERATOR).get(
        f"/ns/shop/workflows/{run.workflow_id}/runs/{run.run_id}/signal/"
    )
    body = page.content.decode()
    assert '<option value="approve">' in body and "void" not in body and 'list="known-signals"' in body


def test_a_refused_action_is_a_styled_403_with_the_way_back() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace)
    viewer = member_of(namespace, MemberRole.VIEWER)
    refused = viewer.get(f"/ns/shop/workflows/{run.workflow_id}/runs/{run.run_id}/terminate/")
    body = refused.content.decode()
    assert refused.status_code == 403 and "You cannot do this here" in body
    assert 'href="/ns/shop/"' in body and "operator or admin role" in body


def test_an_unknown_page_is_a_styled_404_even_signed_out() -> None:
    response = Client().get("/no/such/page/")
    body = response.content.decode()
    assert response.status_code == 404 and "Nothing here" in body and 'href="/login/?next=' in body


def test_a_refused_post_without_a_form_of_its_own_is_a_page_with_the_way_back() -> None:
    namespace = NamespaceFactory(name="shop")
    viewer = member_of(namespace, MemberRole.VIEWER)
    refused = viewer.post(
        "/ns/shop/views/", {"name": "", "q": ""}, HTTP_REFERER="http://testserver/ns/shop/?q=x"
    )
    body = refused.content.decode()
    assert refused.status_code == 400 and "This was refused" in body
    assert 'href="http://testserver/ns/shop/?q=x">Back to the form' in body
    elsewhere = viewer.post("/ns/shop/views/", {"name": ""}, HTTP_REFERER="https://evil.example/")
    assert "Back to the form" not in elsewhere.content.decode()


def test_the_reset_preview_draws_no_empty_pending_work_heading() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace, task_queue="q")
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(scope=scope_of(task), task_token=task["task_token"], commands=[])
    operator = member_of(namespace, MemberRole.OPERATOR)
    preview = operator.get(
        f"/ns/shop/workflows/{run.workflow_id}/runs/{run.run_id}/reset/", {"point": "last"}
    )
    assert preview.status_code == 200 and "What the reset will do" in preview.content.decode()
    assert "Pending work" not in preview.content.decode()


def test_an_api_key_is_revoked_through_a_confirmation_and_a_new_one_has_a_copy_button() -> None:
    namespace = NamespaceFactory(name="shop")
    admin = member_of(namespace, MemberRole.ADMIN)
    created = admin.post("/ns/shop/settings/api-keys/", {"name": "ci", "roles": ["client"], "reason": "ci"})
    body = created.content.decode()
    assert 'class="notice"' in body and "Copy the key" in body and 'class="alert"' not in body
    assert 'name="key_id"' not in body  # no revoke field on every row, only a link to confirm
    key = ApiKey.objects.get(namespace=namespace)

    confirm = admin.get("/ns/shop/settings/api-keys/", {"revoke": key.pk}).content.decode()
    assert 'id="confirm-revoke"' in confirm and "Revoke ci</button>" in confirm
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None
    done = admin.post(
        "/ns/shop/settings/api-keys/", {"form": "revoke", "key_id": key.pk, "reason": "leaked"}, follow=True
    )
    assert "Revoked the API key" in done.content.decode()
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
