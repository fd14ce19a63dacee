# Two entry points: `make reproduce` (main job) and `make test` (test suite);
# `make docs` builds the API reference into build/docs/html.
# Both create .venv with the project's own dependencies on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# `make reproduce-full`: every experiment's paper-scale preset (days on
# 2 cores, mostly qdpsgd; hours on one GPU); an experiment already done in
# results-full/ is skipped, training runs resume from their checkpoints
# there, qdpsgd and audit from their finished rows, so it can run in parts.
.PHONY: reproduce reproduce-full test test-slow docs bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,experiments,compare,docs]"
	touch $(STAMP)

reproduce: $(STAMP)
	$(PY) -m experiments run all --jobs 3

reproduce-full: $(STAMP)
	$(PY) -m experiments run all --full --jobs 2 --out results-full

# Tests run in TEST_WORKERS processes (pytest-xdist), a whole module per
# process (tests marked `spread` go one by one; tests/conftest.py) so that
# the compile budget (tests/compile_budget.py) counts each module alike;
# TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test: $(STAMP)
	$(PYTEST) -m "not slow"

# Second stage: slow statistical and property-based tests (CI runs both).
test-slow: $(STAMP)
	$(PYTEST) -m slow

# The documentation site (Sphinx, docs/conf.py), offline: warnings fail it.
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -q -b html docs build/docs/html
	@echo "open build/docs/html/index.html"

# The benchmark's optional baselines (jax_privacy, PyTorch + Opacus) come from
# the `bench` extra; when it cannot be installed their columns are skipped.
BENCH_STAMP := $(VENV)/.bench-installed

# torch comes first from the CPU-only index (the default index's wheel pulls
# several GB of CUDA packages); the extra pins the same version.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet torch==2.13.0 --index-url $(TORCH_CPU_INDEX) \
	  || echo "CPU torch wheel not installed"
	$(PY) -m pip install --quiet -e ".[bench]" \
	  || echo "bench extra not installed: its benchmark columns will be skipped"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m experiments bench dpsgd --out results/bench
	$(PY) -m experiments bench ynnpack_reduce
	$(PY) -m experiments bench noise
	$(PY) -m experiments bench seeds
	$(PY) -m experiments bench qdpsgd
	$(PY) -m experiments bench distributed_dp --num-clients 100 --dimension 4096
	$(PY) -m experiments bench compgd --dimensions 100 10000
	$(PY) -m experiments bench nonparametric
	$(PY) -m experiments bench trees
	$(PY) -m experiments bench audit

# Every benchmark once at its smallest setting (checks they run; not timings).
bench-quick: $(STAMP)
	$(PY) -m experiments bench all --quick

clean:
	rm -rf $(VENV) results
