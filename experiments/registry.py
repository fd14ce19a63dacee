"""The registered experiments, by name (``python -m experiments list``).

``get(name)`` returns the experiment's ``runner.Experiment`` (the module's
``EXPERIMENT``; see experiments/common/runner.py and docs/experiments.md).
Modules not yet converted to it define ``NAME``, ``DESCRIPTION``, ``MODES``,
``config(mode, **overrides) -> dict``, ``run(config, out_dir, progress) ->
results`` and ``report(results, out_dir) -> markdown``; ``get`` wraps them in
``Unconverted``, which offers the same methods the command line uses.

Modules are imported on first use (``get``, or the ``EXPERIMENTS`` mapping),
so that the CLI answers ``--help`` without importing JAX.
"""

import importlib
import json
from types import ModuleType
from typing import Any

NAMES = ('dpsgd_baseline', 'rs_tradeoff', 'rs_privacy', 'rs_attack',
         'compressive_regression', 'cpsgd_mechanisms', 'cpsgd_dme',
         'cpsgd_training', 'distributed_dp', 'qdpsgd', 'compgd',
         'nonparametric', 'trees', 'audit')


class Unconverted:
  """A dict-configured experiment module behind ``runner.Experiment``'s
  methods (until it is converted)."""
  config = None  # no Config class: flags come from the shared parser

  def __init__(self, module: ModuleType):
    self.module = module
    self.name, self.description = module.NAME, module.DESCRIPTION
    self.modes = tuple(module.MODES)

  def configure(self, mode: str = 'quick', **overrides: Any) -> dict:
    """``module.config``; the flags some experiments lack are passed only
    when given, and refused, naming the flag, where they do not apply."""
    given = {k: v for k, v in overrides.items()
             if v is not None
             or k not in ('accountant', 'allow_fallback', 'devices')}
    if given.get('accountant') is not None and 'accountant' not in (
        self.module.config(mode)):
      raise ValueError(f'{self.name} has no accountant setting (it reports '
                       'the accountants it uses); drop --accountant')
    if given.get('devices') is not None:
      raise ValueError(f'{self.name} has no devices setting (it does not run '
                       'data-parallel DP-SGD); drop --devices')
    return self.module.config(mode, **given)

  def stored_config(self, cfg: dict) -> dict:
    return json.loads(json.dumps(cfg, sort_keys=True, default=str))

  def results(self, cfg: dict, out_dir: str, progress: bool = True) -> dict:
    return self.module.run(cfg, out_dir, progress=progress)

  def report(self, results: dict, out_dir: str) -> str:
    return self.module.report(results, out_dir)


def module(name: str) -> ModuleType:
  """The experiment's module (package) called ``name`` (one of ``NAMES``)."""
  if name not in NAMES:
    raise ValueError(f"unknown experiment {name!r}; known: "
                     f"{', '.join(NAMES)} (or 'all')")
  return importlib.import_module(f'experiments.{name}')


def get(name: str):
  """The experiment called ``name``: a ``runner.Experiment`` or, for a
  module not yet converted, an ``Unconverted`` with the same methods."""
  mod = module(name)
  exp = getattr(mod, 'EXPERIMENT', None)
  if exp is None:
    exp = mod.__dict__.setdefault('_UNCONVERTED', Unconverted(mod))
  return exp


def __getattr__(attr: str):
  if attr == 'EXPERIMENTS':  # every experiment, imported now, in NAMES order
    return {name: get(name) for name in NAMES}
  raise AttributeError(f'module {__name__!r} has no attribute {attr!r}')
