"""The registered experiments, by name (``python -m experiments list``).

``get(name)`` returns the experiment's ``runner.Experiment`` (the module's
``EXPERIMENT``; see experiments/common/runner.py and docs/experiments.md).

Modules are imported on first use (``get``, or the ``EXPERIMENTS`` mapping),
so that the CLI answers ``--help`` without importing JAX.
"""

import importlib
from types import ModuleType

NAMES = ('dpsgd_baseline', 'rs_tradeoff', 'rs_privacy', 'rs_attack',
         'compressive_regression', 'cpsgd_mechanisms', 'cpsgd_dme',
         'cpsgd_training', 'distributed_dp', 'qdpsgd', 'compgd',
         'nonparametric', 'trees', 'correlated_noise', 'finetune',
         'audit')

# The quick runs, longest first (cold, 2 cores, 2026-11-26): `run all --jobs
# N` starts them in this order so that the longest does not start last.
# Only scheduling reads it; the report keeps the order of NAMES.
LONGEST_FIRST = ('qdpsgd', 'rs_tradeoff', 'compressive_regression',
                 'nonparametric', 'cpsgd_dme', 'trees', 'correlated_noise',
                 'finetune', 'cpsgd_training', 'audit', 'compgd',
                 'distributed_dp', 'dpsgd_baseline', 'rs_privacy',
                 'rs_attack', 'cpsgd_mechanisms')


def module(name: str) -> ModuleType:
  """The experiment's module (package) called ``name`` (one of ``NAMES``)."""
  if name not in NAMES:
    raise ValueError(f"unknown experiment {name!r}; known: "
                     f"{', '.join(NAMES)} (or 'all')")
  return importlib.import_module(f'experiments.{name}')


def get(name: str):
  """The ``runner.Experiment`` called ``name``."""
  return module(name).EXPERIMENT


def __getattr__(attr: str):
  if attr == 'EXPERIMENTS':  # every experiment, imported now, in NAMES order
    return {name: get(name) for name in NAMES}
  raise AttributeError(f'module {__name__!r} has no attribute {attr!r}')
