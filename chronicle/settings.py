"""Django settings for Chronicle, read from the environment.

Every knob has a safe development default, and every variable read here is listed,
with its default and meaning, in ``platform/env.example`` (a test compares the two).
With no ``DATABASE_URL`` the project starts its own PostgreSQL (see
:mod:`chronicle.embedded_postgres`).

Production settings refuse to start unsafe (:mod:`chronicle.production`): no
``SECRET_KEY`` with ``DEBUG`` off, or ``DEBUG`` on with a public host.
"""

from __future__ import annotations

from pathlib import Path

import environ

from chronicle.logging_config import logging_settings
from chronicle.production import LOCAL_HOSTS, require_safe_debug, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

DEBUG = env.bool("CHRONICLE_DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=[*LOCAL_HOSTS, "testserver"])
require_safe_debug(DEBUG, ALLOWED_HOSTS)
# Before the database, so a refused process starts no embedded PostgreSQL.
SECRET_KEY = secret_key(env.str("SECRET_KEY", default=""), debug=DEBUG)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "chronicle",
    "namespaces",
    "history",
    "matching",
    "executions",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The UI's and the admin's static files, from collectstatic's output or the apps' folders.
    "chronicle.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "chronicle.urls"
ASGI_APPLICATION = "chronicle.asgi.application"
WSGI_APPLICATION = "chronicle.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# A development machine's state: the embedded PostgreSQL, dev.json, archives, static files.
# CHRONICLE_STATE_DIR moves it (tests run a whole `start_dev` in a temporary one).
CHRONICLE_STATE_DIR = Path(env.str("CHRONICLE_STATE_DIR", default=str(BASE_DIR / ".chronicle")))
# The embedded server's data directory when there is no DATABASE_URL, else None: who runs
# the embedded server stops it (start_dev on Ctrl-C, the test session at its end).
CHRONICLE_EMBEDDED_PGDATA = None if env.str("DATABASE_URL", default="") else CHRONICLE_STATE_DIR / "pgdata"


def _database_url() -> str:
    """The configured server, or the embedded one started on demand."""
    if CHRONICLE_EMBEDDED_PGDATA is None:
        return str(env.str("DATABASE_URL"))
    from chronicle.embedded_postgres import embedded_database_url

    return embedded_database_url(CHRONICLE_EMBEDDED_PGDATA)


DATABASES = {"default": env.db_url_config(_database_url())}
DATABASES["default"]["ENGINE"] = "chronicle.postgresql"  # Django's, with a cheaper pool check
# Under ASGI each sync request runs on its own thread, so per-thread persistent
# connections would pile up; a per-process psycopg pool bounds and reuses them instead.
DATABASES["default"]["CONN_MAX_AGE"] = 0
# The pool checks each connection as it hands it out, so a connection the server dropped
# (a restart, a failover, an idle-session kill) is replaced instead of failing the request
# that got it. The check looks at the socket and queries only when something arrived on it
# (Chronicle's backend, chronicle.postgresql: Django's own check queries every time).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CHRONICLE_DB_HEALTH_CHECKS", default=True)
DATABASES["default"].setdefault("OPTIONS", {})
if env.bool("CHRONICLE_DB_POOL", default=True):
    from chronicle.db import PoolConnection

    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": env.int("CHRONICLE_DB_POOL_MIN", default=2),
        "max_size": env.int("CHRONICLE_DB_POOL_MAX", default=20),
        "timeout": env.float("CHRONICLE_DB_POOL_TIMEOUT", default=30.0),
        # How long the pool keeps retrying a lost connection in the background. Its retries
        # double their delay (1, 2, 4, 8, 16 s...), so after a failover of 20 s the next
        # try could come 10 s after the new primary took writes, and every request got a
        # 503 meanwhile. Given up after 2 s, a connection is made again when a request
        # needs one, at once: service resumes within a second of the promotion.
        "reconnect_timeout": 2.0,
        # The pool makes its connections in the background, where a request waiting for one
        # saw no refusal: with this class its first failed attempt ("too many clients", a
        # server down) starts the outage, and requests get their 503 within about 2 s
        # instead of after the whole timeout; its next connection made ends it.
        "connection_class": PoolConnection,
    }
# A server that vanishes without a word (a partition, a host powered off, a primary cut
# off by a firewall) leaves connections that neither fail nor answer: a query on one
# would wait for TCP to give up, a quarter of an hour. Keepalives from 5 s of silence and
# a 10 s bound on unacknowledged data make such a connection fail within about 10 s, so
# the request gets its 503, the pool replaces it, and the LISTEN connections reconnect.
# DATABASE_URL's own values (``?keepalives_idle=...``) take precedence.
for _option, _value in (
    ("keepalives", 1),
    ("keepalives_idle", 5),
    ("keepalives_interval", 2),
    ("keepalives_count", 3),
    ("tcp_user_timeout", 10_000),  # milliseconds
):
    DATABASES["default"]["OPTIONS"].setdefault(_option, _value)
# The kernel's fixed statements (history.kernel.store) are prepared: parsed and planned
# once per connection instead of on every call, which was most of PostgreSQL's CPU per
# workflow. Django turns preparing off unless given a threshold; this one prepares only
# the statements that ask (others would need a million runs first). Turn it off behind a
# pooler in transaction mode, which cannot keep a connection's prepared statements.
if env.bool("CHRONICLE_DB_PREPARED_STATEMENTS", default=True):
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 1_000_000)
# Every Chronicle connection names itself, so operators find them in pg_stat_activity;
# CHRONICLE_DB_APPLICATION_NAME tells one deployment's (or one process group's) apart.
DATABASES["default"]["OPTIONS"].setdefault(
    "application_name", env.str("CHRONICLE_DB_APPLICATION_NAME", default="chronicle")
)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # collectstatic also writes compressed copies, which WhiteNoise sends to clients that take them.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    # Closed runs' histories, written before retention deletes them (namespaces opt in).
    "chronicle_archive": {
        "BACKEND": env.str(
            "CHRONICLE_ARCHIVE_BACKEND", default="django.core.files.storage.FileSystemStorage"
        ),
        "OPTIONS": {
            "location": env.str("CHRONICLE_ARCHIVE_DIR", default=str(CHRONICLE_STATE_DIR / "archive"))
        },
    },
}
STATIC_URL = "static/"
# WhiteNoise serves `collectstatic`'s output from here (the container image collects it at
# build time, the Procfile's release step and the systemd migrate unit on deploy), so a
# frontend serves the UI and the admin complete without a separate web server.
STATIC_ROOT = Path(env.str("CHRONICLE_STATIC_ROOT", default=str(CHRONICLE_STATE_DIR / "static")))
# Once collectstatic has filled STATIC_ROOT, its (compressed) copies are served; before that
# (development, tests) the apps' own folders are.
WHITENOISE_USE_FINDERS = not STATIC_ROOT.is_dir()
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

# Behind a TLS-terminating proxy or load balancer (docs/operations.md, "Behind a proxy").
# The origins (scheme://host[:port]) a signed-in browser posts forms from, when they differ
# from the host the request names (a load balancer that rewrites Host, another port).
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# "HEADER,value" that marks a request the proxy received over HTTPS, e.g.
# "HTTP_X_FORWARDED_PROTO,https". Set it only when the proxy always sets or strips that header.
_proxy_header = env.list("SECURE_PROXY_SSL_HEADER", default=[])
SECURE_PROXY_SSL_HEADER = (_proxy_header[0], _proxy_header[1]) if len(_proxy_header) == 2 else None
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
# Probes and scrapes come over plain HTTP from inside the network (Django matches without the
# leading slash); the API and the lean lane run no middleware, so no redirect reaches them.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)

# Request bodies: payloads are refused past 2 MiB each; a whole request may carry a few.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("CHRONICLE_MAX_REQUEST_BYTES", default=8 * 1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["namespaces.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_PARSER_CLASSES": ["chronicle.api.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "chronicle.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Chronicle API",
    "DESCRIPTION": "Durable executions: client and worker operations.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "matching.lane_schema.add_lane_to_schema",
        "executions.lane_schema.add_lane_to_schema",
        "matching.lane_schema.add_async_endpoints_to_schema",
        "chronicle.openapi.close_request_bodies",
        "chronicle.openapi.empty_query_values",
    ],
}

CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Chronicle's own knobs; read through chronicle.conf.engine_settings().
CHRONICLE_SHARDS = env.int("CHRONICLE_SHARDS", default=16)
CHRONICLE_POLL_TIMEOUT_SECONDS = env.float("CHRONICLE_POLL_TIMEOUT_SECONDS", default=60.0)
CHRONICLE_HISTORY_WAIT_SECONDS = env.float("CHRONICLE_HISTORY_WAIT_SECONDS", default=20.0)
CHRONICLE_SAFETY_RECHECK_SECONDS = env.float("CHRONICLE_SAFETY_RECHECK_SECONDS", default=1.0)
CHRONICLE_SHARD_LEASE_SECONDS = env.float("CHRONICLE_SHARD_LEASE_SECONDS", default=10.0)
CHRONICLE_STICKY_TIMEOUT_SECONDS = env.float("CHRONICLE_STICKY_TIMEOUT_SECONDS", default=5.0)
CHRONICLE_QUERY_TIMEOUT_SECONDS = env.float("CHRONICLE_QUERY_TIMEOUT_SECONDS", default=10.0)
# How long a frontend process trusts an API key it resolved (revocation bound, seconds).
CHRONICLE_API_KEY_CACHE_SECONDS = env.float("CHRONICLE_API_KEY_CACHE_SECONDS", default=5.0)
CHRONICLE_FAULTS = env.list("CHRONICLE_FAULTS", default=[])

# Structured JSON lines in production, readable text in development (chronicle.logging_config).
LOGGING = logging_settings(
    env.str("CHRONICLE_LOG_FORMAT", default="text"), env.str("CHRONICLE_LOG_LEVEL", default="INFO")
)

# /metrics answers only with "Authorization: Bearer <token>" when set (chronicle.metrics).
CHRONICLE_METRICS_TOKEN = env.str("CHRONICLE_METRICS_TOKEN", default="")
# A file each daemon touches while its loop runs, for a container's or supervisor's
# liveness check (chronicle.health); empty: none.
CHRONICLE_HEARTBEAT_DIR = env.str("CHRONICLE_HEARTBEAT_DIR", default="")
