"""compgd's claims, paired by seed, one family.

Every method of seed s runs on the data of seed s (same points, labels, test
set), so the per-seed difference of excess test risks is paired. All claims
are checked at ``claim_epochs`` (default: the most epochs run), for every
intrinsic dimension k:

* DP-CompGD ends below DP-GD (lower is better, threshold 0): the thesis's
  claim, per d, so the report can say from which d on it holds;
* CompGD loses little against GD at the largest d: its excess risk exceeds
  GD's by less than ``LOSS_MARGIN`` nats (lower is better, threshold
  +LOSS_MARGIN). At small d, m = d/10 is a handful of rows and CompGD is
  expected to lose more; the tables show by how much.
"""

from typing import Any

import numpy as np

from experiments.common import claims as claims_lib
from experiments.compgd._config import Config

LOSS_MARGIN = 0.02  # nats of excess logistic risk


def row_of(rows, method, d, k, epochs):
  return next(r for r in rows if r['method'] == method and r['d'] == d and
              r['intrinsic'] == k and r['epochs'] == epochs)


def _diff(rows, treatment, control, d, k, t):
  return (np.asarray(row_of(rows, treatment, d, k, t)['per_seed']) -
          np.asarray(row_of(rows, control, d, k, t)['per_seed']))


def claims(results: dict[str, Any], cfg: Config) -> claims_lib.ClaimFamily:
  rows, t = results['rows'], cfg.claim_epochs
  family = claims_lib.ClaimFamily()
  for k in cfg.intrinsic:
    for d in cfg.dims:
      family.add(f'DP-CompGD (m = d/{cfg.compression}) has lower excess test '
                 f'risk than DP-GD at d={d}, k={k}, {t} epochs, '
                 f'eps={cfg.epsilon:g}', _diff(rows, 'dp_compgd', 'dp_gd', d,
                                               k, t),
                 higher_is_better=False, kind='dp', d=d, intrinsic=k,
                 epochs=t)
  for k in cfg.intrinsic:
    d = cfg.dims[-1]
    family.add(f'CompGD loses less than {LOSS_MARGIN} nats of excess test '
               f'risk against GD at d={d}, k={k}, {t} epochs',
               _diff(rows, 'compgd', 'gd', d, k, t), threshold=LOSS_MARGIN,
               higher_is_better=False, kind='nonprivate', d=d, intrinsic=k,
               epochs=t)
  return family


def crossover(claim_list, k) -> int | None:
  """The smallest d from which on every DP claim at k held (None if none)."""
  dp = sorted((c['d'], c['verdict']) for c in claim_list
              if c['kind'] == 'dp' and c['intrinsic'] == k)
  first = None
  for d, verdict in reversed(dp):
    if verdict != 'held':
      break
    first = d
  return first
