# `make run` (the product with demo data, embedded), `make serve` (the product on your own database,
# no demo) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run serve test test-fast install lint format clean bench-smoke

$(BIN)/python:
	@echo "==> Creating the virtualenv $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "==> Installing the Python packages into $(VENV) (the first time: a few minutes)"
	$(BIN)/python -m pip install --quiet --progress-bar on -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

# A one-person run: demo data, and webhooks may reach a receiver on this machine (printed at start).
run: $(STAMP)
	@$(BIN)/python manage.py run_embedded --migrate --demo --allow-loopback

# The same processes on the database you have (var/db.sqlite3, or DATABASE_URL), without the demo.
serve: $(STAMP)
	@$(BIN)/python manage.py run_embedded --migrate

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
