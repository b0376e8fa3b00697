"""The execution page's timeline and live mode, on real PostgreSQL.

The runs are driven through the kernel in process (workflow and activity tasks, the
shard owner's timer and transfer steps), so the history is the one the product writes.
The live socket is tested against a real frontend process (the ``stack`` fixture), with
the session cookie of a signed-in user and a signal written through the kernel in this
process: the frontend hears of it only through PostgreSQL, as it would in production.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.test import Client
from websockets.exceptions import ConnectionClosedOK, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from executions.ui import timeline, timeline_scale
from history import kernel
from history.kernel.timers import ShardFence, fire_timers
from history.kernel.transfers import process_transfer
from history.models import HistoryEvent, Shard, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import MemberRole, Namespace
from tests.conftest import Stack, wait_until
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory, scope_of

# Timers and transfers commit in their own (durable) transactions.
in_database = pytest.mark.django_db(transaction=True)


def command(command_type: str, **attributes: Any) -> dict[str, Any]:
    return {"command_type": command_type, "attributes": attributes}


def activity(activity_id: str, activity_type: str, attempts: int) -> dict[str, Any]:
    return command(
        "ScheduleActivityTask",
        activity_id=activity_id,
        activity_type=activity_type,
        start_to_close_timeout=30,
        # Retries far off: the story fires them itself, before any running shard owner would.
        retry_policy={"initial_interval": 3600, "maximum_attempts": attempts},
    )


def fence(run: WorkflowExecution) -> ShardFence:
    shard, _ = Shard.objects.get_or_create(shard_id=run.shard_id, defaults={"range_id": 1})
    return ShardFence(shard.shard_id, shard.range_id)


def fire(run: WorkflowExecution, kind: str) -> None:
    """Fire the run's due rows of ``kind`` now, as the shard owner would when they are due."""
    rows = [(t.id, str(run.run_id)) for t in TimerTask.objects.filter(run=run, kind=kind)]
    assert rows, f"no {kind} row to fire"
    fire_timers(fence(run), rows)


def fail_attempt(namespace: Namespace, queue: str, activity_type: str, message: str) -> None:
    task = poll_once(namespace, queue, "activity", "test-worker")
    assert task is not None and task["activity_type"]["name"] == activity_type, task
    kernel.respond_activity_task_failed(
        scope=scope_of(task), task_token=task["task_token"], failure={"message": message}
    )


def busy_run(namespace: Namespace) -> WorkflowExecution:
    """A run with a retried then completed activity, a retrying one, a failed one, a timer,
    a child and a signal."""
    run = ExecutionFactory(namespace=namespace, workflow_id="order-7", workflow_type="Order", task_queue="q")
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[
            activity("charge-1", "Charge", 3),
            command("StartTimer", timer_id="cool-off", start_to_fire_timeout=60),
            # On a queue of its own: the child's first workflow task must not be the one
            # this story's polls of "q" pick up (a running shard owner may start it first).
            command(
                "StartChildWorkflowExecution",
                workflow_id="order-7-ship",
                workflow_type={"name": "Ship"},
                task_queue={"name": "ship"},
            ),
        ],
    )
    fail_attempt(namespace, "q", "Charge", "card declined")
    fire(run, TimerKind.ACTIVITY_RETRY)
    fail_attempt(namespace, "q", "Charge", "gateway timeout")
    fire(run, TimerKind.ACTIVITY_RETRY)
    charge = poll_once(namespace, "q", "activity", "test-worker")
    assert charge is not None and charge["attempt"] == 3
    kernel.respond_activity_task_completed(
        scope=scope_of(charge), task_token=charge["task_token"], result={"ok": True}
    )
    fire(run, TimerKind.USER_TIMER)
    # A running shard owner may carry the start duty first; either way the child starts.
    for duty in TimerTask.objects.filter(run=run, kind=TimerKind.START_CHILD):
        process_transfer(fence(run), duty.id)
    wait_until(
        lambda: HistoryEvent.objects.filter(run=run, event_type="ChildWorkflowExecutionStarted").exists()
    )
    kernel.signal_workflow_execution(
        namespace, workflow_id=run.workflow_id, run_id=None, signal_name="address-changed", input=[]
    )
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[activity("refund-1", "Refund", 1), activity("mail-1", "Mail", 5)],
    )
    fail_attempt(namespace, "q", "Refund", "refund refused")
    fail_attempt(namespace, "q", "Mail", "smtp down")
    return WorkflowExecution.objects.get(run_id=run.run_id)


def signed_in(namespace: Namespace, role: str = MemberRole.VIEWER) -> Client:
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=role).user)
    return client


def page_url(run: WorkflowExecution) -> str:
    return f"/ns/{run.namespace.name}/workflows/{run.workflow_id}/runs/{run.run_id}/"


def event_id(run: WorkflowExecution, event_type: str, **attributes: Any) -> int:
    events = HistoryEvent.objects.filter(run=run, event_type=event_type).order_by("event_id")
    for event in events:
        if all(event.attributes.get(k) == v for k, v in attributes.items()):
            return event.event_id
    raise AssertionError(f"no {event_type} with {attributes}")


def labels(body: str) -> list[str]:
    return [
        html.unescape(label)
        for label in re.findall(
            r'class="tl-(?:bar|point)[^"]*" href="[^"]*"'
            r' style="[^"]*" title="[^"]*" aria-label="([^"]*)"',
            body,
        )
    ]


def bar(body: str, name: str) -> tuple[str, str]:
    """(href, accessible name) of the one bar whose name starts with ``name``."""
    found = [
        (href, html.unescape(label))
        for href, label in re.findall(
            r'class="tl-bar[^"]*" href="([^"]*)" style="[^"]*" title="[^"]*"'
            r' aria-label="([^"]*)"',
            body,
        )
        if html.unescape(label).startswith(name + ":")
    ]
    assert len(found) == 1, (name, found)
    return found[0]


# ---------------------------------------------------------------- the timeline


@in_database
def test_the_timeline_shows_attempts_failures_timers_children_and_signals() -> None:
    namespace = NamespaceFactory(name="shop")
    run = busy_run(namespace)
    body = signed_in(namespace).get(page_url(run)).content.decode()

    charge_href, charge = bar(body, "Charge")
    charge_scheduled = event_id(run, "ActivityTaskScheduled", activity_id="charge-1")
    assert charge_href == f"#event-{charge_scheduled}"
    assert "Completed, attempt 3 of 3" in charge and "attempt 2 failed: gateway timeout" in charge
    assert f"events {charge_scheduled}, " in charge

    _, refund = bar(body, "Refund")
    assert refund.startswith("Refund: Failed") and "Failed: refund refused" in refund

    _, mail = bar(body, "Mail")  # retrying: its attempt and failure come from the pending row
    assert mail.startswith("Mail: Running, attempt 2 of 5") and "attempt 1 failed: smtp down" in mail
    assert "Mail (mail-1): scheduled, attempt 2; last failure: smtp down" in html.unescape(body)

    _, timer = bar(body, "cool-off")
    fired = event_id(run, "TimerFired", timer_id="cool-off")
    assert timer.startswith("cool-off: Completed") and f", {fired})" in timer

    child = WorkflowExecution.objects.get(namespace=namespace, workflow_id="order-7-ship")
    assert f'<a href="/ns/shop/workflows/order-7-ship/runs/{child.run_id}/">order-7-ship</a>' in body
    assert bar(body, "order-7-ship")[1].startswith("order-7-ship: Running")

    signal = event_id(run, "WorkflowExecutionSignaled")
    assert "Signal address-changed at " in " ".join(labels(body))
    assert f'href="#event-{signal}"' in body
    assert bar(body, "Order")[1].startswith("Order: Running")
    assert 'tl-bar tl-completed tl-retried"' in body


@in_database
def test_a_thirty_day_wait_is_folded_so_the_work_either_side_stays_readable() -> None:
    namespace = NamespaceFactory(name="shop")
    start = kernel.StartRequest(workflow_id="order-30d", workflow_type="Order", task_queue="q30")
    run = WorkflowExecution.objects.get(run_id=kernel.start_workflow_execution(namespace, start).run_id)
    task = poll_once(namespace, "q30", "workflow", "test-worker")
    assert task is not None
    wait = command("StartTimer", timer_id="return-window", start_to_fire_timeout=30 * 86400)
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[wait]
    )
    # The wait began thirty days ago: move what was written so far back, then let it fire.
    HistoryEvent.objects.filter(run=run).update(event_time=F("event_time") - timedelta(days=30))
    fire(run, TimerKind.USER_TIMER)
    # Closed at once, so the busy time after the wait ends at the close, not at "now": the
    # drawing does not depend on how long the page took to be asked for.
    kernel.terminate_workflow_execution(namespace, workflow_id="order-30d", run_id=None, reason="drawn")
    started = event_id(run, "TimerStarted")

    body = html.unescape(signed_in(namespace).get(page_url(run)).content.decode())
    assert f"30.0 d with no events after event {started}" in body
    assert 'class="tl-fold"' in body and "30.0 d idle" in body
    # The first workflow task is drawn wide, not as a sliver; the timer's bar is the fold.
    task_bars = re.findall(
        r'class="tl-bar tl-completed" href="[^"]*" style="left:([\d.]+)%;width:([\d.]+)%"', body
    )
    (_, first_task_width), (_, timer_width) = task_bars
    assert float(first_task_width) > 5 and float(timer_width) == timeline_scale.FOLDED_WIDTH_PERCENT


@in_database
def test_bars_link_to_the_table_page_that_shows_their_event() -> None:
    namespace = NamespaceFactory(name="shop")
    run = busy_run(namespace)
    viewer = signed_in(namespace)
    later = viewer.get(page_url(run) + "?after=20").content.decode()
    charge_scheduled = event_id(run, "ActivityTaskScheduled", activity_id="charge-1")
    assert charge_scheduled <= 20
    assert bar(later, "Charge")[0] == f"?after=0#event-{charge_scheduled}"


@in_database
def test_the_timeline_reads_the_history_in_one_query(django_assert_num_queries: Any) -> None:
    namespace = NamespaceFactory(name="shop")
    run = busy_run(namespace)
    with django_assert_num_queries(1):
        drawn = timeline.build(run, [], namespace="shop", shown=(1, 50), page_size=50)
    assert [lane.kind for lane in drawn.lanes[:3]] == ["workflow", "workflow-task", "signal"]
    assert drawn.event_count == run.next_event_id - 1


@in_database
def test_a_closed_run_shows_its_outcome_and_what_was_left_open() -> None:
    namespace = NamespaceFactory(name="shop")
    run = busy_run(namespace)
    kernel.terminate_workflow_execution(namespace, workflow_id=run.workflow_id, run_id=None, reason="stop")
    body = signed_in(namespace).get(page_url(run)).content.decode()
    assert bar(body, "Order")[1].startswith("Order: Terminated")
    _, mail = bar(body, "Mail")
    assert mail.startswith("Mail: Canceled") and "still open when the run closed" in mail
    assert (
        'id="live-toggle" disabled' in body
        and '<span id="live-state" class="live-state" role="status">closed' in body
    )


# ---------------------------------------------------------------- live mode


def socket_path(run: WorkflowExecution, after: int) -> str:
    return f"/ws/ui{page_url(run)}?first=1&after={after}"


def open_socket(stack: Stack, path: str, client: Client | None, origin: str = "") -> ClientConnection:
    headers = {"Origin": origin or stack.url}
    if client is not None:
        headers["Cookie"] = f"sessionid={client.cookies['sessionid'].value}"
    return connect(stack.url.replace("http://", "ws://") + path, additional_headers=headers, open_timeout=10)


def receive(socket: ClientConnection) -> dict[str, Any]:
    message = json.loads(socket.recv(timeout=15))
    assert isinstance(message, dict)
    return message


@pytest.fixture
def shop(django_db_blocker: Any) -> Iterator[Namespace]:
    """A committed namespace the stack's frontend can see (no test transaction around it)."""
    with django_db_blocker.unblock():
        yield NamespaceFactory()


@in_database
def test_the_page_carries_the_live_control_for_a_running_run() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace, workflow_id="w")
    body = signed_in(namespace).get(page_url(run)).content.decode()
    assert '<input type="checkbox" id="live-toggle" checked> Live</label>' in body
    assert f'data-url="/ws/ui{page_url(run)}?first=1&amp;after=2"' in body
    assert '<tbody id="event-rows">' in body and "chronicle/live.js" in body


@pytest.mark.e2e
def test_a_member_is_pushed_the_signal_written_through_the_kernel_until_the_run_closes(
    stack: Stack, shop: Namespace, django_db_blocker: Any
) -> None:
    with django_db_blocker.unblock():
        run = ExecutionFactory(namespace=shop, workflow_id="live-1")
        viewer = signed_in(shop)
    last = run.next_event_id - 1
    with open_socket(stack, socket_path(run, last), viewer) as socket:
        with pytest.raises(TimeoutError):
            socket.recv(timeout=0.5)  # nothing new yet
        with django_db_blocker.unblock():
            kernel.signal_workflow_execution(
                shop, workflow_id="live-1", run_id=None, signal_name="go", input=[{"n": 1}]
            )
        pushed = receive(socket)
        assert pushed["type"] == "events" and pushed["status"] == "Running"
        assert pushed["last_event_id"] == last + 1
        assert pushed["rows"][0].startswith(f'<tr id="event-{last + 1}">')
        assert "WorkflowExecutionSignaled" in pushed["rows"][0]
        assert 'id="timeline"' in pushed["timeline"] and "Signal go" in pushed["timeline"]

        with django_db_blocker.unblock():
            kernel.terminate_workflow_execution(shop, workflow_id="live-1", run_id=None, reason="done")
        closing = receive(socket)
        assert closing["status"] == "Terminated" and "WorkflowExecutionTerminated" in closing["rows"][0]
        assert receive(socket) == {"type": "closed", "status": "Terminated"}
        with pytest.raises(ConnectionClosedOK):
            socket.recv(timeout=10)


@pytest.mark.e2e
def test_a_socket_for_a_closed_run_sends_the_rest_and_closes(
    stack: Stack, shop: Namespace, django_db_blocker: Any
) -> None:
    with django_db_blocker.unblock():
        run = ExecutionFactory(namespace=shop, workflow_id="live-2")
        kernel.terminate_workflow_execution(shop, workflow_id="live-2", run_id=None, reason="done")
        viewer = signed_in(shop)
    with open_socket(stack, socket_path(run, 1), viewer) as socket:
        rest = receive(socket)
        assert [row[:15] for row in rest["rows"]] == ['<tr id="event-2', '<tr id="event-3']
        assert receive(socket)["type"] == "closed"


@pytest.mark.e2e
@pytest.mark.parametrize("who", ["anonymous", "non-member", "member, run of another namespace", "other site"])
def test_outsiders_are_refused_at_the_handshake(
    stack: Stack, shop: Namespace, django_db_blocker: Any, who: str
) -> None:
    with django_db_blocker.unblock():
        own = NamespaceFactory()
        theirs = ExecutionFactory(namespace=shop, workflow_id="secret")
        member, outsider = signed_in(shop), signed_in(own)
    path, client, origin = socket_path(theirs, 0), None, ""
    if who == "non-member":
        client = outsider
    elif who == "member, run of another namespace":
        client, path = outsider, path.replace(f"/ns/{shop.name}/", f"/ns/{own.name}/")
    elif who == "other site":
        client, origin = member, "http://evil.example"
    with pytest.raises(InvalidStatus) as refused:
        open_socket(stack, path, client, origin)
    assert refused.value.response.status_code == 403
    open_socket(
        stack, path.replace(f"/ns/{own.name}/", f"/ns/{shop.name}/"), member
    ).close()  # the member may
