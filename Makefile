# Two entry points: `make reproduce` (main job) and `make test` (test suite).
# Both create .venv with the project's own dependencies on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: reproduce test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,experiments]"
	touch $(STAMP)

reproduce: $(STAMP)
	$(PY) -m experiments

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m experiments.bench_step

clean:
	rm -rf $(VENV) results
