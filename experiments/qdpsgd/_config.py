"""qdpsgd's settings (field defaults are the quick preset)."""

import dataclasses
import math
from typing import Any

from experiments.common import config
from experiments.common import data as data_lib

NAME = 'qdpsgd'
DESCRIPTION = ('decentralized DP-SGD on a gossip graph: Q-DPSGD-1/2 vs DSGD '
               'and SDM, loss vs rounds and vs simulated time (Figs. 1-3)')
ALGORITHMS = ('qdpsgd1', 'qdpsgd2', 'sdm', 'dsgd')
LABELS = {'qdpsgd1': 'Q-DPSGD-1', 'qdpsgd2': 'Q-DPSGD-2', 'sdm': 'SDM',
          'dsgd': 'DSGD'}
# 'synthetic' at the paper's scale: 12,500 records (10,000 for training,
# m = 1,000 per agent at 10 agents), 64 features, 10 classes.
SYNTHETIC = dict(n_samples=12500, n_features=64, n_classes=10)
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: synthetic data, 10 agents, B = 20, 100 rounds, 3 seeds; full:
  digits, 10/20/50 agents, B in {20, 50}, 500 rounds, 10 seeds."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      dataset='digits', agents=(10, 20, 50), batch_sizes=(20, 50),
      rounds=500, num_seeds=10)}

  num_seeds: int = setting(3, 'seeds, trained as one vmapped program', ge=1)
  dataset: str = setting('synthetic', 'a classification dataset (see list)')
  allow_fallback: bool = setting(
      False, 'run digits when a tfds set is not prepared (the report says '
      'so)')
  agents: tuple[int, ...] = setting((10,), 'numbers of agents n', ge=2)
  batch_sizes: tuple[int, ...] = setting((20,), 'expected batch sizes B',
                                         ge=1)
  epsilons: tuple[float, ...] = setting((1.0, 1.5), 'target epsilons', gt=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  rounds: int = setting(100, 'iterations T', ge=1)
  edge_probability: float = setting(0.4, 'edge probability p_c of the '
                                    'Erdos-Renyi graph', gt=0, le=1)
  hidden: int = setting(50, 'sigmoid hidden units', ge=1)
  clip_norm: float = setting(0.5, 'per-example clip norm K', gt=0)
  bits: int = setting(3, 'quantizer bits s', ge=1, le=31)
  eta: float = setting(0.1, 'quantizer step eta', gt=0)
  sdm_rate: float = setting(0.3, 'SDM sparsification rate c', gt=0, le=1)
  theta: float = setting(0.6, 'SDM theta', gt=0, le=1)
  comm_time: float = setting(3.0, 'communication time T_c', gt=0)
  baseline_learning_rate: float = setting(0.2, 'DSGD and SDM step size',
                                          gt=0)
  learning_rate_scale: float = setting(0.3, 'Q-DPSGD alpha = scale / '
                                       'T^(1/6)', gt=0)
  mixing_rate_scale: float = setting(11.0, 'Q-DPSGD mixing rate = scale / '
                                     'T^(1/2)', gt=0)
  train_records: int = setting(10000, 'training records shared out to the '
                               'agents', ge=2)
  amplified: bool = setting(True, 'account for sampling without replacement '
                            'from each agent\'s records')
  evals: int = setting(10, 'epsilon evaluations per run', ge=1)
  data_options: dict | None = setting(
      None, 'options of the synthetic set (none: 12,500 records, 64 '
      'features, 10 classes)')

  def normalize(self) -> dict[str, Any]:
    if self.data_options is None:
      return dict(data_options=dict(SYNTHETIC))
    return {}

  def validate(self) -> None:
    data_lib.require_classification(NAME, self.dataset)


def step_sizes(cfg: Config) -> tuple[float, float]:
  """(alpha, mixing rate) of Q-DPSGD: (0.3 / T^(1/6), 11 / T^(1/2))."""
  t = cfg.rounds
  return (cfg.learning_rate_scale / t**(1 / 6),
          cfg.mixing_rate_scale / math.sqrt(t))
