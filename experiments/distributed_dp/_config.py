"""distributed_dp's settings (field defaults are the quick preset)."""

import dataclasses

from experiments.common import config
from experiments.common import data as data_lib

NAME = 'distributed_dp'
DESCRIPTION = ('distributed DP mean estimation: DDG and Skellam vs cpSGD and '
               'the central Gaussian, MSE vs bits per coordinate at matched '
               'epsilon')
MECHANISMS = ('ddg', 'skellam')
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: n = 20 clients, d = 256, b in {12, 16}, 16 rounds, 5 seeds, no
  training; full: n = 1000, d = 4096, b from 12 to 20, 8 rounds, 10 seeds,
  federated training on. Every seed generates its own client vectors (unit
  vectors in random directions, the papers' DME setting) and protocol keys,
  so there is no dataset setting (training has ``train_dataset``).
  Neighbours: replace one client, for every mechanism."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      num_clients=1000, dimension=4096, bits=(12, 14, 16, 18, 20),
      num_seeds=10, num_repetitions=8, training=True)}

  num_seeds: int = setting(5, 'seeds (own vectors and protocol keys)', ge=1)
  num_clients: int = setting(20, 'clients n', ge=1)
  dimension: int = setting(256, 'dimension d', ge=1)
  bits: tuple[int, ...] = setting((12, 16), 'bits b per coordinate of the '
                                  'messages and the modular sum', ge=2, le=32)
  num_repetitions: int = setting(16, 'rounds per seed and point', ge=1)
  epsilons: tuple[float, ...] = setting((1.0,), 'target epsilons of one '
                                        'release', gt=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  l2_norm_clip: float = setting(1.0, 'client vector L2 clip bound c', gt=0)
  levels: tuple[int, ...] = setting((2, 4, 8, 16, 32, 64), 'cpSGD '
                                    'quantization levels k to choose from',
                                    ge=2)
  p: float = setting(0.5, 'cpSGD Binomial success probability', gt=0, lt=1)
  # Claim thresholds, fixed in the configuration before any run.
  # gaussian_tolerance: "close to the central Gaussian" means MSE at most
  # (1 + this) times the Gaussian's. The Gaussian is calibrated by the PLD
  # accountant (tight) while DDG and Skellam are known by RDP bounds only;
  # at epsilon = 1, delta = 1e-5 the RDP conversion alone asks for about 9%
  # more noise stddev (about 18% more variance), so the tolerance is 0.3.
  gaussian_tolerance: float = setting(
      0.3, 'close to the Gaussian: MSE at most (1 + this) times it', gt=0)
  # close_bits: the claim "close to the Gaussian" is made at these bits and
  # above; below, the grid gamma is coarse enough that rounding adds
  # visible error (the papers' figures show the same knee).
  close_bits: int = setting(16, 'fewest bits of the close-to-Gaussian '
                            'claims', ge=2)
  # k_stddevs: k standard deviations of the aggregate fill the modulus, the
  # same k for both mechanisms so that they are compared at the same
  # wrap-around probability (about P(|Z| > k) per coordinate). The
  # reference code's defaults are 4 (DDG) and 3 (Skellam); at k = 3 about
  # P(|Z| > 3) d' = 0.7 coordinates would wrap per round at d' = 256.
  k_stddevs: float = setting(4.0, 'stddevs of the aggregate in the modulus',
                             gt=0)
  # A round with more wrapped coordinates is flagged and counted (its error
  # stays in the MSE: the server cannot see wrap-around).
  max_wraparound_rate: float = setting(
      1e-3, 'wrap-around rate above which a round is flagged', ge=0, le=1)
  # Federated training (the train_ settings): train_epsilon is the total
  # epsilon of the whole run (at ``delta``), fixed before any training run;
  # clip, learning rate and momentum are cpsgd_training's (picked there on
  # a validation split with a Gaussian run); train_tolerance: "close to the
  # Gaussian" means within this much test accuracy (cpsgd_training's 0.05).
  training: bool = setting(False, 'also train a classifier federated')
  train_dataset: str = setting('digits', 'training: a classification '
                               'dataset (see list)')
  allow_fallback: bool = setting(
      False, 'training: run digits when a tfds set is not prepared')
  train_model: str = setting('logistic', 'training: model',
                             choices=('logistic', 'mlp'))
  train_num_clients: int = setting(20, 'training: clients', ge=1)
  train_clients_per_round: int | None = setting(
      None, 'training: clients per round (none: all)', ge=1)
  train_rounds: int = setting(60, 'training: rounds', ge=1)
  train_num_seeds: int = setting(3, 'training: seeds, from seed', ge=1)
  train_bits: tuple[int, ...] = setting((12, 16, 20), 'training: bits b',
                                        ge=2, le=32)
  train_epsilon: float = setting(10.0, 'training: total epsilon of the run',
                                 gt=0)
  train_l2_norm_clip: float = setting(
      0.25, 'training: client L2 clip bound D', gt=0)
  train_learning_rate: float = setting(0.5, 'training: server learning rate',
                                       gt=0)
  train_momentum: float = setting(0.9, 'training: server momentum', ge=0,
                                  lt=1)
  train_tolerance: float = setting(
      0.05, 'training: close to the Gaussian within this test accuracy',
      gt=0)

  def normalize(self):
    return dict(epsilons=tuple(sorted(set(self.epsilons))))

  def validate(self):
    try:
      data_lib.require_classification(NAME, self.train_dataset)
    except ValueError as e:
      raise ValueError(f'train_dataset: {e}') from None
    n = self.train_clients_per_round
    if n is not None and n > self.train_num_clients:
      raise ValueError(f'Expected train_clients_per_round={n} <= '
                       f'train_num_clients={self.train_num_clients}.')
