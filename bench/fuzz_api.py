#!/usr/bin/env python
"""Schemathesis over the served OpenAPI schema: generated requests, every answer checked.

The schema at ``/api/schema/`` is the contract a client is written against; this harness
makes schemathesis send every operation valid and schema-violating requests (its examples,
coverage, fuzzing and stateful phases) with the namespace's admin key, the operator key
for the operator-only calls, and applies all its checks to the answers: no 5xx, every
status, content type, header and body as the schema documents, invalid input refused
(``negative_data_rejection``), an operation without its key refused (``ignored_auth``),
a deleted resource gone (``use_after_free``), and the rest.

Two entry points share :func:`run`: the e2e test ``tests/e2e/test_api_fuzz.py`` (a short,
seeded run on the test stack) and this script's ``main``, the long run on a stack of its
own (a scratch database, dropped afterwards)::

    python bench/fuzz_api.py --max-examples 500 --seed 7

It prints the cases run, the failures by check, the 5xx count and the schema-violating
inputs answered 2xx (docs/reliability.md, "Fuzzing the API").
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import schemathesis
from schemathesis.engine import events, from_schema
from schemathesis.hooks import GLOBAL_HOOK_DISPATCHER, HookContext

ROOT = Path(__file__).resolve().parent.parent

# Operations only an operator key may call (provisioning, docs/provisioning.md); the rest
# take the namespace's admin key (every role of the namespace).
OPERATOR_OPERATIONS = ("list_namespaces", "create_namespace", "delete_namespace")
# Operations that change the namespace itself or its keys. They go to a decoy namespace,
# so a generated request cannot throttle, revoke or delete what the rest of the run uses.
DECOY_OPERATIONS = (
    "update_namespace",
    "delete_namespace",
    "revoke_api_key",
    "rotate_api_key",
    "grant_member",
    "revoke_member",
)

# Checks left out, each with the reason. A schema cannot express every rule a valid-looking
# request must meet (a task token's signature, a visibility query's grammar, a cron
# expression, an id that exists), so a schema-valid request refused with 400, 404 or 409
# is the documented answer, and positive_data_acceptance's flags would be noise.
CHECKS_LEFT_OUT: dict[str, str] = {
    "positive_data_acceptance": (
        "schema-valid requests may still fail rules a schema cannot state (tokens, queries, cron)"
    ),
}

NS = "/api/v1/namespaces/{namespace}"
# Findings that stay open on purpose: (check, "METHOD /path") -> why. The short run is
# green only when every other check passes on every operation.
EXCLUDED: dict[tuple[str, str], str] = {}

# A query no worker answers within the server's query timeout is the documented 504
# deadline_exceeded (the schema lists it); every other 5xx is a finding.
DOCUMENTED_5XX = {"query": 504}
# The HTTP server (uvicorn) refuses a request line past its limit (a query string of
# about 100 KB) before Chronicle sees it, with this plain-text 400: not Chronicle's answer.
HTTP_SERVER_REFUSAL = b"Invalid HTTP request received."

# Seconds a long-poll may hold its answer here (a poll's body ``timeout``, a history
# wait's or an update wait's query ``timeout``): enough to exercise the wait, never
# enough to hang the run. Zero means "the server's default" for a poll, so it is raised too.
SHORT_WAIT = 0.5


@dataclass
class FuzzReport:
    """What one run tried and found."""

    seed: int
    cases: int = 0
    by_phase: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: int = 0
    negative_2xx: int = 0
    network_errors: int = 0
    http_server_refusals: int = 0
    failures: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    reproductions: dict[tuple[str, str], str] = field(default_factory=dict)
    check_failures: Counter[str] = field(default_factory=Counter)
    excluded_hits: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def failures_by_check(self) -> Counter[str]:
        """Distinct failures (check, operation, kind) per check."""
        counts: Counter[str] = Counter()
        for (check, _), titles in self.failures.items():
            counts[check] += len(titles)
        return counts

    def summary(self) -> str:
        by_check = self.failures_by_check()
        checks = ", ".join(f"{name} {count}" for name, count in sorted(by_check.items())) or "none"
        phases = ", ".join(f"{name} {count}" for name, count in sorted(self.by_phase.items()))
        return (
            f"api fuzz (seed {self.seed}): {self.cases} cases in {self.seconds:.0f} s ({phases}); "
            f"failures by check: {checks}; 5xx: {self.server_errors}; "
            f"schema-violating inputs answered 2xx: {self.negative_2xx}; "
            f"network errors: {self.network_errors}; "
            f"refused by the HTTP server: {self.http_server_refusals}; "
            f"excluded findings met: {sum(self.excluded_hits.values())}"
        )

    def details(self) -> list[str]:
        lines = []
        for (check, operation), titles in sorted(self.failures.items()):
            lines.append(f"{check} at {operation}: {' | '.join(sorted(titles))}")
            lines.append(f"    {self.reproductions[(check, operation)]}")
        return lines + self.errors


def fuzz_config(
    base_url: str,
    *,
    namespace: str,
    decoy: str,
    admin_key: str,
    operator_key: str,
    max_examples: int,
    seed: int,
    workers: int = 1,
    request_timeout: float = 10.0,
) -> dict[str, Any]:
    """The schemathesis configuration (its ``schemathesis.toml`` keys) for one run."""
    operator = {"Authorization": f"Bearer {operator_key}"}
    operations: list[dict[str, Any]] = [
        {"include-operation-id": list(OPERATOR_OPERATIONS), "headers": operator},
        {"include-operation-id": list(DECOY_OPERATIONS), "parameters": {"namespace": decoy}},
    ]
    for suffix, status in DOCUMENTED_5XX.items():
        allowed = {"expected-statuses": ["2xx", "3xx", "4xx", str(status)]}
        operations.append({"include-path-regex": f"/{suffix}$", "checks": {"not_a_server_error": allowed}})
    return {
        "seed": seed,
        # Schemathesis would keep a cache under .schemathesis/ in the working directory.
        "cache": {"enabled": False},
        "base-url": base_url,
        "headers": {"Authorization": f"Bearer {admin_key}"},
        "request-timeout": request_timeout,
        "workers": workers,
        "checks": {"enabled": True, **{name: {"enabled": False} for name in CHECKS_LEFT_OUT}},
        "generation": {"max-examples": max_examples, "database": "none"},
        "parameters": {"namespace": namespace},
        "operations": operations,
    }


def _shorten_waits(context: HookContext, case: Any, kwargs: dict[str, Any]) -> None:
    """Cap the wait of a long-poll so a generated request answers in well under a second.

    Only a valid, too-long wait is shortened: an invalid one (negative, not a number) is
    left for the server to refuse, so negative cases stay negative.
    """
    body = case.body
    path = case.operation.path
    if path.endswith("-tasks/poll") and isinstance(body, dict):
        body["timeout"] = _short(body.get("timeout", 0))
    query = case.query
    waits = path.endswith("/history") or "/updates/" in path or path.endswith("/update")
    asked = isinstance(query, dict) and (
        "timeout" in query or query.get("wait_new_event") not in (None, False, "false")
    )
    if waits and asked:
        query["timeout"] = _short(query.get("timeout", 0))


def _short(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return SHORT_WAIT if value == 0 or value > SHORT_WAIT else value


@contextmanager
def _wait_capping() -> Iterator[None]:
    """``before_call`` hooks are process-wide in schemathesis: registered for one run only."""
    GLOBAL_HOOK_DISPATCHER.register_hook_with_name(_shorten_waits, "before_call")
    try:
        yield
    finally:
        GLOBAL_HOOK_DISPATCHER.unregister(_shorten_waits)


def run(config: dict[str, Any], *, max_time: float | None = None) -> FuzzReport:
    """Run every phase over the schema served at ``config["base-url"]`` and tally it."""
    report = FuzzReport(seed=int(config["seed"]))
    settings = schemathesis.Config.from_dict({**config, **({"max-time": max_time} if max_time else {})})
    schema = schemathesis.openapi.from_url(config["base-url"] + "/api/schema/", config=settings)

    @schema.hook
    def after_call(context: HookContext, case: Any, response: Any) -> None:
        status = int(response.status_code)
        report.statuses[status] += 1
        documented = DOCUMENTED_5XX.get(case.operation.path.rsplit("/", 1)[-1]) == status
        report.server_errors += status >= 500 and not documented
        report.http_server_refusals += status == 400 and response.content == HTTP_SERVER_REFUSAL
        meta = case.meta
        if meta is not None and meta.generation.mode.is_negative and 200 <= status < 300:
            report.negative_2xx += 1

    @schema.hook
    def after_network_error(context: HookContext, case: Any, request: Any) -> None:
        report.network_errors += 1

    started = time.monotonic()
    with _wait_capping():
        for event in from_schema(schema).execute():
            if isinstance(event, events.ScenarioFinished) and event.is_test_scenario:
                _tally(report, event)
            elif isinstance(event, events.NonFatalError):
                report.errors.append(f"{event.label}: {event.info.format()[:600]}")
            elif isinstance(event, events.FatalError):
                report.errors.append(f"fatal: {event.exception!r}")
    report.seconds = time.monotonic() - started
    return report


def _tally(report: FuzzReport, event: events.ScenarioFinished) -> None:
    recorder = event.recorder
    report.cases += len(recorder.cases)
    report.by_phase[event.phase.value] += len(recorder.cases)
    for case_id, nodes in recorder.checks.items():
        for node in nodes:
            if node.failure_info is None:
                continue
            case = recorder.cases[case_id].value if case_id in recorder.cases else None
            operation = case.operation.label if case is not None else recorder.label
            key = (node.name, operation)
            interaction = recorder.interactions.get(case_id)
            response = interaction.response if interaction is not None else None
            if response is not None and response.content == HTTP_SERVER_REFUSAL:
                continue
            if key in EXCLUDED:
                report.excluded_hits[key] += 1
                continue
            failure = node.failure_info.failure
            report.check_failures[node.name] += 1
            report.failures.setdefault(key, set()).add(f"{failure.title}: {(failure.message or '')[:300]}")
            report.reproductions.setdefault(key, node.failure_info.code_sample)


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {args[0]} failed: {done.stdout}{done.stderr}")
    return done.stdout


SETUP = """
from django.contrib.auth import get_user_model
from namespaces.operator_keys import operator_key_issue
from namespaces.services import api_key_issue, namespace_create
get_user_model().objects.create_superuser("fuzz-root", "root@example.com", None)
for name in ("fuzz", "fuzz-decoy"):
    ns = namespace_create(name=name, request_rps=0)
    if name == "fuzz":
        print("KEY", api_key_issue(namespace=ns, name="fuzz-admin", roles=["client", "worker", "admin"])[1])
print("KEY", operator_key_issue(username="fuzz-root", name="fuzz")[1])
"""


def main(argv: list[str] | None = None) -> int:
    """The long run: a stack of its own on a scratch database, then :func:`run`."""
    from chronicle.launcher import ProcessGroup, batch_runner_process, frontend_process, shard_owner_process

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-examples", type=int, default=200, help="cases per operation and phase")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-time", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--workers", type=int, default=2, help="concurrent schemathesis workers")
    parser.add_argument("--scratch-prefix", default="fuzz_api_", help="name prefix of the scratch database")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    args = parser.parse_args(argv)

    scratch = f"{args.scratch_prefix}{secrets.token_hex(4)}"
    admin_url = args.database_url
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{scratch}"')
    base, _, _ = admin_url.rpartition("/")
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{scratch}",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        "CHRONICLE_LOG_LEVEL": "WARNING",
        "CHRONICLE_ACCESS_LOG": "",
        # Waits the fuzzer cannot shorten by itself (a query no worker answers, an update's stage).
        "CHRONICLE_QUERY_TIMEOUT_SECONDS": "1",
        "CHRONICLE_HISTORY_WAIT_SECONDS": "1",
        "CHRONICLE_POLL_TIMEOUT_SECONDS": "1",
    }
    try:
        _manage(env, "migrate", "--noinput", "-v", "0")
        admin_key, operator_key = [
            line.split()[1]
            for line in _manage(env, "shell", "-c", SETUP).splitlines()
            if line.startswith("KEY ")
        ]
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        specs = [
            frontend_process(port),
            shard_owner_process("fuzz-owner"),
            batch_runner_process("fuzz-batch"),
        ]
        with tempfile.TemporaryDirectory() as logs, ProcessGroup(specs, env=env, log_dir=Path(logs)) as group:
            group.wait_http(url, timeout=60)
            config = fuzz_config(
                url,
                namespace="fuzz",
                decoy="fuzz-decoy",
                admin_key=admin_key,
                operator_key=operator_key,
                max_examples=args.max_examples,
                seed=args.seed,
                workers=args.workers,
            )
            report = run(config, max_time=args.max_time)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
    for line in report.details():
        print(line)
    print(report.summary())
    return 0 if not report.failures and not report.server_errors else 1


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
