# Chronicle developer tasks. Everything runs from the project virtualenv in .venv.

PYTHON_BOOTSTRAP ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Extra pytest arguments, e.g. make test PYTEST_ARGS="-x -k reset" or PYTEST_ARGS=tests/unit.
PYTEST_ARGS ?=
# The tiers without server processes or a browser, in about half the time of the whole run.
FAST_TIERS := tests/unit tests/sdk_unit tests/integration

.PHONY: venv run test test-fast lint bench screenshots

venv: $(STAMP)

# Re-install only when a requirements file is newer than the stamp.
$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	@touch $(STAMP)

# Extra start_dev options, e.g. make run RUN_ARGS="--port 8000 --no-demo-worker".
RUN_ARGS ?=

run: venv
	$(PY) manage.py start_dev $(RUN_ARGS)

# Uses DATABASE_URL when set, otherwise the embedded PostgreSQL under .chronicle/ (stopped
# again at the end unless a `make run` uses it). Without Chromium the browser tier is
# skipped and the summary names it; .ci/run installs Chromium, `make test` does not.
test: venv
	@start=$$(date +%s); $(PY) -m pytest $(PYTEST_ARGS); status=$$?; \
	echo "make test: pytest exited $$status after $$(( $$(date +%s) - start )) s"; exit $$status

test-fast: venv
	@start=$$(date +%s); $(PY) -m pytest $(FAST_TIERS) $(PYTEST_ARGS); status=$$?; \
	echo "make test-fast: pytest exited $$status after $$(( $$(date +%s) - start )) s"; exit $$status

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	DATABASE_URL=$${DATABASE_URL:-postgres://unused@127.0.0.1/unused} $(VENV)/bin/mypy

bench: venv
	$(PY) bench/run_bench.py

# Rewrites docs/screenshots/*.png from a real stack (not part of `test`: the images are committed).
screenshots: venv
	$(PY) -m pytest -q tests/browser/screenshots.py
