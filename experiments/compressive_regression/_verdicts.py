"""compressive_regression's claim checks: sparsified vs unsparsified."""

import math
from typing import Any

from experiments.compressive_regression._config import BASELINES
from experiments.compressive_regression._config import COMPRESSIVE
from experiments.compressive_regression._config import PRIVATE


def row_of(final, method, eps):
  return next(r for r in final if r['method'] == method and (
      r['epsilon'] == eps or method not in PRIVATE))


def compare(final, method, baseline, eps) -> dict[str, Any]:
  """Sparsified method vs an unsparsified baseline at one per-step eps."""
  a, b = row_of(final, method, eps), row_of(final, baseline, eps)
  diff = b['final_rel_loss_mean'] - a['final_rel_loss_mean']
  se = math.hypot(a['final_rel_loss_sem'], b['final_rel_loss_sem'])
  if diff > 2 * se:
    verdict = 'better'
  elif diff < -2 * se:
    verdict = 'worse'
  else:
    verdict = 'tie'
  return dict(method=method, baseline=baseline, epsilon=eps,
              method_loss=a['final_rel_loss_mean'],
              baseline_loss=b['final_rel_loss_mean'],
              ratio=a['final_rel_loss_mean'] / max(b['final_rel_loss_mean'],
                                                   1e-300),
              verdict=verdict)


def verdicts(final, cfg) -> list[dict[str, Any]]:
  """Per (calibration, baseline): the claim holds at small and large eps?

  "Helps at small eps": the sparsified method's final relative loss is lower
  than the baseline's by more than 2 SEM at eps_small. "Not at large": it is
  not lower by more than 2 SEM at eps_large. ``pattern``: the same at the
  smallest and largest eps of the sweep instead. ``crossover``: the smallest
  eps of the sweep at which the sparsified method is not better.
  """
  out = []
  for method in COMPRESSIVE:
    for baseline in BASELINES:
      small = compare(final, method, baseline, cfg['eps_small'])
      large = compare(final, method, baseline, cfg['eps_large'])
      sweep = [compare(final, method, baseline, e) for e in cfg['epsilons']]
      crossover = next((c['epsilon'] for c in sweep
                        if c['verdict'] != 'better'), None)
      helps_small = small['verdict'] == 'better'
      helps_large = large['verdict'] == 'better'
      out.append(dict(method=method, baseline=baseline,
                      small=small, large=large,
                      helps_small=helps_small, helps_large=helps_large,
                      reproduced=helps_small and not helps_large,
                      pattern=(sweep[0]['verdict'] == 'better' and
                               sweep[-1]['verdict'] != 'better'),
                      crossover=crossover,
                      sweep=[c['verdict'] for c in sweep]))
  return out
