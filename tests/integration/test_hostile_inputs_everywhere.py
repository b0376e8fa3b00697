"""Every operation of the served schema, sent hostile input by its own namespace's key:
never a 5xx.

The operations come from the security matrix's generator (a new endpoint is covered the
day it is in the schema). Each gets the inputs that used to escape as Python errors
somewhere: numbers JSON cannot hold, an integer past what Python reads, nesting past the
parser's limit, each required field given the wrong type or an overlong value, and path
parameters that are overlong, huge numbers or hold a NUL. The answer may be any 2xx or
4xx (some of these are valid requests); a 5xx is a bug.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.asgi_client import asgi_request
from tests.integration import security_matrix as matrix
from tests.integration.minted_ids import JOB, QUEUE, SID, WID, build_world

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = "9" * 5000
# A documented 504: a query no worker answers times out.
ALLOWED_5XX = {504}
# 5xx known and not fixed yet, each (operation, what is sent): the test fails if one of them
# stops failing, so its entry is removed with the fix. None is known.
KNOWN_5XX: set[tuple[str, str]] = set()


def hostile_bodies(example: dict[str, Any]) -> list[str]:
    """Raw bodies built around ``example`` (a body with every required field)."""
    bodies = [
        "NaN",
        '{"a": NaN}',
        '{"a": 1e999}',
        "[" * 200 + "]" * 200,
        '{"a": ' + HUGE + "}",
        "{",
        '"just a string"',
        "\x00",
    ]
    for name in example:
        for wrong in (HUGE, '"' + "x" * 20_000 + '"', "[]", "{}", "true", "-1", '"inf"', '"\\u0000"', "null"):
            fields = {other: json.dumps(value) for other, value in example.items() if other != name}
            fields[name] = wrong
            bodies.append("{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in fields.items()) + "}")
    return bodies


def hostile_values() -> list[str]:
    return ["9" * 40, "x" * 5000, "-1", "0", "a%00b", "..", "%2e%2e", "inf"]


def test_no_hostile_input_gets_a_5xx_at_any_operation(
    settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.CHRONICLE_POLL_TIMEOUT_SECONDS = 0.2
    settings.CHRONICLE_QUERY_TIMEOUT_SECONDS = 0.2
    schema = matrix.served_schema()
    world = build_world()
    authorization = f"Bearer {world.keys['b']}"
    values = {
        "namespace": world.b.name,
        "workflow_id": WID,
        **matrix.NAMED,
        "task_queue": QUEUE,
        "run_id": str(world.run_b.run_id),
        "schedule_id": SID,
        "job_id": JOB,
        "digest": world.digest_b,
        "key_id": str(world.key_b.pk),
        "username": world.user.get_username(),
    }
    tried, faults = 0, []
    for op in matrix.operations(schema):
        if op.method == "DELETE" and op.template == "/api/v1/namespaces/{namespace}":
            continue  # would delete B, which the rest of the run uses (its inputs are query parameters)
        url = op.url(values)
        sends: list[tuple[str, str, str, str]] = []  # (path, body, query, what is sent)
        if op.body_schema:
            bodies = hostile_bodies(matrix.example_body(schema, op.body_schema))
            sends += [(url, body, "", body) for body in bodies]
        for name in op.query:
            sends += [(url, "", f"{name}={value}", f"{name}={value}") for value in hostile_values()]
        for parameter in op.parameters:
            if parameter != "namespace":
                for value in hostile_values():
                    sends.append((op.url({**values, parameter: value}), "", "", f"{parameter}={value}"))
        for path, body, query, sent in sends:
            tried += 1
            answer = asgi_request(op.method, path, body, authorization=authorization, query=query)
            failed = answer.status_code >= 500 and answer.status_code not in ALLOWED_5XX
            if failed != ((op.name, sent) in KNOWN_5XX):
                faults.append(f"{op.name} with {sent[:100]!r}: {answer.status_code} {answer.content[:120]!r}")
    with capsys.disabled():
        print(f"\nhostile inputs: {tried} requests, {len(faults)} unexpected, {len(KNOWN_5XX)} known 5xx")
    assert faults == [], "\n".join(faults[:40])
