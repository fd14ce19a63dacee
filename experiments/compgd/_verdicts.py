"""compgd's claims, paired by seed (experiments.common.verdict).

Every method of seed s runs on the data of seed s (same points, labels, test
set), so the per-seed difference of excess test risks is paired. All claims
are checked at ``claim_epochs`` (default: the most epochs run), for every
intrinsic dimension k, as one Bonferroni family:

* DP-CompGD ends below DP-GD (lower is better, threshold 0): the thesis's
  claim, per d, so the report can say from which d on it holds;
* CompGD loses little against GD at the largest d: its excess risk exceeds
  GD's by less than ``LOSS_MARGIN`` nats (lower is better, threshold
  +LOSS_MARGIN). At small d, m = d/10 is a handful of rows and CompGD is
  expected to lose more; the tables show by how much.
"""

from typing import Any

import numpy as np

from experiments.common import verdict as verdict_lib

LOSS_MARGIN = 0.02  # nats of excess logistic risk


def row_of(rows, method, d, k, epochs):
  return next(r for r in rows if r['method'] == method and r['d'] == d and
              r['intrinsic'] == k and r['epochs'] == epochs)


def claims(rows, cfg) -> list[dict[str, Any]]:
  t = cfg['claim_epochs']
  pending = []
  for k in cfg['intrinsic']:
    for d in cfg['dims']:
      a = np.asarray(row_of(rows, 'dp_compgd', d, k, t)['per_seed'])
      b = np.asarray(row_of(rows, 'dp_gd', d, k, t)['per_seed'])
      pending.append((f'DP-CompGD (m = d/{cfg["compression"]}) has lower '
                      f'excess test risk than DP-GD at d={d}, k={k}, '
                      f'{t} epochs, eps={cfg["epsilon"]:g}', a - b, 0.0,
                      dict(kind='dp', d=d, intrinsic=k, epochs=t)))
  for k in cfg['intrinsic']:
    for d in cfg['dims'][-1:]:
      a = np.asarray(row_of(rows, 'compgd', d, k, t)['per_seed'])
      b = np.asarray(row_of(rows, 'gd', d, k, t)['per_seed'])
      pending.append((f'CompGD loses less than {LOSS_MARGIN} nats of excess '
                      f'test risk against GD at d={d}, k={k}, {t} epochs',
                      a - b, LOSS_MARGIN,
                      dict(kind='nonprivate', d=d, intrinsic=k, epochs=t)))
  m = len(pending)
  return [verdict_lib.claim(text, verdict_lib.paired_verdict(
      diff, threshold=thr, higher_is_better=False, comparisons=m), **details)
          for text, diff, thr, details in pending]


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
