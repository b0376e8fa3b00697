"""Archival: a closed run's history leaves the database as gzipped JSON lines before retention.

When a namespace has ``archival_enabled``, the retention timer writes the run through
the ``chronicle_archive`` storage (Django's storage API; a directory by default) and
deletes it only once the file is written. The file is self-contained:

* line 1: ``{"execution": {...}}``, the run's summary;
* then one event per line, with stored payloads put back inline, so the file stays
  readable after the payload store has collected them.

Names are ``<prefix>/<namespace>/<workflow id, quoted>/<run id>.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import io
import json
from typing import Any
from urllib.parse import quote

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages

from history.kernel.payloads import PAYLOAD_REF, is_payload_ref
from history.kernel.responses import execution_summary, serialize_event
from history.models import HistoryEvent, Payload, WorkflowExecution
from namespaces.models import Namespace

ARCHIVE_STORAGE = "chronicle_archive"
SUFFIX = ".jsonl.gz"


def archive_storage() -> Storage:
    return storages[ARCHIVE_STORAGE]


def run_directory(namespace: Namespace, workflow_id: str) -> str:
    parts = [namespace.archival_prefix.strip("/"), _segment(namespace.name), _segment(workflow_id)]
    return "/".join(p for p in parts if p)


def _segment(name: str) -> str:
    """``name`` as one path segment of its own: slashes escaped, and a name of dots (``.``,
    ``..``), which a file system would read as this or the parent folder, spelled out, so
    no namespace or workflow id can place an archive outside its own folder."""
    quoted = quote(name, safe="")
    return quoted.replace(".", "%2E") if set(quoted) == {"."} else quoted


def archive_name(namespace: Namespace, workflow_id: str, run_id: str) -> str:
    return f"{run_directory(namespace, workflow_id)}/{run_id}{SUFFIX}"


def execution_record(ex: WorkflowExecution) -> dict[str, Any]:
    """The run's summary as the archive keeps it: what lists show, with its namespace and
    parent, since the archive outlives the rows those are read from."""
    return {
        "namespace": ex.namespace.name,
        **execution_summary(ex),
        "parent_workflow_id": ex.parent_workflow_id,
        "parent_run_id": str(ex.parent_run_id) if ex.parent_run_id else None,
    }


def _inline(value: Any, payloads: dict[str, Any]) -> Any:
    if is_payload_ref(value):
        return payloads.get(value[PAYLOAD_REF]["sha256"], value)
    if isinstance(value, dict):
        return {k: _inline(v, payloads) for k, v in value.items()}
    if isinstance(value, list):
        return [_inline(v, payloads) for v in value]
    return value


def archive_run(ex: WorkflowExecution) -> str:
    """Write the run's archive file and return its name; raises if the storage fails."""
    digests = list(ex.payload_refs.filter(shard_id=ex.shard_id).values_list("digest", flat=True))
    payloads = dict(
        Payload.objects.filter(namespace_id=ex.namespace_id, digest__in=digests).values_list("digest", "data")
    )
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as out:
        out.write((json.dumps({"execution": execution_record(ex)}) + "\n").encode())
        events = HistoryEvent.objects.filter(run=ex, shard_id=ex.shard_id).order_by("event_id")
        for event in events.iterator(chunk_size=500):
            out.write((json.dumps(_inline(serialize_event(event), payloads)) + "\n").encode())
    name = archive_name(ex.namespace, ex.workflow_id, str(ex.run_id))
    storage = archive_storage()
    if storage.exists(name):
        storage.delete(name)  # an earlier try that was not followed by the delete
    return storage.save(name, ContentFile(buffer.getvalue()))


def read_archive(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The execution summary and the events of an archive file."""
    with archive_storage().open(name, "rb") as raw, gzip.open(raw, "rt") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return records[0]["execution"], records[1:]


def find_archive(namespace: Namespace, workflow_id: str, run_id: str | None) -> str | None:
    """The archive of the given run, else of the workflow's latest archived run."""
    storage = archive_storage()
    directory = run_directory(namespace, workflow_id)
    if run_id:
        name = archive_name(namespace, workflow_id, run_id)
        return name if storage.exists(name) else None
    if not storage.exists(directory):
        return None
    names = [f"{directory}/{f}" for f in storage.listdir(directory)[1] if f.endswith(SUFFIX)]
    if not names:
        return None
    return max(names, key=lambda n: read_archive(n)[0].get("start_time") or "")
