# Targets are the commands CI and developers run. `make help` lists them.
PY ?= .venv/bin/python

.PHONY: help install test lint format typecheck bench docker ci
help:            ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
install:         ## create .venv and install agentload with test+dev extras
	[ -x $(PY) ] || python3 -m venv .venv
	$(PY) -m pip install -q -e '.[test,dev]'
docker:          ## start (or find) a Docker engine; prints the DOCKER_HOST to export
	scripts/docker-up.sh
test:            ## the README's test command
	$(PY) -m pytest -q
lint:            ## ruff lint (incl. complexity, parameters) + format check + import layers + sizes
	$(PY) -m ruff check . && $(PY) -m ruff format --check . && $(PY) scripts/import_graph.py && $(PY) scripts/size_check.py
format:          ## apply ruff formatting and autofixes
	$(PY) -m ruff format . && $(PY) -m ruff check --fix .
typecheck:       ## mypy --strict on the package
	$(PY) -m mypy
bench:           ## run every benchmark script (prints figures; JSON last line each)
	for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done
ci:              ## what CI runs
	bash .ci/run
