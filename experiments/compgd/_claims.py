"""compgd's claims, paired by seed: a primary family and sanity checks.

Every method of seed s runs on the data of seed s (same training,
validation and test points), and each method picks its number of epochs T
per seed by the lowest validation error (``_run.tune``), so the per-seed
difference of test errors (the thesis's measure) is paired and no method
is compared at a T chosen on the test set.

Primary family, for every intrinsic dimension k:

* DP-CompGD improves on DP-GD by more than ``MARGIN`` test error at each d
  (lower is better, threshold -MARGIN): the thesis's "significant
  improvement of DP-CompGD over DP-GD" (Figs. 7.1-7.3 show it without
  numbers), read as at least 2 points of error. A true null (both methods
  equally good or equally near chance) is then *refuted* once the interval
  is narrow enough, which a threshold of 0 could never do; the MDE column
  says whether the seeds could decide a 2-point effect (``effect=MARGIN``).
* CompGD loses less than ``MARGIN`` test error against GD at the largest d
  (non-private; threshold +MARGIN): the project's own margin, an extension.

The DP claims are the thesis's (kind paper) read with the project's
margin.

Sanity family (what the setup can show), at each (k, d): GD, DP-GD and
DP-CompGD each have lower test error than the predictor w = 0 (threshold
0): without learning there is no improvement to compare.
"""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.compgd._config import Config
from experiments.compgd._config import LABELS
from experiments.compgd._results import Results

MARGIN = 0.02  # test error (2 points): the smallest improvement of interest


def row_of(rows, method, d, k, epochs=None):
  """The row of (method, d, k) at ``epochs`` (None: the tuned row)."""
  return next(r for r in rows if r['method'] == method and r['d'] == d and
              r['intrinsic'] == k and (epochs is None or
                                       r['epochs'] == epochs))


def _tuned(results: Results, method, d, k) -> np.ndarray:
  return np.asarray(row_of(results.tuned, method, d, k)['test_error'])


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  primary, sanity = (claims_lib.ClaimFamily(name)
                     for name in ('primary', 'sanity'))
  tuned = 'T chosen on validation'
  for k in cfg.intrinsic_dimensions:
    for d in cfg.dimensions:
      primary.add(f'DP-CompGD (m = d/{cfg.compression}) has more than '
                  f'{MARGIN:g} lower test error than DP-GD at d={d}, k={k}, '
                  f'eps={cfg.epsilon:g} ({tuned})',
                  _tuned(results, 'dp_compgd', d, k),
                  _tuned(results, 'dp_gd', d, k), threshold=-MARGIN,
                  higher_is_better=False, effect=MARGIN, kind='paper',
                  comparison='dp', d=d, intrinsic=k)
  for k in cfg.intrinsic_dimensions:
    d = cfg.dimensions[-1]
    primary.add(f'CompGD loses less than {MARGIN:g} test error against GD '
                f'at d={d}, k={k} ({tuned})', _tuned(results, 'compgd', d, k),
                _tuned(results, 'gd', d, k), threshold=MARGIN,
                higher_is_better=False, effect=MARGIN, kind='extension',
                comparison='nonprivate', d=d, intrinsic=k)
  for k in cfg.intrinsic_dimensions:
    for d in cfg.dimensions:
      zero = next(b for b in results.baselines
                  if b['d'] == d and b['intrinsic'] == k)
      for method in ('gd', 'dp_gd', 'dp_compgd'):
        sanity.add(f'{LABELS[method]} learns: lower test error than w = 0 '
                   f'at d={d}, k={k} ({tuned})',
                   _tuned(results, method, d, k), zero['zero_error'],
                   higher_is_better=False, kind='sanity',
                   remedy='more epochs in the T grid or more training '
                   'points, until every method beats w = 0',
                   comparison='sanity', arm=method, d=d, intrinsic=k)
  return [primary, sanity]


def crossover(claim_list, k) -> int | None:
  """The smallest d from which on every DP claim at k held, by outcome (a
  claim not tested does not count; None if none)."""
  dp = sorted((c['d'], c['outcome']) for c in claim_list
              if c.get('comparison') == 'dp' and c['intrinsic'] == k)
  first = None
  for d, verdict in reversed(dp):
    if verdict != 'held':
      break
    first = d
  return first
