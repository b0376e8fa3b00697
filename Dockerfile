# One image for every Chronicle process: the frontend (the default command), the shard
# owner, the batch runner and the one-off migration (compose.yaml runs each). Slim, and the
# processes run as the unprivileged user `chronicle`.
#
#   docker build -t chronicle .
#   docker compose up          # PostgreSQL, migrate, frontend, shard owner, batch runner
#
# The build steps live in platform/image-build.sh, which a test runs in a fresh virtualenv.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH

RUN groupadd --system chronicle \
    && useradd --system --gid chronicle --home-dir /opt/chronicle --shell /usr/sbin/nologin chronicle

WORKDIR /opt/chronicle

# Dependencies first: this layer is rebuilt only when requirements.txt changes.
COPY requirements.txt ./
COPY platform/image-build.sh platform/
RUN platform/image-build.sh install /opt/venv

COPY . .
ENV CHRONICLE_STATIC_ROOT=/opt/chronicle/static
RUN platform/image-build.sh collect /opt/venv \
    && mkdir -p /var/lib/chronicle/metrics /var/lib/chronicle/archive /run/chronicle \
    && chown -R chronicle:chronicle /var/lib/chronicle /run/chronicle

# Where the processes write: the archive, the heartbeat files and the shared metrics folder
# (a volume that compose shares between the containers).
ENV CHRONICLE_ARCHIVE_DIR=/var/lib/chronicle/archive \
    CHRONICLE_HEARTBEAT_DIR=/run/chronicle \
    PROMETHEUS_MULTIPROC_DIR=/var/lib/chronicle/metrics \
    CHRONICLE_BIND=0.0.0.0:7243 \
    CHRONICLE_LOG_FORMAT=json

USER chronicle
EXPOSE 7243

# The frontend's readiness; compose sets each daemon's own check.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-m", "chronicle.health", "url", "http://127.0.0.1:7243/healthz"]

CMD ["gunicorn", "chronicle.asgi:application", "-c", "platform/gunicorn.conf.py"]
