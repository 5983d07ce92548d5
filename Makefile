# `make run`: set up .venv and run the quickstart sweep; `make test`: set up and run the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test test-fast lint bench slurm clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# the tests also run the photonics extra (invrs-gym) and need SLURM and Chromium, which
# scripts/system-deps.sh installs when it can (root with apt-get); their tests skip otherwise
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,photonics,bench,search]'
	touch $@

run: $(RUN_STAMP)
	$(BIN)/sweep submit recipes/quickstart.yaml

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	scripts/system-deps.sh
	$(BIN)/python -m pytest -q -ra

test-fast: lint
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/run.py

slurm:
	scripts/slurm-local.sh start

clean:
	rm -rf $(VENV) results .pytest_cache
