#!/bin/sh
# The container image's build steps (Dockerfile), kept in one script so a test can run the
# very same commands in a fresh virtualenv (tests/e2e/test_health_image_build.py).
#
#   platform/image-build.sh install VENV   # a virtualenv with what the server needs to run
#   platform/image-build.sh collect VENV   # the UI's and admin's static files, for WhiteNoise
#
# `install` needs only requirements.txt (so the image caches it apart from the code);
# `collect` needs the whole tree and CHRONICLE_STATIC_ROOT.
set -eu
step="$1"
venv="$2"
case "$step" in
install)
    python -m venv "$venv"
    # The embedded PostgreSQL (pgserver) is for development machines: a container always
    # has DATABASE_URL, so the image leaves that wheel (a whole PostgreSQL) out.
    grep -v '^pgserver==' requirements.txt > "$venv/requirements.txt"
    "$venv/bin/pip" install --no-cache-dir --disable-pip-version-check -q -r "$venv/requirements.txt"
    ;;
collect)
    # No database is reached and nothing is signed: placeholders let the settings load (the
    # image keeps neither; each container is given its own SECRET_KEY and DATABASE_URL).
    DATABASE_URL=postgres://build@127.0.0.1:1/build SECRET_KEY=image-build-placeholder-signs-nothing \
        "$venv/bin/python" manage.py collectstatic --noinput -v 0
    ;;
*)
    echo "usage: $0 install|collect VENV" >&2
    exit 2
    ;;
esac
