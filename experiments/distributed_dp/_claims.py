"""distributed_dp's claims: seed verdicts, two families.

Mean estimation, one family (unnamed):

Per target epsilon and for each of DDG and Skellam (per seed, the statistic
named; verdicts by ``experiments.common.verdict``):

* close to the central Gaussian from ``close_bits`` bits on: the largest
  MSE / Gaussian MSE over those bits, claimed <= 1 + ``gaussian_tolerance``;
* below cpSGD wherever cpSGD fits the same b-bit secure sum: the largest
  MSE / cpSGD MSE over those bits, claimed < 1.

And the gap they close: cpSGD's smallest MSE / Gaussian MSE over the bits
where it fits, claimed > 1 + ``gaussian_tolerance``.

Federated training (``training``), family ``training``: see
``training_plan``.
"""

from typing import Any

import numpy as np

from experiments.common import claims as claims_lib
from experiments.distributed_dp._config import Config
from experiments.distributed_dp._results import Results

TRAINING_PREFIX = 'federated training: '  # the training claims' texts


def _seeds(row) -> np.ndarray:
  return np.asarray(row['per_seed'], np.float64)


def _rows(rows, mech, eps):
  return {r['bits']: r for r in rows if r['mechanism'] == mech
          and r['target_epsilon'] == eps and r['mse'] is not None}


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  """The mean-estimation family and, when training ran, the training one."""
  families = [dme_claims(cfg, results.rows, results.gaussian)]
  if results.training is not None:
    families.append(training_claims(results.training.plan,
                                    results.training.rows))
  return families


def dme_claims(cfg, rows, gaussian) -> claims_lib.ClaimFamily:
  specs = []  # (text, per-seed statistic, threshold, higher is better)
  tol = cfg.gaussian_tolerance
  for g in gaussian:
    eps = g['target_epsilon']
    gs = _seeds(g)
    cpsgd = _rows(rows, 'cpsgd', eps)
    for mech, label in (('ddg', 'DDG'), ('skellam', 'Skellam')):
      mine = _rows(rows, mech, eps)
      close = sorted(b for b in mine if b >= cfg.close_bits)
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
  family = claims_lib.ClaimFamily()
  for text, stat, threshold, higher in specs:
    family.add(text, stat, threshold=threshold, higher_is_better=higher,
               kind='paper', per_seed=stat.tolist())
  return family


# Federated training: planned from the settings that run (a function of the
# privacy calibration and the bits, not of any accuracy), checked per seed
# on the final test accuracy; one Bonferroni family, apart from the
# mean-estimation family above.


def _runnable(settings, method):
  return {s['bits']: s['setting'] for s in settings
          if s['method'] == method and 'event' in s}


def training_plan(cfg, settings) -> list[dict[str, Any]]:
  """Each claim: its text, kind, [(treatment, control), ...] and threshold.

  * close: DDG (Skellam) within ``train_tolerance`` test accuracy of the
    Gaussian at every b >= ``close_bits`` (per seed: the smallest
    difference over those b);
  * above cpSGD: DDG (Skellam) above cpSGD at every b of the sweep where
    cpSGD fits a b-bit sum; where cpSGD fits none, above cpSGD at the
    fewest bits where it fits, with fewer bits (per seed: the smallest
    difference);
  * the gap: cpSGD more than ``train_tolerance`` below the Gaussian at every
    b where it runs (per seed: the largest difference).
  """
  tol = cfg.train_tolerance
  gauss = next((s['setting'] for s in settings if s['method'] == 'gaussian'),
               None)
  cpsgd = _runnable(settings, 'cpsgd')
  swept = {b: v for b, v in cpsgd.items() if b in cfg.train_bits}
  extra = {b: v for b, v in cpsgd.items() if b not in cfg.train_bits}
  out = []
  for mech, label in (('ddg', 'DDG'), ('skellam', 'Skellam')):
    mine = _runnable(settings, mech)
    close = sorted(b for b in mine if b >= cfg.close_bits)
    if close and gauss:
      out.append(dict(
          kind='close', mechanism=mech, threshold=-tol, higher=True,
          pairs=[(mine[b], gauss) for b in close],
          text=f'{label} test accuracy within {tol:g} of the Gaussian at '
               f'every b in {close} (per seed: the smallest {label} - '
               'Gaussian)'))
    both = sorted(set(mine) & set(swept))
    if both:
      out.append(dict(
          kind='above cpSGD', mechanism=mech, threshold=0.0, higher=True,
          pairs=[(mine[b], swept[b]) for b in both],
          text=f'{label} test accuracy above cpSGD at equal bits, every b '
               f'in {both} (per seed: the smallest {label} - cpSGD)'))
    elif extra and mine:
      (cb, cset), = extra.items()
      fewer = sorted(b for b in mine if b < cb)
      if fewer:
        out.append(dict(
            kind='above cpSGD', mechanism=mech, threshold=0.0, higher=True,
            pairs=[(mine[b], cset) for b in fewer],
            text=f'{label} at every b in {fewer} above cpSGD at b = {cb}, '
                 'the fewest bits where cpSGD fits (per seed: the smallest '
                 f'{label} - cpSGD)'))
  if cpsgd and gauss:
    bs = sorted(cpsgd)
    out.append(dict(
        kind='gap', mechanism='cpsgd', threshold=-tol, higher=False,
        pairs=[(cpsgd[b], gauss) for b in bs],
        text=f'cpSGD test accuracy more than {tol:g} below the Gaussian at '
             f'every b in {bs} (the gap; per seed: the largest cpSGD - '
             'Gaussian)'))
  return out


def training_claims(the_plan, rows) -> claims_lib.ClaimFamily:
  """The planned training claims, family ``training``."""
  acc = {r['setting']: np.asarray(r['per_seed'], np.float64) for r in rows
         if r.get('per_seed') is not None}
  family = claims_lib.ClaimFamily('training')
  for spec in the_plan:
    diffs = np.stack([acc[t] - acc[c] for t, c in spec['pairs']])
    stat = diffs.min(0) if spec['higher'] else diffs.max(0)
    family.add(TRAINING_PREFIX + spec['text'], stat,
               threshold=spec['threshold'], higher_is_better=spec['higher'],
               kind='paper', comparison=spec['kind'],
               mechanism=spec['mechanism'],
               per_seed=stat.tolist())
  return family
