"""distributed_dp's configuration: modes, defaults and their validation."""

from typing import Any

from experiments.common import config as config_lib
from experiments.common import data as data_lib

NAME = 'distributed_dp'
DESCRIPTION = ('distributed DP mean estimation: DDG and Skellam vs cpSGD and '
               'the central Gaussian, MSE vs bits per coordinate at matched '
               'epsilon')
MECHANISMS = ('ddg', 'skellam')
MODES = {
    'quick': dict(num_clients=20, dimension=256, bits=[12, 16],
                  num_seeds=5, reps=16, training=False),
    'full': dict(num_clients=1000, dimension=4096,
                 bits=[12, 14, 16, 18, 20], num_seeds=10, reps=8,
                 training=True),
}
# Claim thresholds, fixed in the configuration before any run.
# gaussian_tolerance: "close to the central Gaussian" means MSE at most
# (1 + this) times the Gaussian's. The Gaussian is calibrated by the PLD
# accountant (tight) while DDG and Skellam are known by RDP bounds only; at
# epsilon = 1, delta = 1e-5 the RDP conversion alone asks for about 9% more
# noise stddev (about 18% more variance), so the tolerance is 0.3.
# close_bits: the claim "close to the Gaussian" is made at these bits and
# above; below, the grid gamma is coarse enough that rounding adds visible
# error (the papers' figures show the same knee).
# k_stddevs: k standard deviations of the aggregate fill the modulus, the
# same k for both mechanisms so that they are compared at the same
# wrap-around probability (about P(|Z| > k) per coordinate). The reference
# code's defaults are 4 (DDG) and 3 (Skellam); at k = 3 about
# P(|Z| > 3) d' = 0.7 coordinates would wrap per round at d' = 256.
# max_wraparound_rate: a round with more wrapped coordinates is flagged and
# counted (its error stays in the MSE: the server cannot see wrap-around).
# Federated training (``training``; the train_ keys): train_epsilon is the
# total epsilon of the whole run (at ``delta``), fixed before any training
# run; clip, learning rate and momentum are cpsgd_training's (picked there on
# a validation split with a Gaussian run); train_tolerance: "close to the
# Gaussian" means within this much test accuracy (cpsgd_training's 0.05).
DEFAULTS = dict(seed=0, epsilons=[1.0], delta=1e-5, clip_norm=1.0,
                levels=[2, 4, 8, 16, 32, 64], p=0.5, spikes=1,
                inputs=['spread'], gaussian_tolerance=0.3, close_bits=16,
                k_stddevs=4.0,
                max_wraparound_rate=1e-3,
                train_dataset='digits', train_model='logistic',
                train_num_clients=20, train_clients_per_round=None,
                train_rounds=60, train_seeds=3, train_bits=[12, 16, 20],
                train_epsilon=10.0, train_clip_norm=0.25,
                train_learning_rate=0.5, train_momentum=0.9,
                train_tolerance=0.05)


def config(mode: str, epsilons=None, delta=None, dataset=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration.

  ``epsilons``: target epsilons of one release (each a row per bits and
  mechanism); ``delta``: their delta. Every seed generates its own client
  vectors (unit vectors in random directions, the papers' DME setting) and
  protocol keys and runs ``reps`` rounds per point. Neighbours: replace one
  client (the relation cpSGD's Theorem 1 is stated for), for every
  mechanism.
  """
  cfg = config_lib.from_mode(
      NAME, mode, MODES, DEFAULTS, epsilons=epsilons, delta=delta,
      dataset=dataset, no_dataset='generates its client vectors (random unit '
      'vectors)', **overrides)
  _check(cfg)
  return cfg


def _check(cfg: dict[str, Any]) -> None:
  for name, minimum in (('seed', 0), ('num_clients', 1), ('dimension', 1),
                        ('num_seeds', 1), ('reps', 1), ('close_bits', 2)):
    v = cfg[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
      raise ValueError(f'Expected {name}={v} to be an integer >= {minimum}.')
  bits = cfg['bits']
  if (not isinstance(bits, (list, tuple)) or not bits
      or any(not isinstance(b, int) or isinstance(b, bool) or not 2 <= b <= 32
             for b in bits)):
    raise ValueError(f'Expected bits={bits} to be a list of integers in '
                     '[2, 32].')
  if not cfg['epsilons'] or any(not e > 0 for e in cfg['epsilons']):
    raise ValueError(f"Expected epsilons={cfg['epsilons']} to be > 0.")
  if not 0 < cfg['delta'] < 1:
    raise ValueError(f"Expected delta={cfg['delta']} in (0, 1).")
  if not cfg['clip_norm'] > 0:
    raise ValueError(f"Expected clip_norm={cfg['clip_norm']} > 0.")
  if not cfg['k_stddevs'] > 0:
    raise ValueError(f"Expected k_stddevs={cfg['k_stddevs']} > 0.")
  if not 0 < cfg['gaussian_tolerance']:
    raise ValueError(f"Expected gaussian_tolerance="
                     f"{cfg['gaussian_tolerance']} > 0.")
  if not 0 <= cfg['max_wraparound_rate'] <= 1:
    raise ValueError(f"Expected max_wraparound_rate="
                     f"{cfg['max_wraparound_rate']} in [0, 1].")
  _check_training(cfg)


def _check_training(cfg: dict[str, Any]) -> None:
  if not isinstance(cfg['training'], bool):
    raise ValueError(f"Expected training={cfg['training']!r} to be a bool.")
  for name, minimum in (('train_num_clients', 1), ('train_rounds', 1),
                        ('train_seeds', 1)):
    v = cfg[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
      raise ValueError(f'Expected {name}={v!r} to be an integer >= '
                       f'{minimum}.')
  n = cfg['train_clients_per_round']
  if n is not None and (not isinstance(n, int) or isinstance(n, bool)
                        or not 1 <= n <= cfg['train_num_clients']):
    raise ValueError(f"Expected train_clients_per_round={n!r} to be an "
                     f"integer in [1, train_num_clients="
                     f"{cfg['train_num_clients']}].")
  bits = cfg['train_bits']
  if (not isinstance(bits, (list, tuple)) or not bits
      or any(not isinstance(b, int) or isinstance(b, bool) or not 2 <= b <= 32
             for b in bits)):
    raise ValueError(f'Expected train_bits={bits!r} to be a list of integers '
                     'in [2, 32].')
  for name in ('train_epsilon', 'train_clip_norm', 'train_learning_rate',
               'train_tolerance'):
    v = cfg[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
        0 < v < float('inf')):
      raise ValueError(f'Expected {name}={v!r} > 0 and finite.')
  m = cfg['train_momentum']
  if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m < 1:
    raise ValueError(f'Expected train_momentum={m!r} in [0, 1).')
  if cfg['train_model'] not in ('logistic', 'mlp'):
    raise ValueError(f"Expected train_model={cfg['train_model']!r} in "
                     '(logistic, mlp).')
  if cfg['train_dataset'] not in data_lib.DATASETS:
    raise ValueError(f"Expected train_dataset={cfg['train_dataset']!r} to "
                     'be a known dataset.')
