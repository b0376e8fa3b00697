"""/metrics on real processes: a frontend of two gunicorn workers, a shard owner and a batch
runner sharing one multiprocess folder. After some workflows (activities, a timer, a
rate-limited tenant, a queue nobody polls) every family has samples, added up over the
processes, and the scrape-time families read the database."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from chronicle.launcher import ProcessGroup, batch_runner_process, frontend_process, shard_owner_process
from history.models import Shard, WorkflowExecution
from tests.conftest import Api, ScriptedWorker, Stack, Tenant, command, free_port, wait_until

TOKEN = "scrape-token-for-the-test"


def samples(text: str) -> dict[str, list[tuple[str, float]]]:
    """``{sample name: [(labels as text, value), ...]}`` of the exposition text."""
    found: dict[str, list[tuple[str, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            found.setdefault(sample.name, []).append((labels, float(sample.value)))
    return found


def positive(found: dict[str, list[tuple[str, float]]], name: str, labels: str = "") -> float:
    """The sum of ``name``'s samples whose labels contain ``labels`` (must be > 0)."""
    total = sum(value for label, value in found.get(name, []) if labels in label)
    assert total > 0, f"{name}{{{labels}}} has no positive sample: {found.get(name)}"
    return total


@pytest.fixture
def metered_stack(stack: Stack, tmp_path: Path) -> Iterator[Stack]:
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = {
        **stack.env,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "CHRONICLE_METRICS_TOKEN": TOKEN,
        "CHRONICLE_SHARD_LEASE_SECONDS": "3",
        "CHRONICLE_DB_POOL_MAX": "4",  # the machine's PostgreSQL is shared with other test runs
    }
    port = free_port()
    specs = [
        frontend_process(port, workers=2),
        shard_owner_process("metrics-owner"),
        batch_runner_process("metrics-runner", lease_seconds=3),
    ]
    with ProcessGroup(specs, env=env, log_dir=tmp_path / "logs") as group:
        url = f"http://127.0.0.1:{port}"
        group.wait_http(url, timeout=30)
        yield Stack(url=url, env=env, group=group)


def scrape(stack: Stack) -> dict[str, list[tuple[str, float]]]:
    answer = httpx.get(stack.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return samples(answer.text)


def run_one_activity_workflow(api: Api, queue: str, workflow_id: str) -> None:
    worker = ScriptedWorker(api, queue)
    api.start(workflow_id, queue)
    task = worker.poll_workflow_task()
    schedule = command(
        "ScheduleActivityTask",
        activity_id="1",
        activity_type="Step",
        task_queue=queue,
        start_to_close_timeout=30,
    )
    assert worker.complete_workflow_task(task, schedule).status_code == 200
    activity = worker.poll_activity_task()
    assert worker.activity("complete", activity, result=1).status_code == 200
    task = worker.poll_workflow_task()
    close = command("CompleteWorkflowExecution", result=1)
    assert worker.complete_workflow_task(task, close).status_code == 200


def start_on_a_shard_of(api: Api, owner: str, django_db_blocker: Any) -> tuple[str, str]:
    """Start workflows (each on a queue of its own) until one lands on a shard ``owner``
    holds; its workflow id and queue. The others wait on their queues, a backlog."""
    with django_db_blocker.unblock():
        wait_until(lambda: Shard.objects.filter(owner=owner).exists(), timeout=20)
        for n in range(40):
            workflow_id, queue = f"metered-timer-{n}", f"timer-{uuid.uuid4().hex[:8]}"
            run_id = api.start(workflow_id, queue)["run_id"]
            shard = WorkflowExecution.objects.get(run_id=run_id).shard_id
            if Shard.objects.filter(shard_id=shard, owner=owner).exists():
                return workflow_id, queue
    raise AssertionError(f"no workflow landed on a shard of {owner}")


def test_every_family_has_samples_after_some_workflows(
    metered_stack: Stack, make_tenant: Callable[..., Tenant], django_db_blocker: Any
) -> None:
    stack = metered_stack
    api = Api(stack, make_tenant())
    queue = f"q-{uuid.uuid4().hex[:8]}"
    for n in range(3):
        run_one_activity_workflow(api, queue, f"metered-{n}")
    # A timer this stack's shard owner fires (the session stack's owner holds the other shards).
    timer_wf, timer_queue = start_on_a_shard_of(api, "metrics-owner", django_db_blocker)
    worker = ScriptedWorker(api, timer_queue)
    timer = command("StartTimer", timer_id="t1", start_to_fire_timeout=1)
    assert worker.complete_workflow_task(worker.poll_workflow_task(), timer).status_code == 200
    wait_until(lambda: "TimerFired" in api.event_types(timer_wf), timeout=20)
    # A queue nobody polls: a backlog with an age.
    api.start("metered-waiting", f"unpolled-{uuid.uuid4().hex[:6]}")
    # A tenant over its request rate.
    slow = Api(stack, make_tenant(request_rps=0.5, request_burst_ratio=1.0))
    statuses = {slow.get("/workflows/nothing").status_code for _ in range(4)}
    assert 429 in statuses
    wait_until(lambda: positive(scrape(stack), "chronicle_shard_lease_renewals_total") > 0, timeout=15)

    found = scrape(stack)
    requests = "chronicle_request_duration_seconds_count"
    positive(found, requests, 'route="/api/v1/namespaces/{namespace}/workflows"')  # the lean lane's start
    positive(found, requests, "workflow-tasks/poll")  # a Django async view
    positive(found, requests, 'route="/api/v1/namespaces/{namespace}/workflows/{workflow_id}",status="429"')
    positive(found, "chronicle_request_duration_seconds_sum")
    positive(found, "chronicle_poll_wait_seconds_count", 'kind="workflow",outcome="task"')
    positive(found, "chronicle_poll_wait_seconds_count", 'kind="activity",outcome="task"')
    positive(found, "chronicle_timer_lateness_seconds_count")  # from the shard owner's process
    positive(found, "chronicle_shard_lease_renewals_total")
    positive(found, "chronicle_shard_ownership_changes_total", 'change="acquired"')
    positive(found, "chronicle_rate_limit_refusals_total", 'bucket="rps"')
    positive(found, "chronicle_task_queue_backlog", 'task_queue="unpolled-')
    positive(found, "chronicle_task_queue_oldest_task_age_seconds", 'task_queue="unpolled-')
    positive(found, "chronicle_shards_owned", 'owner="metrics-owner"')
    assert any(
        'owner="metrics-owner"' in labels
        for labels, _ in found["chronicle_shard_owner_heartbeat_age_seconds"]
    )
    positive(found, "chronicle_workflow_task_dispatch_latency_seconds_samples")
    positive(found, "chronicle_workflow_task_turnaround_seconds", 'quantile="1"')
    positive(found, "chronicle_history_length_events", 'quantile="1"')
    positive(found, "chronicle_history_size_bytes", 'quantile="1"')
    assert found["chronicle_metrics_database_up"] == [("", 1.0)]
    # Probes and scrapes are not requests of the API.
    assert not any("/metrics" in labels or "healthz" in labels for labels, _ in found[requests])


def test_metrics_refuse_a_scrape_without_the_token(metered_stack: Stack) -> None:
    assert httpx.get(metered_stack.url + "/metrics", timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer not-it"}
    assert httpx.get(metered_stack.url + "/metrics", headers=wrong, timeout=10).status_code == 401
