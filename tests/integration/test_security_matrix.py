"""The security matrix: every API operation of the served schema, tried as an outsider.

For each operation (:mod:`tests.integration.security_matrix` lists them from the served
OpenAPI schema and checks the URL resolver and the lean lane's routes against it), the
calls below go through the frontend's ASGI application, as a server sends them, at B's
namespace and B's ids (three namespaces and B's rows from
:mod:`tests.integration.minted_ids`):

* no key, a malformed key, an unknown, a revoked and an expired key of B: 401;
* A's key (every role) at B's URL: 404 (a namespace name never leaks), 403 for an
  operator-only call;
* each single-role key of B whose role the operation does not take: 403;
* A's key at A's URL with an id B minted in the path (run, schedule, batch job, payload
  digest, API key, member), B's task token in the body, or B's page token, schedule
  cursor or run id in the query: 400, 403 or 404;
* mass assignment: A's key at A's URL, ``namespace``, ``run_id``, ``status``,
  ``shard_id`` and ``role`` added to a valid-looking body: refused (4xx) or ignored.

After each operation's refused calls every row of A and B they could touch is compared
with before (runs, events, timers, schedules, jobs, payloads, audit, views, keys,
members, the namespace's settings); after the mass assignments, B's. No answer may carry
B's data the request did not name, none may be a 5xx. The figures are printed at the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from matching.dispatch import poll_once
from namespaces.models import ApiKey, MemberRole, Membership
from namespaces.services import api_key_issue
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ExecutionFactory, UserFactory
from tests.integration import security_matrix as matrix
from tests.integration.minted_ids import BIG_INPUT, JOB, QUEUE, SID, WID, World, build_world

pytestmark = pytest.mark.django_db(transaction=True)

MINTED = ("run_id", "schedule_id", "job_id", "digest", "key_id", "username", "update_id")
ROLES = ("client", "worker", "admin")
MALFORMED = {
    "no key": None,
    "not bearer": "Basic Zm9vOmJhcg==",
    "empty bearer": "Bearer ",
    "unknown key": "Bearer chr_deadbeef_" + "x" * 32,
}
FOREIGN = {400, 403, 404}
# A mass-assigned call is refused (4xx) or done with the fields ignored (2xx); a query
# no worker answers times out (504 deadline_exceeded), as documented.
ANSWERED = set(range(200, 300)) | set(range(400, 500)) | {504}


@dataclass
class Outsider:
    """B's world as the matrix uses it: keys, ids on each side, and B's data to watch for."""

    world: World
    keys: dict[str, str]  # B's single-role, revoked and expired keys
    b_ids: dict[str, str]
    a_ids: dict[str, str]  # A's side: A's namespace, B's minted ids
    task_token_b: str
    query_b: dict[str, str]  # query parameter -> a value B minted (page tokens, cursors, run ids)
    markers: dict[str, str]

    def state(self) -> dict[str, Any]:
        return {label: matrix.rows(self.world.ns(label)) for label in ("a", "b")}


@dataclass
class Figures:
    tried: int = 0
    documented: int = 0
    violations: list[str] = field(default_factory=list)
    by_case: dict[str, int] = field(default_factory=dict)  # case -> requests tried

    def check(self, outsider: Outsider, call: Call, answer: AsgiResponse, allowed: set[int]) -> None:
        """Count one call: its status documented, and none of B's data it did not name."""
        self.tried += 1
        case = call.label.rsplit("[", 1)[-1].rstrip("]")
        self.by_case[case] = self.by_case.get(case, 0) + 1
        text = answer.content.decode(errors="replace")
        asked = call.path + call.query + call.body
        leaked = [name for name, mark in outsider.markers.items() if mark in text and mark not in asked]
        answered = matrix.statuses(answer)
        if not answered <= allowed:
            self.violations.append(
                f"{call.label}: {sorted(answered)}, documented {sorted(allowed)}: {text[:160]}"
            )
        elif leaked:
            self.violations.append(f"{call.label}: the answer carries B's {', '.join(leaked)}")
        else:
            self.documented += 1


@dataclass(frozen=True)
class Call:
    label: str
    method: str
    path: str
    authorization: str | None
    body: str = ""
    query: str = ""

    def send(self) -> AsgiResponse:
        return asgi_request(
            self.method, self.path, self.body, authorization=self.authorization, query=self.query
        )


def outsider_of(world: World) -> Outsider:
    b = world.b
    keys = {role: api_key_issue(namespace=b, name=f"only-{role}", roles=[role])[1] for role in ROLES}
    for case, change in (
        ("revoked", {"revoked_at": timezone.now()}),
        ("expired", {"expires_at": timezone.now() - timedelta(minutes=1)}),
    ):
        key, keys[case] = api_key_issue(namespace=b, name=case, roles=list(ROLES))
        ApiKey.objects.filter(pk=key.pk).update(**change)
    member_b = UserFactory.create()
    Membership.objects.create(user=member_b, namespace=b, role=MemberRole.OPERATOR)
    ExecutionFactory(namespace=b, workflow_id="matrix-task", task_queue=QUEUE)
    task = poll_once(b, QUEUE, "workflow", "matrix")
    assert task is not None
    listing = f"/api/v1/namespaces/{b.name}/workflows"
    as_b = f"Bearer {world.keys['b']}"
    page = asgi_request("GET", listing, authorization=as_b, query="page_size=1").json()
    schedules = asgi_request(
        "GET", listing.replace("workflows", "schedules"), authorization=as_b, query="page_size=1"
    )
    query_b = {
        "next_page_token": page["next_page_token"],
        "cursor": schedules.json()["next_cursor"],
        "run_id": str(world.run_b.run_id),
    }
    assert all(query_b.values()), query_b
    b_ids = {
        "namespace": b.name,
        "workflow_id": WID,
        **matrix.NAMED,
        "task_queue": QUEUE,
        "run_id": str(world.run_b.run_id),
        "schedule_id": SID,
        "job_id": JOB,
        "digest": world.digest_b,
        "key_id": str(world.key_b.pk),
        "username": member_b.get_username(),
        "update_id": "update-b",
    }
    markers = {
        "namespace name": b.name,
        "run id": str(world.run_b.run_id),
        "payload digest": world.digest_b,
        "payload": BIG_INPUT["data"][:200],
        "other workflow": "other-b",
        "key prefix": world.key_b.prefix,
        "member": member_b.get_username(),
    }
    return Outsider(
        world,
        keys,
        b_ids,
        {**b_ids, "namespace": world.a.name},
        task["task_token"],
        query_b,
        markers,
    )


def refusals(op: matrix.Operation, outsider: Outsider, body: dict[str, Any]) -> list[tuple[Call, set[int]]]:
    """The outsider's calls at ``op`` and the statuses each is documented to get."""
    world, role = outsider.world, matrix.required_role(op)
    raw = json.dumps(body) if op.body_schema else ""
    at_b = op.url(outsider.b_ids)
    calls = [
        (Call(f"{op.name} [{case}]", op.method, at_b, auth, raw), {401}) for case, auth in MALFORMED.items()
    ]
    calls += [
        (Call(f"{op.name} [{case} key]", op.method, at_b, f"Bearer {outsider.keys[case]}", raw), {401})
        for case in ("revoked", "expired")
    ]
    foreign = f"Bearer {world.keys['a']}"
    other_namespace = {403} if role == "operator" or not op.scoped else {404}
    calls.append((Call(f"{op.name} [A's key at B]", op.method, at_b, foreign, raw), other_namespace))
    for key_role in ROLES:
        allowed_roles = {role} | matrix.ALSO_ALLOWED.get((op.method, op.template), set())
        if key_role not in allowed_roles:
            auth = f"Bearer {outsider.keys[key_role]}"
            calls.append((Call(f"{op.name} [B's {key_role}-only key]", op.method, at_b, auth, raw), {403}))
    if not op.scoped:
        return calls
    at_a = op.url(outsider.a_ids)
    if any(p in MINTED for p in op.parameters):
        calls.append((Call(f"{op.name} [B's ids at A]", op.method, at_a, foreign, raw), FOREIGN))
    properties = _properties(op)
    if "task_token" in properties:
        token_body = json.dumps({**body, "task_token": outsider.task_token_b})
        calls.append(
            (Call(f"{op.name} [B's task token at A]", op.method, at_a, foreign, token_body), FOREIGN)
        )
    for name in sorted(set(op.query) & set(outsider.query_b)):
        query = urlencode({name: outsider.query_b[name]})
        calls.append((Call(f"{op.name} [B's {name} at A]", op.method, at_a, foreign, raw, query), FOREIGN))
    return calls


SCHEMA: dict[str, Any] = {}


def _properties(op: matrix.Operation) -> dict[str, Any]:
    if not op.body_schema:
        return {}
    resolved = matrix.resolve(SCHEMA, op.body_schema)
    return dict(resolved.get("properties", {}))


SAMPLES = dict.fromkeys(("namespace", "workflow_id", *matrix.NAMED, *MINTED), "p")


def test_every_route_is_in_the_schema_and_classified() -> None:
    assert matrix.inventory_faults(matrix.served_schema(), SAMPLES) == []


def test_a_route_or_method_the_schema_lacks_is_reported() -> None:
    """The inventory is what makes a new endpoint impossible to miss: take a DRF route, a
    method and a lean-lane route out of the schema, and each is named."""
    schema = matrix.served_schema()
    paths = schema["paths"]
    del paths["/api/v1/namespaces/{namespace}/schedules/{schedule_id}/pause"]
    del paths["/api/v1/namespaces/{namespace}/workflows"]["get"]
    del paths["/api/v1/namespaces/{namespace}/signal-with-start"]
    faults = "\n".join(matrix.inventory_faults(schema, SAMPLES))
    assert "/schedules/{schedule_id}/pause: served but not in the schema" in faults
    assert "GET /api/v1/namespaces/{namespace}/workflows: handled but not in the schema" in faults
    assert "signal-with-start\\Z: no operation of the schema reaches it" in faults
    del SAMPLES["job_id"]
    assert "no sample value for {job_id}" in "\n".join(
        matrix.inventory_faults(matrix.served_schema(), SAMPLES)
    )


def test_the_security_matrix_holds_at_every_operation(
    settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.CHRONICLE_POLL_TIMEOUT_SECONDS = 0.2  # a mass-assigned poll of A's queue returns at once
    settings.CHRONICLE_QUERY_TIMEOUT_SECONDS = 0.2  # and a query with no worker gives up at once
    SCHEMA.update(matrix.served_schema())
    world = build_world()
    outsider = outsider_of(world)
    assert matrix.inventory_faults(SCHEMA, outsider.b_ids) == []
    figures = Figures()
    ops = matrix.operations(SCHEMA)
    for op in ops:
        body = matrix.example_body(SCHEMA, op.body_schema)
        before = outsider.state()
        for call, allowed in refusals(op, outsider, body):
            figures.check(outsider, call, call.send(), allowed)
        after = outsider.state()
        if after != before:
            changed = [
                f"{label}.{k}"
                for label in before
                for k in before[label]
                if before[label][k] != after[label][k]
            ]
            figures.violations.append(f"{op.name}: refused calls changed {', '.join(changed)}")
    mass_assignments = [
        op for op in ops if op.scoped and op.method in ("POST", "PUT", "PATCH") and op.body_schema
    ]
    before_b = matrix.rows(world.b)
    for op in mass_assignments:
        body = {**matrix.example_body(SCHEMA, op.body_schema), **_assigned(outsider)}
        call = Call(
            f"{op.name} [mass assignment]",
            op.method,
            op.url(outsider.a_ids),
            f"Bearer {world.keys['a']}",
            json.dumps(body),
        )
        answer = call.send()
        figures.check(outsider, call, answer, ANSWERED)
        if answer.status_code < 300 and outsider.b_ids["run_id"].encode() in answer.content:
            figures.violations.append(f"{call.label}: the call took the run id it was given")
    if matrix.rows(world.b) != before_b:
        figures.violations.append("mass assignment at A changed B's rows")
    with capsys.disabled():  # the figures show in every run's output
        print(
            f"\nsecurity matrix: {len(ops)} operations, {figures.tried} requests tried, "
            f"{figures.documented} refused as documented, {len(figures.violations)} violations\n"
            + "\n".join(f"  {count:4d}  {case}" for case, count in sorted(figures.by_case.items()))
        )
    assert figures.violations == [], "\n".join(figures.violations)


def _assigned(outsider: Outsider) -> dict[str, Any]:
    """Fields a caller may not set, aimed at B."""
    return {
        "namespace": outsider.world.b.name,
        "run_id": outsider.b_ids["run_id"],
        "status": "Completed",
        "shard_id": 0,
        "role": "admin",
    }


def test_a_method_an_operation_does_not_take_is_405_with_allow() -> None:
    """Every path of the schema, sent a verb it does not document: 405 naming in ``Allow``
    every verb it does document (DRF views and the lean lane alike)."""
    SCHEMA.update(matrix.served_schema())
    world = build_world()
    values = {**outsider_of(world).b_ids, "namespace": world.a.name}
    faults = []
    for path, item in SCHEMA["paths"].items():
        documented = {method.upper() for method in item if method in matrix.METHODS}
        unused = next(m for m in ("PUT", "PATCH", "DELETE", "POST", "GET") if m not in documented)
        answer = asgi_request(unused, matrix.fill(path, values), authorization=f"Bearer {world.keys['a']}")
        allow = {m.strip() for m in answer.headers.get("allow", "").split(",") if m.strip()}
        if answer.status_code != 405 or not documented <= allow:
            faults.append(
                f"{unused} {path}: {answer.status_code}, Allow {sorted(allow)}, documented {documented}"
            )
    assert faults == [], "\n".join(faults)
