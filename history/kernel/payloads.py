"""The payload store: large payloads leave events and are kept once per namespace.

A payload is a ``{"metadata": {...}, "data": ...}`` object anywhere in an event's
attributes (input, result, failure details, heartbeat details, signal input, memo).
One larger than the namespace's inline limit is replaced by a reference::

    {"metadata": {...}, "payload_ref": {"sha256": "<hex>", "size_bytes": 12345}}

and its full value goes to :class:`~history.models.Payload`, keyed by (namespace,
SHA-256 of its canonical JSON), so sending the same bytes twice stores them once.
Readers (the SDK, the UI) fetch a reference's value by digest.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode
from history.models import Payload, PayloadReference, WorkflowExecution
from namespaces.models import Namespace

PAYLOAD_REF = "payload_ref"
# A stored payload referenced within this window is never collected (covers in-flight writes).
COLLECT_GRACE = timedelta(hours=1)

log = logging.getLogger("chronicle.kernel")


def payload_size(value: Any) -> int:
    """A value's size as the limits count it: its compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), default=str))


def check_payload(namespace: Namespace, value: Any, what: str) -> None:
    """Refuse a payload past the namespace's limit (2 MiB default); warn past 512 KiB."""
    size = payload_size(value)
    if size > namespace.payload_limit_bytes:
        raise ChronicleError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"{what} is {size} bytes; the limit is {namespace.payload_limit_bytes}",
        )
    if size > namespace.payload_warn_bytes:
        log.warning("large payload: %s is %d bytes in namespace %s", what, size, namespace.name)


def canonical_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def is_payload(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("metadata"), dict) and "data" in value


def is_payload_ref(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("metadata"), dict) and PAYLOAD_REF in value


@dataclass
class Offloaded:
    """What offloading one run's events found: payloads to store and digests referenced."""

    payloads: dict[str, tuple[Any, int]] = field(default_factory=dict)
    digests: set[str] = field(default_factory=set)


def offload(value: Any, inline_limit: int, found: Offloaded) -> Any:
    """``value`` with every payload above ``inline_limit`` bytes replaced by its reference."""
    if is_payload_ref(value):
        found.digests.add(value[PAYLOAD_REF]["sha256"])
        return value
    if is_payload(value):
        text = canonical_json(value)
        if inline_limit <= 0 or len(text) <= inline_limit:
            return value
        digest = hashlib.sha256(text.encode()).hexdigest()
        found.payloads[digest] = (value, len(text))
        found.digests.add(digest)
        return {"metadata": value["metadata"], PAYLOAD_REF: {"sha256": digest, "size_bytes": len(text)}}
    if isinstance(value, dict):
        return {k: offload(v, inline_limit, found) for k, v in value.items()}
    if isinstance(value, list):
        return [offload(v, inline_limit, found) for v in value]
    return value


def store(runs: list[tuple[Namespace, WorkflowExecution, Offloaded]], now: datetime) -> None:
    """Upsert the payloads (bumping ``last_used_at``) and record which runs refer to them.

    Rows go in digest order so concurrent writers of the same payloads never deadlock;
    the upsert holds the row until commit, so collection (``SKIP LOCKED``) passes it by.
    """
    payloads = sorted(
        {(ns.id, d): p for ns, _, found in runs for d, p in found.payloads.items()}.items(),
        key=lambda item: (str(item[0][0]), item[0][1]),
    )
    if payloads:
        Payload.objects.bulk_create(
            [
                Payload(namespace_id=ns_id, digest=d, data=v, size=n, created_at=now, last_used_at=now)
                for (ns_id, d), (v, n) in payloads
            ],
            update_conflicts=True,
            unique_fields=["namespace", "digest"],
            update_fields=["last_used_at"],
        )
    refs = [
        PayloadReference(run=run, shard_id=run.shard_id, namespace=ns, digest=d)
        for ns, run, found in runs
        for d in sorted(found.digests)
    ]
    if refs:
        PayloadReference.objects.bulk_create(refs, ignore_conflicts=True)


def collect_unreferenced(*, batch_size: int = 500, grace: timedelta = COLLECT_GRACE) -> int:
    """Delete one batch of payloads no run refers to any more; return how many."""
    cutoff = timezone.now() - grace
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM history_payload WHERE id IN ("
            " SELECT p.id FROM history_payload p WHERE p.last_used_at < %s AND NOT EXISTS ("
            "  SELECT 1 FROM history_payloadreference r"
            "  WHERE r.namespace_id = p.namespace_id AND r.digest = p.digest)"
            " LIMIT %s FOR UPDATE SKIP LOCKED)",
            [cutoff, batch_size],
        )
        return int(cursor.rowcount)
