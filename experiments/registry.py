"""The registered experiments and benchmarks, by name.

Experiments (``NAMES``, ``python -m experiments run NAME``; ``run all``
runs ``MAIN_JOB``): ``get(name)`` is
the experiment's ``runner.Experiment`` (its package's ``EXPERIMENT``; see
experiments/common/runner.py and docs/experiments.md), ``module(name)`` the
package.

Benchmarks (``BENCHMARKS``, ``python -m experiments bench NAME``): modules of
``experiments.bench`` with ``main(argv)`` and ``QUICK``, the arguments of
their smallest setting. ``benchmark(name)`` is the module,
``benchmark_info(name)`` its description and quick arguments, read from its
source.

Both kinds are looked up the same way (``_import``: an unknown name is a
ValueError naming the known ones) and imported on first use (or through the
``EXPERIMENTS`` mapping), so that the CLI answers ``--help`` and lists the
benchmarks without importing JAX.
"""

import ast
import importlib
import os
from types import ModuleType
from typing import NamedTuple

NAMES = ('dpsgd_baseline', 'rs_tradeoff', 'rs_privacy', 'rs_attack',
         'compressive_regression', 'cpsgd_mechanisms', 'cpsgd_dme',
         'cpsgd_training', 'distributed_dp', 'qdpsgd', 'compgd',
         'nonparametric', 'trees', 'correlated_noise', 'finetune',
         'lm_finetune', 'audit')

# What `run all` (the main job) runs: every paper reproduction. lm_finetune,
# the project's own language-model experiment, runs by name: its quick
# preset alone takes minutes of the main job's 15 on 2 cores.
MAIN_JOB = tuple(n for n in NAMES if n != 'lm_finetune')

# The quick runs, longest first (cold, 2 cores, 2026-11-26): `run all --jobs
# N` starts them in this order so that the longest does not start last.
# Only scheduling reads it; the report keeps the order of NAMES.
LONGEST_FIRST = ('qdpsgd', 'rs_tradeoff', 'compressive_regression',
                 'nonparametric', 'cpsgd_dme', 'trees', 'correlated_noise',
                 'finetune', 'cpsgd_training', 'audit', 'compgd',
                 'distributed_dp', 'dpsgd_baseline', 'rs_privacy',
                 'rs_attack', 'cpsgd_mechanisms')

# The benchmarks, in the order ``bench all`` runs them.
BENCHMARKS = ('dpsgd', 'ynnpack_reduce', 'ghost_memory', 'noise',
              'exact_gaussian', 'audit', 'seeds', 'distributed_dp', 'compgd',
              'qdpsgd', 'nonparametric', 'trees', 'bandmf', 'finetune',
              'mixed_precision', 'patch_conv')

# kind -> (its names, the package of its modules, what else the CLI takes)
_KINDS = {'experiment': (NAMES, 'experiments', "(or 'all')"),
          'benchmark': (BENCHMARKS, 'experiments.bench', "(or 'all', 'list')")}


class BenchmarkInfo(NamedTuple):
  description: str  # the first line of the module's docstring
  quick: tuple[str, ...]  # its QUICK string, split into arguments


def _check(kind: str, name: str) -> None:
  names, _, other = _KINDS[kind]
  if name not in names:
    raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(names)} "
                     f'{other}')


def _import(kind: str, name: str) -> ModuleType:
  """The module of the ``kind`` called ``name``, imported now."""
  _check(kind, name)
  return importlib.import_module(f'{_KINDS[kind][1]}.{name}')


def module(name: str) -> ModuleType:
  """The experiment's package called ``name`` (one of ``NAMES``)."""
  return _import('experiment', name)


def get(name: str):
  """The ``runner.Experiment`` called ``name``."""
  return module(name).EXPERIMENT


def benchmark(name: str) -> ModuleType:
  """The benchmark's module called ``name`` (one of ``BENCHMARKS``; importing
  it may import JAX)."""
  return _import('benchmark', name)


def benchmark_info(name: str) -> BenchmarkInfo:
  """The benchmark's description and quick arguments, from its source
  (importing it may import JAX)."""
  _check('benchmark', name)
  path = os.path.join(os.path.dirname(__file__), 'bench', f'{name}.py')
  with open(path) as f:
    tree = ast.parse(f.read())
  quick = next(ast.literal_eval(node.value) for node in tree.body
               if isinstance(node, ast.Assign)
               and [getattr(t, 'id', None) for t in node.targets] == ['QUICK'])
  return BenchmarkInfo(ast.get_docstring(tree).splitlines()[0],
                       tuple(quick.split()))


def __getattr__(attr: str):
  if attr == 'EXPERIMENTS':  # every experiment, imported now, in NAMES order
    return {name: get(name) for name in NAMES}
  raise AttributeError(f'module {__name__!r} has no attribute {attr!r}')
