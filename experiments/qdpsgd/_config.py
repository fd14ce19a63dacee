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
  """Quick: MNIST-5k (3,500 training digits), 10 agents, B = 20, T = 130,
  3 seeds, the paper's eps 1.5 only (with ghost clipping a row of the
  paper's 39,760-parameter network costs 5-15 s on 2 CPU cores, Q-DPSGD-2's
  exact discrete Gaussian noise about 80 s); full:
  T = 1000, 10 seeds, 10/20/50 agents, B in {20, 50}, eps 1 and 1.5,
  Q-DPSGD-2 at 8 bits, every algorithm swept to eps 1024 and the paper's
  calibration of Q-DPSGD-2."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      num_seeds=10, epsilons=(1.0, 1.5), more_bits=(8,),
      num_agents=(10, 20, 50), expected_batch_sizes=(20, 50), rounds=1000,
      sweep_epsilons=(4.0, 16.0, 64.0, 256.0, 1024.0),
      sweep_algorithms=('qdpsgd1', 'qdpsgd2', 'sdm'),
      paper_calibration=('qdpsgd1', 'qdpsgd2'))}

  num_seeds: int = setting(3, 'seeds, trained as one vmapped program', ge=2)
  dataset: str = setting('mnist5k', 'a classification dataset (see list)')
  allow_fallback: bool = setting(
      False, 'run digits when a tfds set is not prepared (the report says '
      'so)')
  num_agents: tuple[int, ...] = setting((10,), 'numbers of agents n',
                                        ge=2)
  expected_batch_sizes: tuple[int, ...] = setting(
      (20,), 'expected batch sizes B', ge=1)
  epsilons: tuple[float, ...] = setting(
      (1.5,), "the paper's target epsilons: sound rows, the paper's "
      'calibration beside them and the claims', gt=0)
  sweep_epsilons: tuple[float, ...] = setting(
      (), 'more target epsilons, sound only: where each '
      'swept algorithm starts to learn', gt=0, min_len=0)
  sweep_algorithms: tuple[str, ...] = setting(
      ('qdpsgd1', 'sdm'), 'the algorithms run at sweep_epsilons (Q-DPSGD-2 '
      'compiles once per sigma)', choices=('qdpsgd1', 'qdpsgd2', 'sdm'),
      min_len=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  rounds: int = setting(130, 'iterations T (the mixing rate 11 / sqrt(T) '
                        'must be at most 1)', ge=1)
  edge_probability: float = setting(0.4, 'edge probability p_c of the '
                                    'Erdos-Renyi graph', gt=0, le=1)
  hidden: int = setting(50, 'sigmoid hidden units', ge=1)
  l2_norm_clip: float = setting(0.5, 'per-example clip norm K', gt=0)
  clip_method: str = setting(
      'ghost', "per-example clipping: 'ghost' (no per-example gradients; the "
      "same clipped mean, about 3x faster on this network) or 'vmap'",
      choices=('ghost', 'vmap'))
  bits: int = setting(3, 'quantizer bits s', ge=1, le=31)
  eta: float = setting(0.1, 'quantizer step eta', gt=0)
  more_bits: tuple[int, ...] = setting(
      (), 'Q-DPSGD-2 also at these bits (at the largest paper epsilon '
      'and in the sweep), eta scaled by 2^(bits - s) to keep the range',
      ge=1, le=31, min_len=0)
  paper_calibration: tuple[str, ...] = setting(
      ('qdpsgd1',), "run these at the paper's Thm. 1 / 5 sigma for each "
      'paper epsilon too (rows labelled unsound)',
      choices=('qdpsgd1', 'qdpsgd2'), min_len=0)
  sdm_rate: float = setting(0.3, 'SDM sparsification rate c', gt=0, le=1)
  theta: float = setting(0.6, 'SDM theta', gt=0, le=1)
  comm_time: float = setting(3.0, 'communication time T_c', gt=0)
  baseline_learning_rate: float = setting(0.2, 'DSGD and SDM step size',
                                          gt=0)
  learning_rate_scale: float = setting(0.3, 'Q-DPSGD alpha = scale / '
                                       'T^(1/6)', gt=0)
  mixing_rate_scale: float = setting(11.0, 'Q-DPSGD mixing rate = scale / '
                                     'T^(1/2)', gt=0)
  num_train_examples: int = setting(
      10000, 'training examples shared out to the agents (at most the '
      'training split)', ge=2)
  amplified: bool = setting(True, 'account for sampling without replacement '
                            'from each agent\'s records')
  num_evals: int = setting(30, 'evaluations of loss and accuracy per run '
                           '(the last after round T)', ge=1)
  data_options: dict | None = setting(
      None, 'options of the synthetic set (none: 12,500 records, 64 '
      'features, 10 classes)')

  def normalize(self) -> dict[str, Any]:
    out = dict(
        epsilons=tuple(sorted(set(self.epsilons))),
        sweep_epsilons=tuple(sorted(set(self.sweep_epsilons)
                                    - set(self.epsilons))),
        more_bits=tuple(sorted(set(self.more_bits) - {self.bits})),
        sweep_algorithms=tuple(a for a in ('qdpsgd1', 'qdpsgd2', 'sdm')
                               if a in self.sweep_algorithms),
        paper_calibration=tuple(a for a in ('qdpsgd1', 'qdpsgd2')
                                if a in self.paper_calibration))
    if self.data_options is None and self.dataset == 'synthetic':
      out['data_options'] = dict(SYNTHETIC)
    return out

  def validate(self) -> None:
    data_lib.require_classification(NAME, self.dataset)
    if self.mixing_rate_scale / math.sqrt(self.rounds) > 1:
      raise ValueError(
          f'{NAME}: the mixing rate mixing_rate_scale / sqrt(rounds) = '
          f'{self.mixing_rate_scale / math.sqrt(self.rounds):.3g} exceeds 1 '
          '(Alg. 1 then extrapolates past the neighbours\' average); raise '
          f'rounds to at least {math.ceil(self.mixing_rate_scale**2)} or '
          'lower mixing_rate_scale')
    if self.num_evals > self.rounds:
      raise ValueError(f'{NAME}: num_evals={self.num_evals} exceeds '
                       f'rounds={self.rounds}')


def step_sizes(cfg: Config) -> tuple[float, float]:
  """(alpha, mixing rate) of Q-DPSGD: (0.3 / T^(1/6), 11 / T^(1/2))."""
  t = cfg.rounds
  return (cfg.learning_rate_scale / t**(1 / 6),
          cfg.mixing_rate_scale / math.sqrt(t))


def eta_at(cfg: Config, bits: int) -> float:
  """The quantizer step at ``bits``: the range eta 2^(s-1) of ``cfg.bits``."""
  return cfg.eta * 2.0**(cfg.bits - bits)
