"""cpsgd_mechanisms' run: calibrated noise, exact privacy, a sampling check."""

import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import accounting
from dpjax import noise
from experiments.common import runner
from experiments.cpsgd_mechanisms._config import Config
from experiments.cpsgd_mechanisms._results import Results


def sensitivities(dimension: int) -> tuple[float, float, float]:
  """(L1, L2, L_inf) of a change of L2 and L_inf norm <= 1 in d dimensions."""
  return math.sqrt(dimension), 1.0, 1.0


def _validate_sampling(cfg, rows) -> list[dict[str, Any]]:
  """Measured vs formula error at the ``validate_epsilons`` points.

  Every seed draws its ``num_samples`` coordinates per point from its own
  key (``fold_in(key(seed), point)``); the seeds run as one vmapped program.
  """
  out = []
  seed_keys = jax.vmap(jax.random.key)(jnp.asarray(cfg.seeds))
  for i, row in enumerate(r for r in rows
                          if r['epsilon'] in cfg.validate_epsilons):
    d, n_trials, s, p = row['dim'], row['num_trials'], row['scale'], cfg.p
    vectors = max(2, cfg.num_samples // d)
    start = time.time()
    keys = jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(seed_keys)
    z = jax.vmap(lambda k, n=n_trials, v=vectors, d=d: noise.binomial(
        k, (v, d), trials=n, p=p))(keys)
    z = np.asarray(z, np.float64)  # [seeds, vectors, d]
    sample_seconds = time.time() - start
    pp = float(noise.binomial_p(p))
    err = np.sum((s * (z - n_trials * pp)) ** 2, axis=2)  # per vector
    per_seed = err.mean(axis=1)
    formula = d * s**2 * n_trials * pp * (1 - pp)
    out.append(dict(dim=d, epsilon=row['epsilon'], scale=s,
                    num_trials=n_trials, vectors=vectors,
                    measured=float(per_seed.mean()),
                    sem=_sem(per_seed), formula=formula,
                    ratio=float(per_seed.mean()) / formula,
                    per_seed=per_seed.tolist(),
                    sample_seconds=round(sample_seconds, 3)))
  return out


def _sem(values: np.ndarray) -> float | None:
  return (float(values.std(ddof=1) / math.sqrt(values.size))
          if values.size > 1 else None)


def _gaussian(cfg: Config) -> dict[float, dict[str, Any]]:
  """Per epsilon: sigma (Delta_2 = 1) classical (eps <= 1 only) and tight,
  and their errors sigma^2."""
  gauss = {}
  for eps in cfg.epsilons:
    classical = (accounting.classical_gaussian_stddev(eps, cfg.delta, 1.0)
                 if eps <= 1 else None)
    tight = accounting.calibrate(accounting.gaussian_event, eps, cfg.delta,
                                 cfg.accountant)  # Delta_2 = 1: sigma = z
    gauss[eps] = dict(epsilon=eps, sigma_classical=classical,
                      sigma_tight=tight,
                      error_classical=None if classical is None else
                      classical**2, error_tight=tight**2)
  return gauss


def _binomial_row(cfg: Config, d: int, j: int, g: dict[str, Any]
                  ) -> dict[str, Any]:
  """The Binomial mechanism at s = 1/j in d dimensions, calibrated by
  Theorem 1 to the epsilon of ``g``, the Gaussian's row."""
  p, delta, eps, s = cfg.p, cfg.delta, g['epsilon'], 1.0 / j
  sens = sensitivities(d)
  least = accounting.binomial_min_trials(p, s, delta, d, sens[2])
  n_trials = accounting.calibrate(
      lambda n: accounting.EpsilonDeltaDpEvent(
          accounting.binomial_epsilon(n, p, s, delta, d, *sens), delta),
      eps, delta, start=least)
  err = s**2 * (n_trials * p * (1 - p))
  return dict(
      dim=d, scale_denominator=j, scale=s, epsilon=eps,
      num_trials=n_trials, condition_bound=n_trials == least,
      epsilon_theorem1=accounting.binomial_epsilon(
          n_trials, p, s, delta, d, *sens),
      error=err, total_error=d * err,
      gaussian_error_tight=g['error_tight'],
      gaussian_error_classical=g['error_classical'],
      ratio_tight=err / g['error_tight'],
      ratio_classical=None if g['error_classical'] is None else
      err / g['error_classical'])


def _exact_row(cfg: Config, row: dict[str, Any], g: dict[str, Any]
               ) -> dict[str, Any]:
  """d = 1: the exact epsilon at Theorem 1's N, and the least N whose exact
  epsilon meets the target."""
  p, delta = cfg.p, cfg.delta
  j, eps = row['scale_denominator'], row['epsilon']
  eps_exact, largest_worst = accounting.binomial_exact_epsilon(
      row['num_trials'], p, j, delta)
  n_exact = accounting.calibrate(
      lambda n: accounting.EpsilonDeltaDpEvent(
          eps, accounting.binomial_exact_delta(n, p, j, eps)),
      eps, delta, start=16)
  err_exact = row['scale']**2 * n_exact * p * (1 - p)
  return dict(
      scale_denominator=j, scale=row['scale'], epsilon=eps,
      num_trials=row['num_trials'], error=row['error'],
      exact_epsilon=eps_exact, conservatism=eps / eps_exact,
      largest_shift_worst=largest_worst, num_trials_exact=n_exact,
      error_exact=err_exact,
      ratio_exact_tight=err_exact / g['error_tight'])


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Calibrated Gaussian and Binomial errors, exact privacy, sampling."""
  gauss = _gaussian(cfg)
  ctx.say('Gaussian calibrated')
  rows = [_binomial_row(cfg, d, j, gauss[eps]) for d in cfg.dimensions
          for j in cfg.scale_denominators for eps in cfg.epsilons]
  exact = [_exact_row(cfg, r, gauss[r['epsilon']]) for r in rows
           if r['dim'] == 1]
  ctx.say('exact divergences done')
  return Results(dataset=dict(name='none: an abstract query (its '
                              'sensitivities only)'),
                 sensitivities={str(d): list(sensitivities(d))
                                for d in cfg.dimensions},
                 gaussian=list(gauss.values()), rows=rows, exact=exact,
                 validation=_validate_sampling(cfg, rows),
                 summary=summary(rows, exact),
                 exact_checks=exact_checks(rows, exact))


def summary(rows, exact) -> dict[str, Any]:
  """Ranges quoted by the report (all analytic: no sampling)."""
  finest = max(r['scale_denominator'] for r in rows)
  coarsest = min(r['scale_denominator'] for r in rows)
  span = lambda xs: [min(xs), max(xs)] if xs else None
  at = lambda j, key: [r[key] for r in rows if r['scale_denominator'] == j
                       and r[key] is not None]
  return dict(
      finest_scale=1 / finest, coarsest_scale=1 / coarsest,
      ratio_tight_coarsest=span(at(coarsest, 'ratio_tight')),
      ratio_tight_finest=span(at(finest, 'ratio_tight')),
      ratio_classical_finest=span(at(finest, 'ratio_classical')),
      exact_ratio_finest=span([e['ratio_exact_tight'] for e in exact
                               if e['scale_denominator'] == finest]),
      conservatism=span([e['conservatism'] for e in exact]))


def _pair(values) -> str:
  return '-' if values is None else f'{values[0]:.4g} to {values[1]:.4g}'


def exact_checks(rows, exact) -> list[dict[str, Any]]:
  """Deterministic checks: calibrated formulas against each other.

  No random draw enters them, so they pass or fail; they are not claims
  under the seed rule.
  """
  curves: dict[tuple, list] = {}
  for r in rows:
    curves.setdefault((r['dim'], r['epsilon']), []).append(r)
  monotone = all(
      all(b['ratio_tight'] <= a['ratio_tight'] * (1 + 1e-9)
          for a, b in zip(rs, rs[1:]))
      for rs in (sorted(v, key=lambda r: r['scale_denominator'])
                 for v in curves.values()))
  v = summary(rows, exact)
  checks = [
      dict(check='as s shrinks the Binomial error approaches the Gaussian: '
           'Binomial / tight Gaussian error ratio non-increasing in 1/s at '
           'every eps and d', passed=monotone,
           detail=f"ratio {_pair(v['ratio_tight_coarsest'])} at s = "
           f"{v['coarsest_scale']:.4g}, {_pair(v['ratio_tight_finest'])} at "
           f"s = {v['finest_scale']:.4g}"
           + (f"; vs the classical bound (eps <= 1) "
              f"{_pair(v['ratio_classical_finest'])}"
              if v['ratio_classical_finest'] else '')),
      dict(check="Theorem 1's epsilon at the calibrated N is at most the "
           'target at every point',
           passed=all(r['epsilon_theorem1'] <= r['epsilon'] * (1 + 1e-12)
                      for r in rows),
           detail=f'{len(rows)} points')]
  if exact:
    checks += [
        dict(check='Theorem 1 is conservative (d = 1): exact epsilon at its '
             'N below the target at every point',
             passed=all(e['exact_epsilon'] < e['epsilon'] for e in exact),
             detail=f"target / exact {_pair(v['conservatism'])}; with N "
             f"calibrated exactly the error at s = {v['finest_scale']:.4g} "
             f"is {_pair(v['exact_ratio_finest'])} x the tight Gaussian's"),
        dict(check='the largest lattice shift is the worst case at every '
             'point (d = 1)',
             passed=all(e['largest_shift_worst'] for e in exact),
             detail=f'{len(exact)} points')]
  return checks
