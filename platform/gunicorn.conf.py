"""Gunicorn settings for the Chronicle frontend (ASGI via uvicorn workers).

Used by ``manage.py start_dev``, the Procfile and the systemd unit:
``gunicorn chronicle.asgi:application -c platform/gunicorn.conf.py``.
"""

from __future__ import annotations

import os

# Worker processes; each runs an asyncio loop that serves many long-polls at once.
# Default: one per two cores (at least one). PostgreSQL on the same host spends about two
# thirds of the frontends' CPU again, and every worker process more parses each task
# notification and races the others for each woken task; on a host of its own, with the
# database elsewhere, set it to the number of cores.
_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
workers = int(os.environ.get("CHRONICLE_WEB_CONCURRENCY", "0")) or max(1, _cores // 2)
worker_class = "uvicorn_worker.UvicornWorker"

# Long-polls (task queue polls, history waits) last up to 60 s, so the worker
# timeout must be comfortably above that.
timeout = 120
# Time given to in-flight requests (including long-polls) on reload/shutdown.
graceful_timeout = 30
# Keep idle connections open longer than typical load balancer idle timeouts (60 s).
keepalive = 75

# Access log to stdout, error log to stderr; the supervisor collects both.
# CHRONICLE_ACCESS_LOG="" turns the access log off (the test suite and benchmark do).
accesslog = os.environ.get("CHRONICLE_ACCESS_LOG", "-") or None
errorlog = "-"
loglevel = os.environ.get("CHRONICLE_LOG_LEVEL", "info").lower()
# CHRONICLE_LOG_FORMAT=json: gunicorn's own lines and the access log as JSON lines too,
# like the application's (chronicle.logging_config).
if os.environ.get("CHRONICLE_LOG_FORMAT", "text") == "json":
    from chronicle.logging_config import gunicorn_logconfig

    logconfig_dict = gunicorn_logconfig(loglevel, access=accesslog is not None)

# The frontend's protective database timeouts (docs/reliability.md), unless the operator
# names another role: each worker reads it as Django starts.
os.environ.setdefault("CHRONICLE_DB_ROLE", "frontend")

# Bind address when not given on the command line (start_dev passes -b).
bind = os.environ.get("CHRONICLE_BIND", "127.0.0.1:7243")

# Prometheus metrics (chronicle.metrics): each worker is a process, so prometheus-client
# keeps every process's values in files in one folder, which /metrics adds up. Without
# PROMETHEUS_MULTIPROC_DIR, a folder of this server's own is made (and emptied, as a new
# server's counters start from zero); with it, the operator shares that folder with the
# daemons so /metrics shows theirs too, and empties it before a fresh start. Chronicle
# keeps no per-process gauge there, so a worker that exits leaves nothing to clean up.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    import tempfile

    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="chronicle-metrics-")

    _own_metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"]


def on_exit(server: object) -> None:
    """Remove the metrics folder this server made for itself (none given)."""
    folder = globals().get("_own_metrics_dir")
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
