# Two commands on a fresh machine: `make demo` and `make test`. Each sets up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pip must never pick the compromised litellm releases, whatever asks for litellm.
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup setup-dev demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.runtime: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -e ".[dev]"
	touch $@ $(VENV)/.runtime

setup: $(VENV)/.runtime
setup-dev: $(VENV)/.dev

demo: setup
	$(BIN)/python examples/rag_demo.py

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

bench: setup-dev
	for script in benchmarks/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
