# Two commands: `make run` (the product, embedded) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast install lint format clean bench-smoke

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo
	$(BIN)/python manage.py run_embedded

test: $(STAMP)
	bash scripts/test.sh

# The inner loop: SQLite only, no browser, no slow end-to-end tests, no lint.
test-fast: $(STAMP)
	env -u DATABASE_URL -u REDIS_URL VAR_DIR="$(CURDIR)/var/test-fast" \
		$(BIN)/python -m pytest -m "not services and not browser and not slow" -q $(ARGS)

# Every scripts/bench_*.py at a tiny size (about a minute or two): proves none has rotted. CI runs it.
bench-smoke: $(STAMP)
	bash scripts/bench_smoke.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/djade --target-version 5.2 --check $$(find templates -name '*.html')
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
	$(BIN)/djade --target-version 5.2 $$(find templates -name '*.html')

clean:
	rm -rf var/db.sqlite3 var/broker var/celerybeat-schedule*
