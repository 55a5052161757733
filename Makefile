# nbviz: the documented entry points. `make help` lists them.
#
# Variables (override on the command line, e.g. `make test VENV=/tmp/nbviz-venv`):
#   PYTHON        interpreter that creates the virtualenv (>= 3.10)
#   TORCH         the torch requirement installed first, before nbviz resolves its own
#   CONSTRAINTS   pip constraints for every install (constraints.txt pins torch to TORCH's version)
#   EXTRAS        the optional extras installed for the tests (the integrations' libraries)
#   VENV          the virtualenv directory
#   PYTEST_ARGS   extra pytest arguments, e.g. PYTEST_ARGS='-m "not browser"'
#   TEST_TIMEOUT  seconds after which the pytest run is stopped

SHELL := /bin/bash
PYTHON ?= python3
TORCH ?= torch==2.13.0
CONSTRAINTS ?= constraints.txt
EXTRAS ?= test,transformers,lightning,tensorboard
VENV ?= .venv
NPM ?= npm
PYTEST_ARGS ?=
TEST_TIMEOUT ?= 3600

BIN := $(VENV)/bin
PY := $(BIN)/python
VENV_STAMP := $(VENV)/.stamp-nbviz-test
BENCH_STAMP := $(VENV)/.stamp-nbviz-bench
NODE_STAMP := js/node_modules/.stamp-npm-ci
LINT_PATHS := $(wildcard src tests benchmarks)
HEADLESS := [ "$${CI:-}" = true ] || ! [ -t 1 ]

.DEFAULT_GOAL := help
.PHONY: help venv js lint chromium test demo bench clean

help:  ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z]+):.*## /  make \1\t/' | expand -t 16

venv: $(VENV_STAMP)  ## create $(VENV): $(TORCH) first, then nbviz editable with $(EXTRAS)

$(VENV_STAMP): pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -c $(CONSTRAINTS) '$(TORCH)'
	$(PY) -m pip install -c $(CONSTRAINTS) -e '.[$(EXTRAS)]'
	@touch $@

$(NODE_STAMP): js/package.json js/package-lock.json
	cd js && $(NPM) ci --no-audit --no-fund
	@touch $@

js: $(NODE_STAMP)  ## bundle each js/*.js entry into src/nbviz/static/ (npm ci first when stale)
	cd js && $(NPM) run build

lint: venv  ## ruff check and ruff format --check
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

chromium:  # Debian's chromium for the browser tests (CI runs as root)
	@command -v chromium >/dev/null 2>&1 \
	  || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) \
	  || { [ "$${CI:-}" != true ] && echo "make: chromium is not installed; browser tests will be skipped" >&2; }

test: venv js lint chromium  ## lint, JS unit tests, then every pytest test including the browser ones
	node --test js/test/*.test.mjs
	timeout $(TEST_TIMEOUT) $(PY) -m pytest $(PYTEST_ARGS)

demo: venv js  ## train a small model into notebooks/runs/demo, then open the quickstart notebook on it
	$(BIN)/nbviz demo --out notebooks/runs/demo
	@if $(HEADLESS); then \
	  echo "open notebooks/01-quickstart.ipynb in JupyterLab: it reads this run (runs/demo beside it)"; \
	else \
	  $(BIN)/jupyter lab notebooks/01-quickstart.ipynb; \
	fi

$(BENCH_STAMP): $(VENV_STAMP)
	$(PY) -m pip install -c $(CONSTRAINTS) -e '.[$(EXTRAS),bench]'
	@touch $@

# benchmarks/ also holds modules the scripts import (harness, reference models): a
# benchmark is a file with a main guard.
bench: venv js $(BENCH_STAMP)  ## run every benchmark script in benchmarks/ (installs the bench extra: tensorboard, wandb)
	@set -e; ran=0; for f in benchmarks/*.py; do \
	  grep -q '^if __name__ == "__main__":' "$$f" 2>/dev/null || continue; \
	  echo "== $$f"; $(PY) "$$f"; ran=1; \
	done; [ $$ran = 1 ] || echo "no benchmark scripts in benchmarks/ to run"

clean:  ## remove build output, node_modules and caches (keeps $(VENV) and runs/)
	rm -rf src/nbviz/static js/node_modules build dist src/*.egg-info .pytest_cache .ruff_cache \
	  tests/browser/_artifacts
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
