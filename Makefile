# The two commands: `make run` (the demo) and `make test` (lint, types, layers, tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_ARGS ?= --pods 60 --churn 2

.PHONY: run test lint typecheck layers pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/cacheproxy demo $(RUN_ARGS)

test: lint typecheck layers pytest

lint: $(STAMP)
	$(BIN)/ruff format --check cacheproxy tests examples loadtest
	$(BIN)/ruff check cacheproxy tests examples loadtest

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/python -m loadtest.ingest --pods 10000 100000 --out loadtest/out

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
