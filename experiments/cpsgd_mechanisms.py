"""Error vs epsilon of the Gaussian and Binomial mechanisms (cpSGD, Fig. 1).

Agarwal et al. (NeurIPS 2018), Sec. 2.2 and Fig. 1: release a d-dimensional
query whose neighbouring values differ by a vector of the lattice s Z^d with
L2 and L_inf norm at most 1 (so L1 at most sqrt(d)); for d = 1 all three
sensitivities are 1, as in Theorem 1's test vector. For every target
(epsilon, delta):

* Binomial mechanism, scale s = 1/j: the smallest integer N such that
  Theorem 1 holds (N p (1-p) >= max(23 ln(10 d / delta), 2 Delta_inf / s))
  and ``binomial_epsilon(N, p, s, delta, d, ...) <= epsilon``
  (``accounting.calibrate_binomial_trials``); its error is s^2 N p (1-p) per
  coordinate (d times that in all).
* Gaussian mechanism: sigma^2 per coordinate, sigma calibrated (a) by the
  classical bound sigma = Delta_2 sqrt(2 ln(1.25/delta)) / epsilon
  (``accounting.classical_gaussian_stddev``, proved for epsilon <= 1 only, so
  shown there only) and (b) tightly, with
  ``accounting.calibrate_gaussian_stddev`` (``gaussian_protocol_event`` under
  the PLD accountant, default neighbouring relation: sums at L2 distance
  <= Delta_2).

The paper's claim: as s shrinks (N p (1-p) grows at fixed error), the
Binomial curve approaches the Gaussian one. Two checks beyond the figure:

* Exact privacy (d = 1): the exact epsilon of the Binomial mechanism at the
  Theorem-1 N, from the hockey-stick divergence of Bin(N, p) and its shift by
  j = Delta / s lattice steps (``accounting.binomial_exact_epsilon``: both
  directions, all smaller shifts checked too), and the smallest N whose
  exact epsilon meets the target
  (``accounting.calibrate_binomial_exact_trials``): how conservative
  Theorem 1 is.
* Sampling: at a few points, Bin(N, p) is sampled with
  ``dpjax.noise.binomial`` and the measured error is compared with
  s^2 N p (1-p).
"""

import math
import sys
import time
from typing import Any

import jax
from matplotlib import ticker
import matplotlib.pyplot as plt
import numpy as np

from dpjax import accounting
from dpjax import noise
from experiments.common import report as report_lib

NAME = 'cpsgd_mechanisms'
DESCRIPTION = ('error vs epsilon of the Gaussian and Binomial mechanisms at '
               'several scales (cpSGD Fig. 1)')
MODES = {
    'quick': dict(epsilons=[0.25, 0.5, 1.0, 2.0, 4.0],
                  validate_epsilons=[1.0], samples=4000),
    'full': dict(epsilons=[0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0,
                           6.0, 8.0],
                 validate_epsilons=[0.5, 1.0, 4.0], samples=20000),
}
DEFAULTS = dict(seed=0, delta=1e-5, p=0.5, scale_denominators=[1, 4, 16, 64],
                dims=[1, 100], accountant='pld')


def config(mode: str, epsilons=None, delta=None, dataset=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration.

  ``epsilons`` replaces the target-epsilon sweep, ``delta`` the delta (both
  mechanisms), ``seed`` keys the sampling check. There is no dataset: the
  query is abstract (only its sensitivities matter).
  """
  if mode not in MODES:
    raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
  if dataset is not None:
    raise ValueError(f'{NAME} compares noise distributions on an abstract '
                     'query and uses no data; drop --dataset')
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  if epsilons is not None:
    cfg['epsilons'] = sorted(set(float(e) for e in epsilons))
    cfg['validate_epsilons'] = [e for e in cfg['validate_epsilons']
                                if e in cfg['epsilons']] or [cfg['epsilons'][
                                    len(cfg['epsilons']) // 2]]
  if delta is not None:
    cfg['delta'] = float(delta)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  _check(cfg)
  return cfg


def _check(cfg: dict[str, Any]) -> None:
  if not (isinstance(cfg['seed'], int) and cfg['seed'] >= 0):
    raise ValueError(f"Expected seed={cfg['seed']} to be an integer >= 0.")
  if not 0 < cfg['delta'] < 1:
    raise ValueError(f"Expected delta={cfg['delta']} in (0, 1).")
  if not 0 < cfg['p'] < 1:
    raise ValueError(f"Expected p={cfg['p']} in (0, 1).")
  if not cfg['epsilons'] or any(not e > 0 for e in cfg['epsilons']):
    raise ValueError(f"Expected epsilons={cfg['epsilons']} to be > 0.")
  for e in cfg['validate_epsilons']:
    if e not in cfg['epsilons']:
      raise ValueError(f'Expected validate_epsilons entry {e} to be one of '
                       f"epsilons={cfg['epsilons']}.")
  for name in ('scale_denominators', 'dims'):
    if not cfg[name] or any(not isinstance(v, int) or isinstance(v, bool)
                            or v < 1 for v in cfg[name]):
      raise ValueError(f'Expected {name}={cfg[name]} to be a non-empty list '
                       'of integers >= 1 (scales are s = 1/j).')
  if not (isinstance(cfg['samples'], int) and cfg['samples'] >= 2):
    raise ValueError(f"Expected samples={cfg['samples']} to be an integer "
                     '>= 2.')
  if cfg['accountant'] not in accounting.ACCOUNTANTS:
    raise ValueError(f"Expected accountant={cfg['accountant']!r} to be one "
                     f'of {accounting.ACCOUNTANTS}.')


def sensitivities(dimension: int) -> tuple[float, float, float]:
  """(L1, L2, L_inf) of a change of L2 and L_inf norm <= 1 in d dimensions."""
  return math.sqrt(dimension), 1.0, 1.0


# ------------------------------------------------------------------- run


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


# ---------------------------------------------------------------- report


def plot(results: dict[str, Any], out_dir: str) -> list[str]:
  cfg = results['config']
  dims = cfg['dims']
  gauss = results['gaussian']
  fig, axes = plt.subplots(1, len(dims) + 1, figsize=(4.2 * (len(dims) + 1),
                                                      3.6))
  eps_g = [g['epsilon'] for g in gauss]
  for ax, d in zip(axes, dims):
    for j in cfg['scale_denominators']:
      rs = [r for r in results['rows']
            if r['dim'] == d and r['scale_denominator'] == j]
      ax.plot([r['epsilon'] for r in rs], [r['error'] for r in rs],
              marker='o', ms=3, label=f'Binomial s=1/{j}')
    ax.set_title(f'd = {d}, Theorem 1 (delta={cfg["delta"]:g})')
  for ax in axes:
    ax.plot(eps_g, [g['error_tight'] for g in gauss], 'k-', lw=2,
            label='Gaussian (tight, PLD)')
    cls = [g for g in gauss if g['error_classical'] is not None]
    if cls:
      ax.plot([g['epsilon'] for g in cls], [g['error_classical'] for g in cls],
              'k--', label='Gaussian (classical)')
  ax = axes[-1]
  for j in cfg['scale_denominators']:
    es = [e for e in results['exact'] if e['scale_denominator'] == j]
    line, = ax.plot([e['exact_epsilon'] for e in es],
                    [e['error'] for e in es], marker='o', ms=3,
                    label=f'Bin s=1/{j}, Thm-1 N at exact eps')
    ax.plot([e['epsilon'] for e in es], [e['error_exact'] for e in es],
            ls=':', marker='x', ms=4, color=line.get_color(),
            label=f'Bin s=1/{j}, exact-calibrated N')
  ax.set_title('d = 1, exact (hockey-stick) epsilon')
  for ax in axes:
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter('%g'))
    ax.set_xlabel('epsilon')
    ax.set_ylabel('error per coordinate (variance)')
    if ax is not axes[-1]:
      ax.set_xticks(eps_g)
    ax.legend(fontsize=6)
  return [report_lib.save_figure(fig, out_dir, 'error_vs_epsilon.png')]


ROW_COLUMNS = [('epsilon', 'eps'), ('scale', 's'), ('num_trials', 'N'),
               ('condition_bound', 'N set by Thm 1 condition'),
               ('error', 'Binomial s^2 N p(1-p)'),
               ('gaussian_error_tight', 'Gaussian sigma^2 (tight)'),
               ('gaussian_error_classical', 'Gaussian sigma^2 (classical)'),
               ('ratio_tight', 'Bin / Gauss tight'),
               ('ratio_classical', 'Bin / Gauss classical')]
EXACT_COLUMNS = [('epsilon', 'target eps'), ('scale', 's'),
                 ('num_trials', 'N (Thm 1)'),
                 ('exact_epsilon', 'exact eps at that N'),
                 ('conservatism', 'target / exact'),
                 ('num_trials_exact', 'N (exact)'),
                 ('error_exact', 'error (exact N)'),
                 ('ratio_exact_tight', 'exact-N error / Gauss tight')]
VALIDATION_COLUMNS = [('dim', 'd'), ('epsilon', 'eps'), ('scale', 's'),
                      ('num_trials', 'N'), ('vectors', 'draws of d coords'),
                      ('measured', 'measured total error'), ('sem', 'SEM'),
                      ('formula', 'd s^2 N p(1-p)'), ('z', 'z'),
                      ('sample_seconds', 'sampling s')]


def _pair(values) -> str:
  return f'{values[0]:.4g} to {values[1]:.4g}'


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg, v = results['config'], results['verdicts']
  pngs = plot(results, out_dir)
  yes = lambda b: '**yes**' if b else '**no**'
  lines = [
      f'## {NAME} ({cfg["mode"]})', '',
      'No data: an abstract d-dimensional query whose neighbouring values '
      'differ by a lattice vector of L2 and L_inf norm <= 1 (L1 <= sqrt(d); '
      'd = 1: all three are 1, as in Theorem 1\'s test vector). '
      f"delta = {cfg['delta']:g}, p = {cfg['p']:g}, scales s = 1/j for j in "
      f"{cfg['scale_denominators']}. Binomial: smallest N with Theorem 1's "
      'epsilon <= target and its condition N p(1-p) >= max(23 ln(10d/delta), '
      '2 Delta_inf/s); error s^2 N p(1-p) per coordinate. Gaussian: sigma^2 '
      'with sigma from the classical bound (eps <= 1 only) and from the PLD '
      'accountant (tight). Errors are per coordinate (total = d times).', '']
  for d in cfg['dims']:
    lines += [f'Error per coordinate, d = {d}:', '',
              report_lib.markdown_table(
                  [r for r in results['rows'] if r['dim'] == d], ROW_COLUMNS),
              '']
  lines += [
      'd = 1, exact privacy of the Binomial mechanism (hockey-stick '
      'divergence of Bin(N, p) against its shift by 1/s lattice steps, both '
      'directions):', '',
      report_lib.markdown_table(results['exact'], EXACT_COLUMNS), '',
      f"Sampling check ({cfg['samples']} coordinates per point, "
      'dpjax.noise.binomial):', '',
      report_lib.markdown_table(results['validation'], VALIDATION_COLUMNS), '',
      f"- As s shrinks, the Binomial error approaches the Gaussian one "
      f"(Binomial / tight Gaussian ratio non-increasing as s shrinks, at "
      f"every eps and d): {yes(v['ratio_decreases_as_s_shrinks'])}. Ratio "
      f"{_pair(v['ratio_tight_coarsest'])} at s = {v['coarsest_scale']:g}, "
      f"{_pair(v['ratio_tight_finest'])} at s = {v['finest_scale']:.4g}"
      + (f"; against the classical Gaussian bound (eps <= 1) "
         f"{_pair(v['ratio_classical_finest'])} at s = "
         f"{v['finest_scale']:.4g}" if v['ratio_classical_finest'] else '')
      + '. Under Theorem 1 the limit is not the tight Gaussian: its leading '
      'term is the classical bound, which is loose at large eps.',
      f"- Theorem 1 is conservative (d = 1): at its N the exact epsilon is "
      f"{_pair(v['conservatism'])} times smaller than the target; with N "
      f"calibrated exactly, the Binomial error at s = {v['finest_scale']:.4g}"
      f" is {_pair(v['exact_ratio_finest'])} times the tight Gaussian's. "
      f"The largest shift was the worst case at every point: "
      f"{yes(v['largest_shift_worst'])}.",
      f"- Measured error matches s^2 N p(1-p) within sampling error (|z| <= 3 "
      f"at >= 95% of the points): "
      f"{yes(v['sampling_within_3sem'] >= 0.95 * v['sampling_points'])} "
      f"({v['sampling_within_3sem']} of {v['sampling_points']} points).", '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
