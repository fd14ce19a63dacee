"""cpsgd_training's configuration: modes, defaults and their validation."""

import math
import numbers
from typing import Any

from dpjax import distributed as dist
from experiments.common import data as data_lib


NAME = 'cpsgd_training'
DESCRIPTION = ('distributed DP SGD: cpSGD (k levels + Bin(m)) vs Gaussian at '
               'matched per-round epsilon, accuracy vs bits (Fig. 2)')
MODES = {
    'quick': dict(dataset='digits', rounds=60, levels=[2, 4, 16],
                  trials=[32, 128, 512], unrotated=[[16, 128]], num_seeds=5),
    'full': dict(dataset='digits', rounds=200, levels=[2, 4, 16],
                 trials=[32, 128, 512, 2048], unrotated=[[2, 512], [16, 512]],
                 num_seeds=10),
}
DEFAULTS = dict(seed=0, delta=1e-5, num_clients=100, clients_per_round=None,
                clip_norm=0.25, learning_rate=0.5, momentum=0.9, p=0.5,
                model='logistic', evals=20)
GAUSSIAN_BITS = dist.gaussian_protocol_bits(1)  # float32: bits per coordinate


def _is_int(v, minimum):
  return (isinstance(v, numbers.Integral) and not isinstance(v, bool)
          and v >= minimum)


def _is_pos(v):
  return (isinstance(v, numbers.Real) and not isinstance(v, bool)
          and 0 < v < math.inf)


def config(mode: str, epsilons=None, **overrides) -> dict[str, Any]:
  """The exact configuration; epsilon follows from (k, m), it is not a knob.

  ``delta`` is the target delta of the whole run (per round: delta / (2
  rounds)); ``seed`` is the first seed; ``dataset`` must be a classification
  set. Raises ValueError for anything this experiment cannot honour.
  """
  if epsilons is not None:
    raise ValueError(f'{NAME} sets epsilon through (k, m) (Theorem 1), not '
                     'by target; drop --epsilons')
  if mode not in MODES:
    raise ValueError(f'Expected mode={mode!r} in {tuple(MODES)}.')
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  unknown = sorted(set(overrides) - set(cfg))
  if unknown:
    raise ValueError(f'{NAME}: unknown option(s) {", ".join(unknown)}')
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  _check(cfg)
  return cfg


def _check(cfg: dict[str, Any]) -> None:
  data_lib.require_classification(NAME, cfg['dataset'])
  for name, minimum in (('rounds', 1), ('num_clients', 1), ('num_seeds', 1),
                        ('seed', 0), ('evals', 1)):
    if not _is_int(cfg[name], minimum):
      raise ValueError(f'Expected {name}={cfg[name]!r} to be an integer >= '
                       f'{minimum}.')
  n = cfg['clients_per_round']
  if n is not None and not (_is_int(n, 1) and n <= cfg['num_clients']):
    raise ValueError(f"Expected clients_per_round={n!r} to be an integer in "
                     f"[1, num_clients={cfg['num_clients']}].")
  for name in ('clip_norm', 'learning_rate'):
    if not _is_pos(cfg[name]):
      raise ValueError(f'Expected {name}={cfg[name]!r} > 0 and finite.')
  if not (isinstance(cfg['momentum'], numbers.Real)
          and 0 <= cfg['momentum'] < 1):
    raise ValueError(f"Expected momentum={cfg['momentum']!r} in [0, 1).")
  for name in ('delta', 'p'):
    if not (isinstance(cfg[name], numbers.Real) and 0 < cfg[name] < 1):
      raise ValueError(f'Expected {name}={cfg[name]!r} in (0, 1).')
  if cfg['model'] not in ('logistic', 'mlp'):
    raise ValueError(f"Expected model={cfg['model']!r} in (logistic, mlp).")
  pairs = [[k, m] for k in _as_list(cfg, 'levels')
           for m in _as_list(cfg, 'trials')]
  unrotated = cfg['unrotated']
  if not isinstance(unrotated, (list, tuple)) or not all(
      isinstance(u, (list, tuple)) and len(u) == 2 for u in unrotated):
    raise ValueError(f'Expected unrotated={unrotated!r} to be a list of '
                     '[k, m] pairs.')
  for k, m in pairs + [list(u) for u in unrotated]:
    if not _is_int(k, 2):
      raise ValueError(f'Expected levels k={k!r} to be an integer >= 2.')
    if not _is_int(m, 1):
      raise ValueError(f'Expected trials m={m!r} to be an integer >= 1.')
  n = cfg['clients_per_round'] or cfg['num_clients']
  biggest = max(k + m - 1 for k, m in pairs + [list(u) for u in unrotated])
  if n * biggest >= 2**31:
    raise ValueError(f'clients_per_round * (k - 1 + m) = {n * biggest} must '
                     'be < 2^31 (int32 sum of the messages)')


def _as_list(cfg, name):
  v = cfg[name]
  if not isinstance(v, (list, tuple)) or not v:
    raise ValueError(f'Expected {name}={v!r} to be a non-empty list.')
  return list(v)
