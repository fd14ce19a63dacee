"""cpsgd_mechanisms' configuration: modes, defaults and their validation."""

from typing import Any

from dpjax import accounting
from experiments.common import config as config_lib


NAME = 'cpsgd_mechanisms'
DESCRIPTION = ('error vs epsilon of the Gaussian and Binomial mechanisms at '
               'several scales (cpSGD Fig. 1)')
MODES = {
    'quick': dict(epsilons=[0.25, 0.5, 1.0, 2.0, 4.0],
                  validate_epsilons=[1.0], samples=4000, num_seeds=3),
    'full': dict(epsilons=[0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0,
                           6.0, 8.0],
                 validate_epsilons=[0.5, 1.0, 4.0], samples=20000,
                 num_seeds=10),
}
# match_tolerance: the sampling claim is "the measured error is within this
# relative distance of s^2 N p(1-p) at every sampled point", fixed before
# any run. At 4000 coordinates per seed and point the sampling error of one
# point is about sqrt(2 / 4000) = 2.2%, so a correct sampler leaves the
# largest of 8 deviations near 4%; a sampler off by 10% in variance fails.
DEFAULTS = dict(seed=0, delta=1e-5, p=0.5, scale_denominators=[1, 4, 16, 64],
                dims=[1, 100], accountant='pld', match_tolerance=0.1)


def config(mode: str, epsilons=None, delta=None, dataset=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration.

  ``epsilons`` replaces the target-epsilon sweep, ``delta`` the delta (both
  mechanisms); the sampling check runs seeds ``seed`` .. ``seed +
  num_seeds - 1``, each drawing ``samples`` coordinates per point from its
  own key. There is no dataset: the query is abstract (only its
  sensitivities matter).
  """
  cfg = config_lib.from_mode(
      NAME, mode, MODES, DEFAULTS, epsilons=epsilons, delta=delta,
      dataset=dataset, no_dataset='compares noise distributions on an '
      'abstract query and uses no data', **overrides)
  if epsilons is not None and overrides.get('validate_epsilons') is None:
    cfg['validate_epsilons'] = [e for e in cfg['validate_epsilons']
                                if e in cfg['epsilons']] or [cfg['epsilons'][
                                    len(cfg['epsilons']) // 2]]
  _check(cfg)
  return cfg


def _check(cfg: dict[str, Any]) -> None:
  for name, minimum in (('seed', 0), ('num_seeds', 1)):
    v = cfg[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
      raise ValueError(f'Expected {name}={v} to be an integer >= {minimum}.')
  if not 0 < cfg['match_tolerance'] < 1:
    raise ValueError(f"Expected match_tolerance={cfg['match_tolerance']} in "
                     '(0, 1).')
  if not 0 < cfg['delta'] < 1:
    raise ValueError(f"Expected delta={cfg['delta']} in (0, 1).")
  if not 0 < cfg['p'] < 1:
    raise ValueError(f"Expected p={cfg['p']} in (0, 1).")
  if not cfg['epsilons'] or any(not e > 0 for e in cfg['epsilons']):
    raise ValueError(f"Expected epsilons={cfg['epsilons']} to be > 0.")
  for e in cfg['validate_epsilons']:
    if e not in cfg['epsilons']:
      raise ValueError(f'Expected validate_epsilons entry {e} to be one of '
                       f"epsilons={cfg['epsilons']}.")
  for name in ('scale_denominators', 'dims'):
    if not cfg[name] or any(not isinstance(v, int) or isinstance(v, bool)
                            or v < 1 for v in cfg[name]):
      raise ValueError(f'Expected {name}={cfg[name]} to be a non-empty list '
                       'of integers >= 1 (scales are s = 1/j).')
  if not (isinstance(cfg['samples'], int) and cfg['samples'] >= 2):
    raise ValueError(f"Expected samples={cfg['samples']} to be an integer "
                     '>= 2.')
  if cfg['accountant'] not in accounting.ACCOUNTANTS:
    raise ValueError(f"Expected accountant={cfg['accountant']!r} to be one "
                     f'of {accounting.ACCOUNTANTS}.')
