# Chronicle developer tasks. Everything runs from the project virtualenv in .venv.

PYTHON_BOOTSTRAP ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# What running needs (requirements.txt) and what testing and linting need on top of it
# (requirements-dev.txt): `make run` installs only the first, so a server host never gets
# the lint and test tools. Each stamp is redone only when a file it depends on is newer.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check -q

# Extra pytest arguments, e.g. make test PYTEST_ARGS="-x -k reset" or PYTEST_ARGS=tests/unit.
PYTEST_ARGS ?=
# The tiers without server processes or a browser, in about half the time of the whole run.
FAST_TIERS := tests/unit tests/sdk_unit tests/integration

.PHONY: venv run test test-fast lint bench screenshots cluster cluster-down cluster-status

venv: $(DEV_STAMP)

$(PY):
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

$(RUN_STAMP): requirements.txt | $(PY)
	$(PIP_INSTALL) -r requirements.txt
	@touch $(RUN_STAMP)

# requirements-dev.txt includes requirements.txt, so this install also satisfies `make run`.
$(DEV_STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PIP_INSTALL) -r requirements-dev.txt
	@touch $(DEV_STAMP) $(RUN_STAMP)

# Extra start_dev options, e.g. make run RUN_ARGS="--port 8000 --no-demo-worker".
RUN_ARGS ?=

run: $(RUN_STAMP)
	$(PY) manage.py start_dev $(RUN_ARGS)

# Uses DATABASE_URL when set, otherwise the embedded PostgreSQL under .chronicle/ (stopped
# again at the end unless a `make run` uses it). Without Chromium the browser tier is
# skipped and the summary names it; .ci/run installs Chromium, `make test` does not.
test: $(DEV_STAMP)
	@start=$$(date +%s); $(PY) -m pytest $(PYTEST_ARGS); status=$$?; \
	echo "make test: pytest exited $$status after $$(( $$(date +%s) - start )) s"; exit $$status

test-fast: $(DEV_STAMP)
	@start=$$(date +%s); $(PY) -m pytest $(FAST_TIERS) $(PYTEST_ARGS); status=$$?; \
	echo "make test-fast: pytest exited $$status after $$(( $$(date +%s) - start )) s"; exit $$status

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	DATABASE_URL=$${DATABASE_URL:-postgres://unused@127.0.0.1/unused} $(VENV)/bin/mypy

bench: $(DEV_STAMP)
	$(PY) bench/run_bench.py

# Rewrites docs/screenshots/*.png from a real stack (not part of `test`: the images are committed).
screenshots: $(DEV_STAMP)
	$(PY) -m pytest -q tests/browser/screenshots.py

# Several hosts on this machine (network namespaces, as root): PostgreSQL with automatic
# failover, two frontends behind HAProxy, two shard owners, a worker. See platform/README.md.
cluster: $(RUN_STAMP)
	bash platform/cluster/cluster.sh up

cluster-down:
	bash platform/cluster/cluster.sh down

cluster-status:
	bash platform/cluster/cluster.sh status
