"""Schemathesis over the served OpenAPI schema, short and seeded (``bench/fuzz_api.py``).

A frontend of the test stack's database answers every operation of ``/api/schema/``
with generated valid and schema-violating requests, under a namespace of its own (its
admin key) and the operator key for the operator-only calls; every check of schemathesis
must pass, bar the findings ``bench.fuzz_api.EXCLUDED`` names with their reasons. The
long run is ``python bench/fuzz_api.py --max-examples N --seed S``.

The frontend is this test's own, with the server's waits (a poll, a history or update
wait, a query no worker answers) cut to a second, so no generated request can hold the
run; the stack's shard owner serves it, as it serves the stack's own frontend.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from bench.fuzz_api import fuzz_config, run
from namespaces.models import Namespace
from namespaces.operator_keys import operator_key_issue
from tests.conftest import Stack, Tenant, free_port, frontend_up, start_frontend, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

# The short run's budget: about two minutes on two cores (examples per operation and phase).
MAX_EXAMPLES = int(os.environ.get("CHRONICLE_FUZZ_EXAMPLES", "20"))
SEED = int(os.environ.get("CHRONICLE_FUZZ_SEED", "20261206"))


@pytest.fixture
def fuzz_frontend(stack: Stack) -> Iterator[str]:
    """A frontend on the stack's database whose waits end within a second."""
    env = {
        **stack.env,
        "CHRONICLE_QUERY_TIMEOUT_SECONDS": "1",
        "CHRONICLE_HISTORY_WAIT_SECONDS": "1",
        "CHRONICLE_POLL_TIMEOUT_SECONDS": "1",
    }
    port = free_port()
    proc = start_frontend(env, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: frontend_up(url), timeout=60)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def operator_key(django_db_blocker: Any) -> Iterator[str]:
    """An operator key of a superuser of this test; the namespaces the run creates go with it."""
    with django_db_blocker.unblock():
        before = set(Namespace.objects.values_list("pk", flat=True))
        user = get_user_model().objects.create_superuser(
            f"fuzz-{uuid.uuid4().hex[:8]}", "fuzz@example.com", None
        )
        _, raw = operator_key_issue(username=user.username, name="fuzz")
    yield raw
    with django_db_blocker.unblock():
        Namespace.objects.exclude(pk__in=before).delete()
        user.delete()


def test_every_operation_answers_as_its_schema_says(
    fuzz_frontend: str,
    make_tenant: Callable[..., Tenant],
    operator_key: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tenant = make_tenant(request_rps=0)
    decoy = make_tenant(request_rps=0)
    config = fuzz_config(
        fuzz_frontend,
        namespace=tenant.namespace,
        decoy=decoy.namespace,
        admin_key=tenant.keys["all"],
        operator_key=operator_key,
        max_examples=MAX_EXAMPLES,
        seed=SEED,
    )
    report = run(config)
    with capsys.disabled():
        print("\n" + report.summary())
    assert report.cases > 1000, report.summary()
    assert not report.failures and not report.errors, "\n".join(report.details())
    assert report.server_errors == 0, report.summary()
