# `make demo` installs and runs the main job; `make test` installs and runs every check CI runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check install install-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

demo: install
	$(BIN)/harness run

check:
	$(BIN)/ruff check harness tests bench
	$(BIN)/mypy harness
	$(BIN)/pytest -q

test: install-test check

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
