# deepwork-server: `make run` to start, `make test` to run every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: run test test-db lint format bench conformance migrate clean setup browser soak docs fresh-database

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

migrate: $(STAMP)
	$(PY) manage.py migrate --noinput

## Set up, migrate, make the first admin account once, and serve pages, admin and API.
run: migrate
	$(PY) manage.py ensure_admin
	$(VENV)/bin/uvicorn deepwork_site.asgi:application --host $(HOST) --port $(PORT)

## Debian's chromium for the browser tests (Playwright drives it; no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo -n ); \
	  echo "Installing Debian's chromium for the browser tests"; \
	  $$SUDO apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || \
	  { $$SUDO apt-get update >/dev/null && \
	    $$SUDO apt-get install -y --no-install-recommends chromium >/dev/null; } || \
	  echo "Could not install chromium: the browser tests will be skipped"; }

## Set up and run the whole suite (SQLite unless DATABASE_URL says otherwise). The slowest
## tests are listed at the end, to keep the suite's time in view.
test: $(STAMP) browser
	$(PY) manage.py makemigrations --check --dry-run >/dev/null
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mkdocs build --strict --quiet -d var/site
	$(PY) -m pytest --durations=15

## The documentation site from docs/ (MkDocs Material), into var/site; --strict turns a broken
## link, a missing page or an unknown anchor into a failure.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict -d var/site

## After adding or changing a migration: rewrite mcp_bridge/fresh_database.sql, what every
## migration leaves in a new SQLite database (a first start loads it instead of migrating).
fresh-database: $(STAMP)
	$(PY) manage.py fresh_database --write

## Only the tests that touch the database (CI repeats these on PostgreSQL).
test-db: $(STAMP)
	$(PY) -m pytest -m django_db

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## Compare per-call latency with deepwork 0.9.1 on the same fixture, check that a transition
## costs the same after 20,000 sessions of history, time the quality gate, then the dashboard
## and API with 100k sessions and 1M events, and live latency to a browser.
bench: $(STAMP) browser
	$(PY) tests/bench/run_bench.py
	$(PY) tests/bench/first_call_bench.py
	$(PY) tests/bench/history_bench.py
	$(PY) tests/bench/gate_bench.py
	$(PY) tests/bench/files_bench.py
	$(PY) tests/bench/dashboard_bench.py
	$(PY) tests/bench/workflow_tools_bench.py
	$(PY) tests/bench/dag_bench.py
	$(PY) tests/bench/insights_bench.py
	$(PY) tests/bench/hosted_bench.py
	$(PY) tests/bench/tracker_bench.py

## kill -9 mcpserve at random moments over 1,000 transitions (reviews included) and check every
## session, step run, review and event after each restart. Not part of `make test`; pass
## SOAK_ARGS="--transitions N --seed S --max-seconds T [--database-url postgres://...]".
soak: $(STAMP)
	$(PY) tests/soak/kill_soak.py $(SOAK_ARGS)

## The official MCP conformance suite against `mcpserve --transport http` and `/mcp` of the ASGI app.
conformance: $(STAMP)
	bash tests/conformance/run.sh

clean:
	rm -rf $(VENV) var .tools .bench
