"""cpsgd_dme's configuration: modes, defaults and their validation."""

from typing import Any

from dpjax import accounting
from experiments.common import config as config_lib


NAME = 'cpsgd_dme'
DESCRIPTION = ('cpSGD mean estimation: MSE vs bits per coordinate, with and '
               'without rotation, vs the Gaussian baseline (Thm. 3-4)')
MODES = {
    'quick': dict(num_clients=100, dimension=256, epsilons=[1.0],
                  num_trials=[], variants=['none', 'rotate', 'clamp'],
                  clamp_levels=[16], num_seeds=5, reps=8),
    'full': dict(num_clients=1000, dimension=1024, epsilons=[1.0, 4.0],
                 num_trials=[1, 16], variants=['none', 'rotate', 'clamp'],
                 clamp_levels=None, num_seeds=10, reps=8),
}
# Claim thresholds, fixed in the configuration, not from the results.
# match_tolerance: "measured MSE within this relative distance of the exact
# expected MSE at every point". One round's squared error has a relative
# spread of about sqrt(2 / d) (9% at d = 256), so a seed's mean of 8 rounds
# is within about 3% and the largest of ~24 deviations near 7%, varying by
# a few % between seeds; with fewer rounds the 99% (Bonferroni) interval of
# 5 seeds reaches past 15%. gaussian_tolerance: "cpSGD matches the
# Gaussian" means its MSE is at most (1 + this) times the Gaussian's.
DEFAULTS = dict(seed=0, delta=1e-5, clip_norm=1.0, p=0.5,
                levels=[2, 4, 8, 16, 32], inputs=['spread', 'spiky'],
                spikes=2, accountant='pld', match_tolerance=0.15,
                gaussian_tolerance=0.1)
VARIANTS = ('none', 'rotate', 'clamp')
INPUTS = ('spread', 'spiky')
LABELS = {'none': 'no rotation, X_max = D', 'rotate': 'rotation',
          'clamp': 'no rotation, small X_max'}
CONDITION_FAILS = 'n/a: Theorem 1 condition fails'


def config(mode: str, epsilons=None, delta=None, dataset=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration.

  ``epsilons``: target per-round epsilons (each gives an m per k and
  variant, and a Gaussian baseline); ``delta``: the delta of the accounting
  and of the rotated X_max. Seeds ``seed`` .. ``seed + num_seeds - 1`` each
  generate their own client vectors and protocol keys, and run ``reps``
  rounds per point: the first half choose the setting of the
  best-over-settings claim (validation), the second half measure it (test).
  The client vectors are generated (see ``inputs``), so ``dataset`` is
  refused.
  """
  cfg = config_lib.from_mode(
      NAME, mode, MODES, DEFAULTS, epsilons=epsilons, delta=delta,
      dataset=dataset, no_dataset='generates its client vectors (spread and '
      'spiky unit vectors)', **overrides)
  _check(cfg)
  return cfg


def _int_list(cfg, name, minimum, allow_empty=False):
  values = cfg[name]
  if (not isinstance(values, (list, tuple)) or (not values and not allow_empty)
      or any(not isinstance(v, int) or isinstance(v, bool) or v < minimum
             for v in values)):
    raise ValueError(f'Expected {name}={values} to be a list of integers >= '
                     f'{minimum}.')


def _check(cfg: dict[str, Any]) -> None:
  for name, minimum in (('seed', 0), ('num_clients', 1), ('dimension', 1),
                        ('num_seeds', 1), ('reps', 2), ('spikes', 1)):
    v = cfg[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
      raise ValueError(f'Expected {name}={v} to be an integer >= {minimum}.')
  if cfg['spikes'] > cfg['dimension']:
    raise ValueError(f"Expected spikes={cfg['spikes']} <= dimension="
                     f"{cfg['dimension']}.")
  if not 0 < cfg['delta'] < 1:
    raise ValueError(f"Expected delta={cfg['delta']} in (0, 1).")
  if not 0 < cfg['p'] < 1:
    raise ValueError(f"Expected p={cfg['p']} in (0, 1).")
  for name in ('match_tolerance', 'gaussian_tolerance'):
    if not 0 < cfg[name] < 1:
      raise ValueError(f'Expected {name}={cfg[name]} in (0, 1).')
  if not cfg['clip_norm'] > 0:
    raise ValueError(f"Expected clip_norm={cfg['clip_norm']} > 0.")
  if any(not e > 0 for e in cfg['epsilons']):
    raise ValueError(f"Expected epsilons={cfg['epsilons']} to be > 0.")
  if not cfg['epsilons'] and not cfg['num_trials']:
    raise ValueError('Expected at least one target epsilon or num_trials.')
  _int_list(cfg, 'levels', 2)
  if cfg['clamp_levels'] is not None:
    _int_list(cfg, 'clamp_levels', 2)
  _int_list(cfg, 'num_trials', 1, allow_empty=True)
  for name, known in (('variants', VARIANTS), ('inputs', INPUTS)):
    if not cfg[name] or any(v not in known for v in cfg[name]):
      raise ValueError(f'Expected {name}={cfg[name]} to be a non-empty '
                       f'subset of {known}.')
  if cfg['accountant'] not in accounting.ACCOUNTANTS:
    raise ValueError(f"Expected accountant={cfg['accountant']!r} to be one "
                     f'of {accounting.ACCOUNTANTS}.')
