"""cpsgd_training's claims: fixed before training, checked paired by seed.

Every comparison is planned from the privacy rows alone (Theorem 1's
per-round epsilon is a function of (k, m, rotation) and the configuration,
not of any training run), so nothing is chosen after seeing an accuracy:

* primary: cpSGD at the smallest per-round epsilon reached is within
  ``CLOSE`` test accuracy of the Gaussian baseline calibrated to the same
  per-round epsilon (non-inferiority: cpSGD - Gaussian > -CLOSE), one claim;
  its expected effect is ``CLOSE`` (the paper reports cpSGD at the
  Gaussian's accuracy, a difference ``CLOSE`` above the threshold), so the
  table says how many seeds decide it;
* close: the same non-inferiority claim for every other cpSGD configuration
  that has a Gaussian twin, Bonferroni over those configurations;
* bits: for every pair of rotated configurations whose per-round epsilons
  are within ``EPS_RATIO`` of each other and whose bits per coordinate
  differ, the one with more bits has the higher test accuracy (> 0),
  Bonferroni over the pairs.

Kinds: primary and close state Fig. 2 (cpSGD at about the Gaussian's
accuracy; the margin ``CLOSE`` is the project's reading) and are paper
claims; the more-bits pairs are the project's extension. Sanity, its own
family: the non-private run beats the Gaussian at the primary setting's
eps/round, or privacy costs nothing there and closeness to the Gaussian
would say nothing.

Treatment and control of seed i share that seed's model init, client shards
and round keys (``federated.init_clients``), so the differences are paired.
"""

from typing import Any

import numpy as np

from experiments.common import claims as claims_lib
from experiments.cpsgd_training._config import Config
from experiments.cpsgd_training._privacy import label
from experiments.cpsgd_training._results import Results

CLOSE = 0.05  # "close to the Gaussian baseline": within 0.05 test accuracy
EPS_RATIO = 1.25  # "comparable" per-round epsilons: within 25%
METRIC = 'test_accuracy'  # after the last round


def plan(privacy) -> dict[str, Any]:
  """The comparisons, from the privacy rows (before any training).

  Returns ``primary`` (a setting or None), ``close`` (the other matched
  settings) and ``pairs`` ([fewer-bits setting, more-bits setting]).
  """
  matched = [r for r in privacy if r['epsilon_round'] is not None]
  primary = (label(min(matched, key=lambda r: r['epsilon_round']))
             if matched else None)
  rotated = [r for r in matched if r['rotate']]
  pairs = []
  for i, a in enumerate(rotated):
    for b in rotated[i + 1:]:
      lo, hi = sorted((a['epsilon_round'], b['epsilon_round']))
      if hi / lo > EPS_RATIO or a['bits_per_coordinate'] == b[
          'bits_per_coordinate']:
        continue
      few, many = sorted((a, b), key=lambda r: r['bits_per_coordinate'])
      pairs.append([label(few), label(many)])
  return dict(primary=primary, pairs=pairs,
              close=[label(r) for r in matched if label(r) != primary])


def per_seed(runs, setting: str, seeds, test_size: int) -> np.ndarray:
  """The setting's final test accuracy, in the order of ``seeds``.

  Snapped to the nearest multiple of 1 / ``test_size`` (the accuracy is a
  count over the test set, averaged in float32), so that equal counts give
  exactly equal accuracies.
  """
  by_seed = {r['seed']: r[METRIC] for r in runs if r['setting'] == setting}
  acc = np.asarray([by_seed[s] for s in seeds], np.float64)
  return np.round(acc * test_size) / test_size


def _describe(row) -> str:
  return (f"{row['setting'].removeprefix('cpSGD ')} "
          f"({row['bits_per_coordinate']:.2f} bits, "
          f"eps/round {row['epsilon_round']:.3g})")


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  """The planned checks, three families (primary, close and bits), and
  the sanity family."""
  the_plan, runs = results.plan, results.runs
  seeds, test_size = cfg.seeds, results.dataset['n_test']
  by = {r['setting']: r for r in results.summary}
  primary, close, bits = (claims_lib.ClaimFamily(name)
                          for name in ('primary', 'close', 'bits'))

  def add_close(family, setting, what):
    family.add(
        f"cpSGD {_describe(by[setting])}{what} within {CLOSE:g} of the "
        f"Gaussian at the same eps/round (test acc)",
        per_seed(runs, setting, seeds, test_size),
        per_seed(runs, f'Gaussian @ {setting}', seeds, test_size),
        threshold=-CLOSE, effect=CLOSE, kind='paper', treatment=setting,
        control=f'Gaussian @ {setting}')

  if the_plan['primary'] is not None:
    add_close(primary, the_plan['primary'], ', the smallest eps/round,')
  for setting in the_plan['close']:
    add_close(close, setting, '')
  for few, many in the_plan['pairs']:
    bits.add(
        f"more bits, higher accuracy at comparable eps/round: "
        f"{_describe(by[many])} beats {_describe(by[few])} (test acc)",
        per_seed(runs, many, seeds, test_size),
        per_seed(runs, few, seeds, test_size), kind='extension',
        treatment=many, control=few)
  return [primary, close, bits,
          _sanity(runs, the_plan['primary'], seeds, test_size)]


NON_PRIVATE = 'non-private'  # the setting of the non-private run


def _sanity(runs, primary, seeds, test_size) -> claims_lib.ClaimFamily:
  """The non-private run against the Gaussian at ``primary``."""
  sanity = claims_lib.ClaimFamily('sanity')
  settings = {r['setting'] for r in runs}
  if primary is None or NON_PRIVATE not in settings:
    return sanity
  sanity.add(f'non-private training beats the Gaussian at {primary}\'s '
             'eps/round (test acc): privacy costs accuracy there',
             per_seed(runs, NON_PRIVATE, seeds, test_size),
             per_seed(runs, f'Gaussian @ {primary}', seeds, test_size),
             kind='sanity', remedy='a smaller per-round epsilon (fewer '
             'levels or trials) or more rounds, until the Gaussian falls '
             'below the non-private run', treatment=NON_PRIVATE,
             control=f'Gaussian @ {primary}')
  return sanity


def exact_checks(privacy) -> list[dict[str, Any]]:
  """Deterministic checks of the accounting (no randomness, not claims)."""
  matched = [r for r in privacy if r['epsilon_round'] is not None]
  if not matched:
    return []
  worst = max(abs(r['gauss_epsilon_round'] / r['epsilon_round'] - 1)
              for r in matched)
  less = [r for r in matched
          if r['gauss_epsilon_total'] < r['epsilon_total']]
  return [
      dict(check='the calibrated Gaussian round has the cpSGD round\'s '
                 'epsilon (its PLD epsilon at delta_round within 0.2%)',
           passed=bool(worst <= 2e-3),
           detail=f'largest relative difference {worst:.2g}'),
      dict(check='the matched Gaussian runs compose to a smaller total '
                 'epsilon than their cpSGD twins',
           passed=len(less) == len(matched),
           detail=f'{len(less)} of {len(matched)} configurations'),
  ]
