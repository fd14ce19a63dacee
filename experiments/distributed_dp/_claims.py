"""distributed_dp's claims: seed verdicts, all one Bonferroni family.

Per target epsilon and for each of DDG and Skellam (per seed, the statistic
named; verdicts by ``experiments.common.verdict``):

* close to the central Gaussian from ``close_bits`` bits on: the largest
  MSE / Gaussian MSE over those bits, claimed <= 1 + ``gaussian_tolerance``;
* below cpSGD wherever cpSGD fits the same b-bit secure sum: the largest
  MSE / cpSGD MSE over those bits, claimed < 1.

And the gap they close: cpSGD's smallest MSE / Gaussian MSE over the bits
where it fits, claimed > 1 + ``gaussian_tolerance``.
"""

from typing import Any

import numpy as np

from experiments.common import verdict as verdict_lib


def _seeds(row) -> np.ndarray:
  return np.asarray(row['per_seed'], np.float64)


def _rows(rows, mech, eps):
  return {r['bits']: r for r in rows if r['mechanism'] == mech
          and r['target_epsilon'] == eps and r['mse'] is not None}


def claims(cfg, rows, gaussian) -> list[dict[str, Any]]:
  specs = []  # (text, per-seed statistic, threshold, higher is better)
  tol = cfg['gaussian_tolerance']
  for g in gaussian:
    eps = g['target_epsilon']
    gs = _seeds(g)
    cpsgd = _rows(rows, 'cpsgd', eps)
    for mech, label in (('ddg', 'DDG'), ('skellam', 'Skellam')):
      mine = _rows(rows, mech, eps)
      close = sorted(b for b in mine if b >= cfg['close_bits'])
      if close:
        stat = np.max([_seeds(mine[b]) / gs for b in close], 0)
        specs.append((
            f'{label} MSE within {tol:.0%} of the central Gaussian at every b '
            f'in {close} (eps = {eps:g}; per seed: the largest MSE / '
            'Gaussian MSE)', stat, 1 + tol, False))
      both = sorted(set(mine) & set(cpsgd))
      if both:
        stat = np.max([_seeds(mine[b]) / _seeds(cpsgd[b]) for b in both], 0)
        specs.append((
            f'{label} MSE below cpSGD at every b in {both} where cpSGD fits '
            f'a b-bit secure sum (eps = {eps:g}; per seed: the largest MSE '
            f'{label} / MSE cpSGD)', stat, 1.0, False))
    if cpsgd:
      bs = sorted(cpsgd)
      stat = np.min([_seeds(cpsgd[b]) / gs for b in bs], 0)
      specs.append((
          f'cpSGD MSE more than {1 + tol:g}x the central Gaussian at every b '
          f'in {bs} (the gap; eps = {eps:g}; per seed: the smallest MSE '
          'cpSGD / Gaussian MSE)', stat, 1 + tol, True))
  out = []
  for text, stat, threshold, higher in specs:
    v = verdict_lib.paired_verdict(stat, threshold=threshold,
                                   higher_is_better=higher,
                                   comparisons=len(specs))
    out.append(verdict_lib.claim(text, v, per_seed=stat.tolist()))
  return out
