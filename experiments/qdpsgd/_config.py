"""qdpsgd's configuration: modes, defaults and their validation."""

import math
import numbers
from typing import Any

from experiments.common import data as data_lib

NAME = 'qdpsgd'
DESCRIPTION = ('decentralized DP-SGD on a gossip graph: Q-DPSGD-1/2 vs DSGD '
               'and SDM, loss vs rounds and vs simulated time (Figs. 1-3)')
MODES = {
    'quick': dict(dataset='synthetic', agents=[10], batch_sizes=[20],
                  epsilons=[1.0, 1.5], rounds=100, num_seeds=3),
    'full': dict(dataset='digits', agents=[10, 20, 50], batch_sizes=[20, 50],
                 epsilons=[1.0, 1.5], rounds=500, num_seeds=10),
}
DEFAULTS = dict(
    seed=0, delta=1e-5, edge_probability=0.4, hidden=50, clip_norm=0.5,
    bits=3, eta=0.1, sdm_rate=0.3, theta=0.6, comm_time=3.0,
    baseline_learning_rate=0.2, learning_rate_scale=0.3, mixing_rate_scale=11.0,
    train_records=10000, amplified=True, evals=10,
    # 'synthetic' at the paper's scale: 12,500 records (10,000 for training,
    # m = 1,000 per agent at 10 agents), 64 features, 10 classes.
    data_options=dict(n_samples=12500, n_features=64, n_classes=10))
ALGORITHMS = ('qdpsgd1', 'qdpsgd2', 'sdm', 'dsgd')
LABELS = {'qdpsgd1': 'Q-DPSGD-1', 'qdpsgd2': 'Q-DPSGD-2', 'sdm': 'SDM',
          'dsgd': 'DSGD'}


def _is_int(v, minimum):
  return (isinstance(v, numbers.Integral) and not isinstance(v, bool)
          and v >= minimum)


def _is_pos(v):
  return (isinstance(v, numbers.Real) and not isinstance(v, bool)
          and 0 < v < math.inf)


def config(mode: str, epsilons=None, **overrides) -> dict[str, Any]:
  """The exact configuration; raises ValueError for what it cannot honour."""
  if mode not in MODES:
    raise ValueError(f'Expected mode={mode!r} in {tuple(MODES)}.')
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  unknown = sorted(set(overrides) - set(cfg))
  if unknown:
    raise ValueError(f'{NAME}: unknown option(s) {", ".join(unknown)}')
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  if epsilons is not None:
    cfg['epsilons'] = list(epsilons)
  _check(cfg)
  return cfg


def _check(cfg: dict[str, Any]) -> None:
  data_lib.require_classification(NAME, cfg['dataset'])
  for name, minimum in (('rounds', 1), ('num_seeds', 1), ('seed', 0),
                        ('hidden', 1), ('train_records', 2), ('evals', 1)):
    if not _is_int(cfg[name], minimum):
      raise ValueError(f'Expected {name}={cfg[name]!r} to be an integer >= '
                       f'{minimum}.')
  if not _is_int(cfg['bits'], 1) or cfg['bits'] > 31:
    raise ValueError(f"Expected bits={cfg['bits']!r} in [1, 31].")
  for name in ('agents', 'batch_sizes', 'epsilons'):
    if not isinstance(cfg[name], (list, tuple)) or not cfg[name]:
      raise ValueError(f'Expected {name}={cfg[name]!r} to be a non-empty list.')
  for n in cfg['agents']:
    if not _is_int(n, 2):
      raise ValueError(f'Expected num_agents={n!r} to be an integer >= 2.')
  for b in cfg['batch_sizes']:
    if not _is_pos(b):
      raise ValueError(f'Expected batch size B={b!r} > 0.')
  for e in cfg['epsilons']:
    if not _is_pos(e):
      raise ValueError(f'Expected epsilon={e!r} > 0.')
  for name in ('clip_norm', 'eta', 'comm_time', 'baseline_learning_rate',
               'learning_rate_scale', 'mixing_rate_scale'):
    if not _is_pos(cfg[name]):
      raise ValueError(f'Expected {name}={cfg[name]!r} > 0 and finite.')
  for name in ('edge_probability', 'sdm_rate', 'theta'):
    v = cfg[name]
    if not (isinstance(v, numbers.Real) and 0 < v <= 1):
      raise ValueError(f'Expected {name}={v!r} in (0, 1].')
  if not (isinstance(cfg['delta'], numbers.Real) and 0 < cfg['delta'] < 1):
    raise ValueError(f"Expected delta={cfg['delta']!r} in (0, 1).")
  if not isinstance(cfg['amplified'], bool):
    raise ValueError(f"Expected amplified={cfg['amplified']!r} to be a bool.")


def step_sizes(cfg: dict[str, Any]) -> tuple[float, float]:
  """(alpha, mixing rate) of Q-DPSGD: (0.3 / T^(1/6), 11 / T^(1/2))."""
  t = cfg['rounds']
  return (cfg['learning_rate_scale'] / t**(1 / 6),
          cfg['mixing_rate_scale'] / math.sqrt(t))
