# Two commands a new user needs: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
STAMP  := $(VENV)/.installed

.PHONY: install run test test-sqlite test-postgres bench bench-quick lint format check clean

$(STAMP): requirements/base.txt requirements/production.txt requirements/local.txt requirements/mcp.txt requirements/embeddings-local.txt pyproject.toml $(wildcard package.json package-lock.json)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements/local.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	if [ -f package.json ]; then npm ci --no-audit --no-fund --loglevel=error; fi
	touch $(STAMP)

install: $(STAMP)

run: install  ## serve the embedded default (SQLite under var/) on http://$(HOST):$(PORT)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py kb_dev_setup
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

test: install  ## the whole suite on SQLite and on embedded PostgreSQL
	bash tests/run.sh

test-sqlite: install
	bash tests/run.sh sqlite

test-postgres: install
	bash tests/run.sh postgres

bench: install  ## benchmarks through gunicorn, SQLite and PostgreSQL (10k documents)
	bash bench/run.sh

bench-quick: install
	bash bench/run.sh --quick

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python manage.py makemigrations --check --dry-run

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf var/test-pg var/bench-pg
