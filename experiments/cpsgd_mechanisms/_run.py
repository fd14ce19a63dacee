"""cpsgd_mechanisms' run: calibrated noise, exact privacy, a sampling check."""

import math
import sys
import time
from typing import Any

import jax
import numpy as np

from dpjax import accounting
from dpjax import noise
from experiments.cpsgd_mechanisms._config import NAME


def sensitivities(dimension: int) -> tuple[float, float, float]:
  """(L1, L2, L_inf) of a change of L2 and L_inf norm <= 1 in d dimensions."""
  return math.sqrt(dimension), 1.0, 1.0


def _validate_sampling(cfg, rows, key) -> list[dict[str, Any]]:
  """Measured vs formula error at the ``validate_epsilons`` points."""
  out = []
  for i, row in enumerate(r for r in rows
                          if r['epsilon'] in cfg['validate_epsilons']):
    d, n_trials, s, p = row['dim'], row['num_trials'], row['scale'], cfg['p']
    vectors = max(2, cfg['samples'] // d)
    start = time.time()
    z = noise.binomial(jax.random.fold_in(key, i), (vectors, d),
                       trials=n_trials, p=p)
    z = np.asarray(z, np.float64)
    sample_seconds = time.time() - start
    pp = float(noise.binomial_p(p))
    err = np.sum((s * (z - n_trials * pp)) ** 2, axis=1)  # per vector
    mse, sem = float(err.mean()), float(err.std(ddof=1) / math.sqrt(vectors))
    formula = d * s**2 * n_trials * pp * (1 - pp)
    out.append(dict(dim=d, epsilon=row['epsilon'], scale=s,
                    num_trials=n_trials, vectors=vectors, measured=mse,
                    sem=sem, formula=formula, z=(mse - formula) / sem,
                    sample_seconds=round(sample_seconds, 3)))
  return out


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  del out_dir
  start = time.time()
  p, delta = cfg['p'], cfg['delta']
  gauss = {}
  for eps in cfg['epsilons']:
    classical = (accounting.classical_gaussian_stddev(eps, delta, 1.0)
                 if eps <= 1 else None)
    tight = accounting.calibrate_gaussian_stddev(eps, delta, 1.0,
                                                 cfg['accountant'])
    gauss[eps] = dict(epsilon=eps, sigma_classical=classical,
                      sigma_tight=tight,
                      error_classical=None if classical is None else
                      classical**2, error_tight=tight**2)
  if progress:
    print(f'[{NAME}] Gaussian calibrated ({time.time() - start:.0f} s)',
          file=sys.stderr)
  rows = []
  for d in cfg['dims']:
    for j in cfg['scale_denominators']:
      s = 1.0 / j
      sens = sensitivities(d)
      for eps in cfg['epsilons']:
        n_trials = accounting.calibrate_binomial_trials(eps, p, s, delta, d,
                                                        *sens)
        floor = n_trials == accounting.binomial_min_trials(p, s, delta, d,
                                                           sens[2])
        v = n_trials * p * (1 - p)
        g = gauss[eps]
        err = s**2 * v
        rows.append(dict(
            dim=d, scale_denominator=j, scale=s, epsilon=eps,
            num_trials=n_trials, condition_bound=floor,
            epsilon_theorem1=accounting.binomial_epsilon(
                n_trials, p, s, delta, d, *sens),
            error=err, total_error=d * err,
            gaussian_error_tight=g['error_tight'],
            gaussian_error_classical=g['error_classical'],
            ratio_tight=err / g['error_tight'],
            ratio_classical=None if g['error_classical'] is None else
            err / g['error_classical']))
  exact = []
  for row in (r for r in rows if r['dim'] == 1):
    j, eps = row['scale_denominator'], row['epsilon']
    eps_exact, largest_worst = accounting.binomial_exact_epsilon(
        row['num_trials'], p, j, delta)
    n_exact = accounting.calibrate_binomial_exact_trials(eps, p, j, delta)
    err_exact = row['scale']**2 * n_exact * p * (1 - p)
    exact.append(dict(
        scale_denominator=j, scale=row['scale'], epsilon=eps,
        num_trials=row['num_trials'], error=row['error'],
        exact_epsilon=eps_exact, conservatism=eps / eps_exact,
        largest_shift_worst=largest_worst, num_trials_exact=n_exact,
        error_exact=err_exact,
        ratio_exact_tight=err_exact / gauss[eps]['error_tight']))
  if progress:
    print(f'[{NAME}] exact divergences done ({time.time() - start:.0f} s)',
          file=sys.stderr)
  validation = _validate_sampling(cfg, rows, jax.random.key(cfg['seed']))
  return dict(experiment=NAME, config=cfg, seed=cfg['seed'],
              sensitivities={str(d): sensitivities(d) for d in cfg['dims']},
              gaussian=list(gauss.values()), rows=rows, exact=exact,
              validation=validation, verdicts=verdicts(rows, exact,
                                                       validation),
              wall_seconds=round(time.time() - start, 1))


def verdicts(rows, exact, validation) -> dict[str, Any]:
  """Numbers behind the report's yes/no lines."""
  curves: dict[tuple, list] = {}
  for r in rows:
    curves.setdefault((r['dim'], r['epsilon']), []).append(r)
  monotone = all(
      all(b['ratio_tight'] <= a['ratio_tight'] * (1 + 1e-9)
          for a, b in zip(rs, rs[1:]))
      for rs in (sorted(v, key=lambda r: r['scale_denominator'])
                 for v in curves.values()))
  finest = max(r['scale_denominator'] for r in rows)
  coarsest = min(r['scale_denominator'] for r in rows)
  at_fine = [r for r in rows if r['scale_denominator'] == finest]
  at_coarse = [r for r in rows if r['scale_denominator'] == coarsest]
  fine_cls = [r['ratio_classical'] for r in at_fine
              if r['ratio_classical'] is not None]
  exact_fine = [e['ratio_exact_tight'] for e in exact
                if e['scale_denominator'] == finest]
  return dict(
      ratio_decreases_as_s_shrinks=monotone,
      finest_scale=1 / finest, coarsest_scale=1 / coarsest,
      ratio_tight_coarsest=[min(r['ratio_tight'] for r in at_coarse),
                            max(r['ratio_tight'] for r in at_coarse)],
      ratio_tight_finest=[min(r['ratio_tight'] for r in at_fine),
                          max(r['ratio_tight'] for r in at_fine)],
      ratio_classical_finest=[min(fine_cls), max(fine_cls)] if fine_cls
      else None,
      exact_ratio_finest=[min(exact_fine), max(exact_fine)] if exact_fine
      else None,
      conservatism=[min(e['conservatism'] for e in exact),
                    max(e['conservatism'] for e in exact)] if exact else None,
      largest_shift_worst=all(e['largest_shift_worst'] for e in exact),
      sampling_within_3sem=sum(abs(v['z']) <= 3 for v in validation),
      sampling_points=len(validation))
