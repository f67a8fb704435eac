# The two commands: `make run` (the demo) and `make test` (lint, types, layers, tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
RUN_ARGS ?= --pods 60 --churn 2

.PHONY: run test lint typecheck layers pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The project alone (make run), and with its test extras (make test, make bench).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP) $(TEST_STAMP)

run: $(STAMP)
	$(BIN)/cacheproxy demo $(RUN_ARGS)

test: lint typecheck layers pytest

lint: $(TEST_STAMP)
	$(BIN)/ruff format --check cacheproxy tests examples loadtest
	$(BIN)/ruff check cacheproxy tests examples loadtest

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

layers: $(TEST_STAMP)
	$(BIN)/lint-imports

pytest: $(TEST_STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

bench: $(TEST_STAMP)
	$(BIN)/python -m loadtest.ingest --pods 10000 100000 --out loadtest/out

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
