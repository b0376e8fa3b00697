# Chronicle developer tasks. Everything runs from the project virtualenv in .venv.

PYTHON_BOOTSTRAP ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv run test lint bench screenshots

venv: $(STAMP)

# Re-install only when a requirements file is newer than the stamp.
$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	@touch $(STAMP)

run: venv
	$(PY) manage.py start_dev

# Uses DATABASE_URL when set, otherwise the embedded PostgreSQL under .chronicle/.
test: venv
	$(PY) -m pytest

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	DATABASE_URL=$${DATABASE_URL:-postgres://unused@127.0.0.1/unused} $(VENV)/bin/mypy

bench: venv
	$(PY) bench/run_bench.py

# Rewrites docs/screenshots/*.png from a real stack (not part of `test`: the images are committed).
screenshots: venv
	$(PY) -m pytest -q tests/browser/screenshots.py
