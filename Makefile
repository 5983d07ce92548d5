# `make run`: set up .venv and run the quickstart sweep; `make test`: set up and run the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
LOWEST := .venv-lowest
MEEP := .venv-meep
MEEP_MPI := .venv-meep-mpi

.PHONY: run test test-main test-lowest test-meep meep-env test-meep-mpi test-fast lint bench soak slurm sge clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# setuptools' build backend prints a boxed "Editable installation" notice (a UserWarning) on
# every editable install: it speaks of the build, not of anything a user must do
QUIET_BUILD = PYTHONWARNINGS=ignore::UserWarning

$(RUN_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(QUIET_BUILD) $(BIN)/python -m pip install -q -c constraints.txt -e .
	touch $@

# the tests also run the photonics extra (invrs-gym) and need SLURM and Chromium, which
# scripts/system-deps.sh installs when it can (root with apt-get); their tests skip otherwise
$(TEST_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(QUIET_BUILD) $(BIN)/python -m pip install -q -c constraints.txt -e '.[test,photonics,bench,search]'
	touch $@

run: $(RUN_STAMP)
	$(BIN)/sweep submit recipes/quickstart.yaml

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# four stacks: the newest (every test), the lowest versions pyproject.toml allows (the tests
# not marked slow and one real sweep), a Meep user's (system Meep, numpy<2: the Meep tests)
# and a Meep MPI user's (Debian's parallel Meep, unpacked: the MPI Meep and MPI point tests).
# scripts/legs.py runs every leg even after one fails and ends with a table of them all.
test: $(TEST_STAMP)
	scripts/system-deps.sh
	$(PYTHON) scripts/legs.py

# two test processes, each test file whole in one (its module fixtures, a SLURM once): 17 min
# where one process took 29 on this 2-core machine
test-main: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -ra --durations=15 -n 2 --dist loadfile

$(LOWEST)/.installed: pyproject.toml scripts/lowest-env.sh | $(TEST_STAMP)
	scripts/lowest-env.sh $(LOWEST)
	touch $@

# the fast tests, and every test of the store, whose zarr and xarray calls change most between versions
test-lowest: $(LOWEST)/.installed
	SWEEP_FAST_LIMIT_S=0 $(LOWEST)/bin/python -m pytest -q -ra -p no:cacheprovider -m "not slow"
	$(LOWEST)/bin/python -m pytest -q -ra -p no:cacheprovider -m slow tests/store/test_zarrstore.py tests/store/test_growth.py tests/store/test_integrity.py
	rm -rf $(LOWEST)/quickstart.zarr
	$(LOWEST)/bin/sweep submit recipes/quickstart.yaml --output $(LOWEST)/quickstart.zarr --no-progress
	$(LOWEST)/bin/sweep status $(LOWEST)/quickstart.zarr

$(MEEP)/.installed: pyproject.toml scripts/meep-env.sh
	scripts/meep-env.sh $(MEEP)
	touch $@

meep-env: $(MEEP)/.installed

test-meep: $(MEEP)/.installed
	$(MEEP)/bin/python -m pytest -q -ra -p no:cacheprovider tests/test_meep.py \
		tests/client/test_notebooks.py::test_meep_notebook_runs tests/store/test_zarrstore.py

$(MEEP_MPI)/.installed: pyproject.toml scripts/meep-mpi-env.sh
	scripts/meep-mpi-env.sh $(MEEP_MPI)
	touch $@

test-meep-mpi: $(MEEP_MPI)/.installed
	$(MEEP_MPI)/bin/python -m pytest -q -ra -p no:cacheprovider tests/test_meep_mpi.py

test-fast: lint
	$(BIN)/python -m pytest -q -m "not slow" --durations=15

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/run.py

# a chaos soak on a 3-node SLURM of this machine (root): make soak MINUTES=30 SEED=7
MINUTES ?= 30
SEED ?= 7
soak: $(TEST_STAMP)
	scripts/system-deps.sh
	$(BIN)/python benchmarks/soak.py --minutes $(MINUTES) --seed $(SEED) --save

slurm:
	scripts/slurm-local.sh start

sge:
	scripts/system-deps.sh
	scripts/sge-local.sh start

clean:
	rm -rf $(VENV) $(LOWEST) $(MEEP) $(MEEP_MPI) results .pytest_cache
