"""qdpsgd's claims (Ding et al., Sec. 5), planned from the config alone.

Two families, each Bonferroni-corrected over its own claims, every claim
paired by seed (seed s shares its shards, model init and round keys across
algorithms):

* ``sanity``: the setup can show the effects at all: DSGD and Q-DPSGD-1
  with sigma = 0 each reach a test accuracy more than ``LEARNS`` above
  chance (1 / classes).
* ``paper``: the paper's orderings (Fig. 1 and its text, Remark 5) on the
  sound rows, in final training loss of the average model (lower is
  better): for each paper epsilon, Q-DPSGD-1 below Q-DPSGD-2; at the
  largest, Q-DPSGD-1 below Q-DPSGD-2 at each further bit width; at the
  largest, each of Q-DPSGD-1 and Q-DPSGD-2 below DSGD and below SDM at the
  same simulated wall-clock budget (the shorter of the two runs' total
  times; each run's loss at its last evaluation that ended within it); for
  Q-DPSGD-1 and Q-DPSGD-2, the largest paper epsilon below the smallest.

The main scenario (first agents count, first batch size) carries the claims.
A run that diverged (non-finite loss) counts as loss ``DIVERGED``.
"""

from typing import Any

import numpy as np

from experiments.common import claims as claims_lib
from experiments.qdpsgd._config import Config
from experiments.qdpsgd._config import LABELS
from experiments.qdpsgd._results import Results

DIVERGED = 100.0
LEARNS = 0.2  # test accuracy above chance that counts as learning
# The run that would make the paper claims testable, per sanity row.
REMEDY = {'dsgd': 'more rounds or a learning rate tuned on a validation '
                  'split, until DSGD learns',
          'qdpsgd1': "Q-DPSGD-1's quantizer step and learning rate tuned on "
                     'a validation split, until it learns without noise'}


def label(cfg: Config, algorithm: str, eps: float | None, calibration: str,
          bits: int) -> str:
  """A row's name: algorithm, bits if not the paper's, epsilon, calibration
  ('none' non-private, 'zero' sigma = 0, 'sound', 'paper': the paper's
  theorem; the run appends whether it is sound at that setting)."""
  name = LABELS[algorithm]
  if algorithm == 'qdpsgd2' and bits != cfg.bits:
    name += f' {bits} bits'
  if calibration == 'none':
    return name
  if calibration == 'zero':
    return name + ' sigma=0'
  name += f' eps={eps:g}'
  if calibration == 'paper':
    theorem = 1 if algorithm == 'qdpsgd1' else 5
    name += f' paper Thm. {theorem}'
  return name


def plan(cfg: Config) -> list[dict[str, Any]]:
  """Every claim: family, kind ('learns', 'final' or 'time'), rows."""
  bits = cfg.bits

  def row(algorithm, eps=None, calibration='sound', b=bits):
    return label(cfg, algorithm, eps, calibration, b)

  out = [dict(family='sanity', kind='learns', treatment=row(a, None, c),
              text=f'{row(a, None, c)} learns: test accuracy more than '
              f'{LEARNS:g} above chance') for a, c in
         (('dsgd', 'none'), ('qdpsgd1', 'zero'))]
  eps = list(cfg.epsilons)
  lo, hi = eps[0], eps[-1]
  for e in eps:
    out.append(dict(kind='final', treatment=row('qdpsgd1', e),
                    control=row('qdpsgd2', e)))
  for b in cfg.more_bits:
    out.append(dict(kind='final', treatment=row('qdpsgd1', hi),
                    control=row('qdpsgd2', hi, b=b)))
  for q in ('qdpsgd1', 'qdpsgd2'):
    for base in (row('dsgd', None, 'none'), row('sdm', hi)):
      out.append(dict(kind='time', treatment=row(q, hi), control=base,
                      text=f'{row(q, hi)} below {base} in loss at equal '
                      'simulated time'))
  if hi > lo:
    for q in ('qdpsgd1', 'qdpsgd2'):
      out.append(dict(kind='final', treatment=row(q, hi),
                      control=row(q, lo)))
  for c in out:
    c.setdefault('family', 'paper')
    if 'text' not in c:
      c['text'] = f"{c['treatment']} below {c['control']} in loss"
  return out


def _capped(x) -> np.ndarray:
  x = np.asarray(x, np.float64)
  return np.where(np.isfinite(x), x, DIVERGED)


def _at_time(curve, budget: float) -> float:
  """The run's loss at its last evaluation that ended by ``budget``."""
  times = np.asarray(curve['time'])
  done = np.flatnonzero(times <= budget * (1 + 1e-12))
  if not done.size:
    return float('inf')
  return float(curve['loss'][done[-1]])


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  """The planned claims, checked on the main scenario."""
  del cfg
  scenario = results.scenarios[0]
  curves, seeds = scenario.curves, scenario.seeds
  families = {name: claims_lib.ClaimFamily(name)
              for name in ('sanity', 'paper')}
  for c in results.plan:
    treat = {r['seed']: r for r in curves[c['treatment']]}
    family = families[c['family']]
    if c['kind'] == 'learns':
      acc = np.asarray([treat[s]['test_accuracy'][-1] for s in seeds])
      family.add(c['text'], acc - results.chance, threshold=LEARNS,
                 kind='sanity', remedy=next(
                     text for a, text in REMEDY.items()
                     if c['treatment'].startswith(LABELS[a])),
                 treatment=c['treatment'], chance=results.chance,
                 treatment_accuracy=float(acc.mean()))
      continue
    ctrl = {r['seed']: r for r in curves[c['control']]}
    if c['kind'] == 'final':
      t = [treat[s]['loss'][-1] for s in seeds]
      k = [ctrl[s]['loss'][-1] for s in seeds]
      details = {}
    else:
      budgets = [min(treat[s]['time'][-1], ctrl[s]['time'][-1])
                 for s in seeds]
      t = [_at_time(treat[s], b) for s, b in zip(seeds, budgets)]
      k = [_at_time(ctrl[s], b) for s, b in zip(seeds, budgets)]
      details = dict(time_budget=float(np.mean(budgets)))
    family.add(c['text'], _capped(t), _capped(k), higher_is_better=False,
               kind='paper', treatment=c['treatment'], control=c['control'],
               treatment_loss=float(np.mean(_capped(t))),
               control_loss=float(np.mean(_capped(k))), **details)
  return list(families.values())
