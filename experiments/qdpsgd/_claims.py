"""qdpsgd's claims (Ding et al., Sec. 5), planned from the config alone.

Every claim compares final training losses of the average model (lower is
better), paired by seed (seed s shares its shards, model init and round keys
across algorithms), under the verdict rule with Bonferroni over the family:

* for each epsilon: Q-DPSGD-1 reaches a lower loss than Q-DPSGD-2;
* at the largest epsilon, in loss vs simulated time: each of Q-DPSGD-1 and
  Q-DPSGD-2 is below DSGD and below SDM at the same wall-clock budget, the
  budget being the shorter of the two runs' total simulated times (the loss
  compared is each run's loss after its last round that ended within it);
* for Q-DPSGD-1 and Q-DPSGD-2: the largest epsilon gives a lower loss than
  the smallest.

The main scenario (first agents count, first batch size) carries the claims.
A run that diverged (non-finite loss) counts as loss ``DIVERGED``.
"""

from typing import Any

import numpy as np

from experiments.common import claims as claims_lib
from experiments.qdpsgd._config import Config
from experiments.qdpsgd._config import LABELS

DIVERGED = 100.0


def label(algorithm: str, eps) -> str:
  return LABELS[algorithm] + ('' if eps is None else f' eps={eps:g}')


def plan(cfg: Config) -> list[dict[str, Any]]:
  eps = sorted(float(e) for e in cfg.epsilons)
  lo, hi = eps[0], eps[-1]
  out = [dict(kind='final', text=f'Q-DPSGD-1 below Q-DPSGD-2 in loss at '
              f'eps={e:g}', treatment=label('qdpsgd1', e),
              control=label('qdpsgd2', e)) for e in eps]
  for q in ('qdpsgd1', 'qdpsgd2'):
    for base, base_eps in (('dsgd', None), ('sdm', hi)):
      out.append(dict(
          kind='time', text=f'{LABELS[q]} below {LABELS[base]} in loss at '
          f'equal simulated time (eps={hi:g})',
          treatment=label(q, hi), control=label(base, base_eps)))
  if hi > lo:
    for q in ('qdpsgd1', 'qdpsgd2'):
      out.append(dict(kind='final', text=f'{LABELS[q]}: eps={hi:g} gives a '
                      f'lower loss than eps={lo:g}', treatment=label(q, hi),
                      control=label(q, lo)))
  return out


def _capped(x) -> np.ndarray:
  x = np.asarray(x, np.float64)
  return np.where(np.isfinite(x), x, DIVERGED)


def _at_time(curve, budget: float) -> float:
  """The run's loss after its last round that ended by ``budget``."""
  times = np.asarray(curve['time'])
  done = np.flatnonzero(times <= budget * (1 + 1e-12))
  if not done.size:
    return float('inf')
  return float(curve['loss'][done[-1]])


def claims(results: dict[str, Any], cfg: Config) -> claims_lib.ClaimFamily:
  """The planned claims, checked on the main scenario."""
  del cfg
  scenario = results['scenarios'][0]
  curves = scenario['curves']
  seeds = scenario['seeds']
  family = claims_lib.ClaimFamily()
  for c in results['plan']:
    treat = {r['seed']: r for r in curves[c['treatment']]}
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
               treatment=c['treatment'], control=c['control'],
               treatment_loss=float(np.mean(_capped(t))),
               control_loss=float(np.mean(_capped(k))), **details)
  return family
