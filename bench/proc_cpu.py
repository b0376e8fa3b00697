"""CPU accounting for the benchmarks, read from ``/proc`` (the processes must be on this host).

Shared by ``run_bench.py`` and the SDK benchmark, so every figure of CPU per operation is
counted the same way: user + system seconds per process, differenced between snapshots.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg

CLK_TCK = os.sysconf("SC_CLK_TCK")

# CPU seconds per process id, as one snapshot of a group of processes.
CpuSnapshot = dict[int, float]


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def cpu_by_pid(pids: set[int]) -> CpuSnapshot:
    """CPU seconds (user + system) each live process has used so far."""
    out = {}
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            out[pid] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def cpu_used(before: CpuSnapshot, after: CpuSnapshot) -> float:
    """CPU seconds used between two snapshots; a process new in ``after`` counts in full."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def process_tree(roots: set[int]) -> set[int]:
    """``roots`` and all their descendants (gunicorn's workers are children of its master)."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            parent[int(entry.name)] = int(fields[1])
    tree = set(roots)
    grew = True
    while grew:
        kids = {pid for pid, ppid in parent.items() if ppid in tree and pid not in tree}
        tree |= kids
        grew = bool(kids)
    return tree


def backend_pids(dburl: str, application_name: str | None = None) -> set[int]:
    """The PostgreSQL server processes serving this database (same machine)."""
    sql = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    params: list[str] = []
    if application_name is not None:
        sql += " AND application_name = %s"
        params.append(application_name)
    with psycopg.connect(dburl, autocommit=True) as conn:
        return {int(row[0]) for row in conn.execute(sql, params).fetchall()}
