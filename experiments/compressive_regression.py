"""Gradient sparsification + the compressive mechanism (Farokhi, Figs. 1-2).

Private full-batch gradient descent on linear regression (Alg. 3): theta_1 =
0, theta_{k+1} = theta_k - rho_k M(g_k), rho_k = 0.1 / sqrt(k), k = 1..T-1,
where g_k is the gradient of f(theta) = mean squared error over the n
training examples. Assumption 1 is enforced per example: each example's
gradient 2 (theta^T x_i - y_i) x_i (closed form) is clipped coordinatewise to
[-xi, xi] before averaging, for every private method. The metric is the
relative loss f(theta_k) / f(theta*) - 1, theta* the non-private
least-squares solution (float64 lstsq).

Methods (one curve each):

* ``gd``: non-private, full unclipped gradient.
* ``top_k``: non-private, ``keep_top_k`` of the full gradient (eq. 2).
* ``compressive``: Alg. 2 with the certified calibration (Laplace scale
  Delta(Psi) / eps given the sensing matrix; ``dpjax.transforms.compressive_mechanism``).
* ``compressive_paper``: Alg. 2 as printed (scale sqrt(p) / eps); its realized
  per-step epsilon given Psi (``CompressiveRelease.epsilon``) is recorded.
* ``laplace``: the unsparsified O(n_theta) baseline the paper compares
  against, Laplace scale 2 xi n_theta / eps on every coordinate (sensitivity
  of the clipped mean for ANY two inputs, as the compressive mechanism uses).
* ``laplace_mean``: unsparsified Laplace with the replace-one sensitivity of
  the mean of per-example clipped gradients, 2 xi n_theta / n. A stronger
  baseline the paper does not consider. The compressive mechanism cannot use
  the 1/n: top-k of the mean can change its support between neighbouring
  datasets, so its input bound is 2 xi kappa whatever n is.

Privacy epsilon is per step (per release), as in the paper; T - 1 releases
compose (basic composition and PLD at ``delta``).

Modes: quick (3 seeds, per-step eps in {1, 10, 100, 1000, 10^4}, kappa in
{1, 3, 5}; about 75 s on 2 CPU cores) and full (20 seeds, eps from 0.1 to
10^5, kappa in {1, 2, 3, 5, 8, 10, 15, 20}). CoSaMP dominates the cost:
6 (kappa + 1) iterations per step, each a small Cholesky solve.

Data: features scaled per column to [-1, 1] by the max-abs of the training
set, a constant 1 feature for the intercept, target scaled to [-1, 1] by its
max-abs. This scaling reads the data non-privately, as the paper does
(Assumption 1 presumes known bounds). The whole loaded set (train and test
splits of ``experiments.common.data``) is the training set D: the paper's
objective is a training loss, and no test set is used.
"""

import functools
import math
import sys
import time
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import dpjax
from dpjax import accounting
from dpjax import noise as noise_lib
from experiments.common import data as data_lib
from experiments.common import report as report_lib

NAME = 'compressive_regression'
DESCRIPTION = ('sparsified private GD with the compressive mechanism on '
               'regression (Farokhi, Figs. 1-2)')
MODES = {
    'quick': dict(num_seeds=3, kappas=[1, 3, 5],
                  epsilons=[1.0, 10.0, 100.0, 1000.0, 10000.0]),
    'full': dict(num_seeds=20, kappas=[1, 2, 3, 5, 8, 10, 15, 20],
                 epsilons=[0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0,
                           10000.0, 100000.0]),
}
DEFAULTS = dict(dataset='synthetic_regression', seed=0, n=10_000, steps=1000,
                learning_rate=0.1, kappa=5, num_measurements=20, xi=2.0,
                eps_small=1.0, eps_large=1000.0, delta=1e-5,
                measurements_per_kappa=4, pld_max_epsilon=10.0)
REGRESSION_DATASETS = ('synthetic_regression', 'diabetes')
METHODS = ('gd', 'top_k', 'compressive', 'compressive_paper', 'laplace',
           'laplace_mean')
PRIVATE = METHODS[2:]
COMPRESSIVE = ('compressive', 'compressive_paper')
BASELINES = ('laplace', 'laplace_mean')
LABELS = {
    'gd': 'GD (non-private)',
    'top_k': 'top-k GD (non-private)',
    'compressive': 'compressive, certified',
    'compressive_paper': "compressive, paper's sqrt(p)/eps",
    'laplace': 'Laplace 2 xi n_theta / eps',
    'laplace_mean': 'Laplace 2 xi n_theta / (n eps)',
}
COLORS = {'gd': 'k', 'top_k': 'C7', 'compressive': 'C0',
          'compressive_paper': 'C1', 'laplace': 'C2', 'laplace_mean': 'C3'}


def config(mode: str, epsilons=None, dataset=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration.

  ``epsilons`` (per step) replaces the sweep; unless ``eps_small`` /
  ``eps_large`` are given too, the figures then show its smallest and
  largest values.
  """
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  if epsilons is not None:
    cfg['epsilons'] = sorted(set(float(e) for e in epsilons))
    cfg['eps_small'] = overrides.pop('eps_small', None) or cfg['epsilons'][0]
    cfg['eps_large'] = overrides.pop('eps_large', None) or cfg['epsilons'][-1]
  if dataset is not None:
    cfg['dataset'] = dataset
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  if not (cfg['dataset'] in REGRESSION_DATASETS or
          cfg['dataset'].startswith(data_lib.CSV_PREFIX)):
    raise ValueError(
        f"{NAME} needs a regression dataset: {', '.join(REGRESSION_DATASETS)}"
        f" or {data_lib.CSV_PREFIX}PATH, not {cfg['dataset']!r}")
  if cfg['eps_small'] not in cfg['epsilons'] or (
      cfg['eps_large'] not in cfg['epsilons']):
    raise ValueError(f"{NAME}: eps_small={cfg['eps_small']} and eps_large="
                     f"{cfg['eps_large']} must be in the epsilon sweep "
                     f"{cfg['epsilons']}")
  if not cfg['eps_small'] < cfg['eps_large']:
    raise ValueError(f"{NAME} compares a small and a large epsilon; got "
                     f"eps_small={cfg['eps_small']} >= eps_large="
                     f"{cfg['eps_large']} (give at least two --epsilons)")
  if not (isinstance(cfg['steps'], int) and cfg['steps'] >= 2):
    raise ValueError(f"Expected steps={cfg['steps']} to be an integer >= 2.")
  for key in ('num_seeds', 'n', 'kappa', 'num_measurements'):
    _check_positive_int(key, cfg[key])
  for eps in cfg['epsilons']:
    if not eps > 0:
      raise ValueError(f'Expected epsilon={eps} > 0.')
  return cfg


def _check_positive_int(name, value):
  if not isinstance(value, int) or value <= 0:
    raise ValueError(f'Expected {name}={value} to be an integer > 0.')


# ------------------------------------------------------------------ data


def load_problem(cfg) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
  """(X [n, n_theta] float32 with intercept, y [n] float32, dataset info)."""
  name = cfg['dataset']
  options = {}
  if name == 'synthetic_regression' or name.startswith(data_lib.CSV_PREFIX):
    options['n_samples'] = cfg['n']
  ds = data_lib.load(name, seed=cfg['seed'], **options)
  info = report_lib.dataset_info(ds)
  x = np.concatenate([ds.x_train, ds.x_test]).astype(np.float64)
  y = np.concatenate([ds.y_train, ds.y_test]).astype(np.float64)
  # The whole set is D: record it as such (no test set is used).
  info.update(n_train=len(x), n_test=0)
  scale = np.abs(x).max(axis=0)
  x = x / np.where(scale > 0, scale, 1.0)
  y = y / max(np.abs(y).max(), 1e-12)
  x = np.concatenate([np.ones((len(x), 1)), x], axis=1)
  return x.astype(np.float32), y.astype(np.float32), info


def least_squares(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
  """theta* and f(theta*) in float64."""
  x64, y64 = x.astype(np.float64), y.astype(np.float64)
  theta, *_ = np.linalg.lstsq(x64, y64, rcond=None)
  return theta, float(np.mean((x64 @ theta - y64) ** 2))


# --------------------------------------------------------------- training


@functools.lru_cache(maxsize=None)
def _trainer(method: str, kappa: int, num_measurements: int, steps: int,
             xi: float, learning_rate: float):
  """jit(vmap_eps(vmap_seed(run))): (x, y, keys[S], eps[E]) ->
  (losses [E, S, steps], realized eps [E, S, steps - 1])."""

  def run(x, y, key, eps):
    n, d = x.shape

    def loss(theta):
      return jnp.mean(jnp.square(x @ theta - y))

    def clipped_mean_grad(theta):  # Assumption 1, per example
      residual = x @ theta - y
      per_example = 2 * residual[:, None] * x
      return jnp.clip(per_example, -xi, xi).mean(axis=0)

    def full_grad(theta):
      return 2 * (x.T @ (x @ theta - y)) / n

    def step(theta, k):
      step_key = jax.random.fold_in(key, k)
      realized = jnp.zeros([], x.dtype)
      if method == 'gd':
        update = full_grad(theta)
      elif method == 'top_k':
        update = dpjax.recovery.keep_top_k(full_grad(theta), kappa)
      elif method in COMPRESSIVE:
        release = dpjax.transforms.compressive_mechanism(
            step_key, clipped_mean_grad(theta), kappa, num_measurements, eps,
            xi, 'certified' if method == 'compressive' else 'paper')
        update, realized = release.value, release.epsilon
      else:
        sensitivity = 2 * xi * d / (n if method == 'laplace_mean' else 1)
        update = clipped_mean_grad(theta) + noise_lib.laplace(
            step_key, (d,), scale=sensitivity / eps, dtype=x.dtype)
        realized = eps
      rate = learning_rate / jnp.sqrt(k.astype(x.dtype))
      theta = theta - rate * update
      return theta, (loss(theta), realized)

    theta1 = jnp.zeros(x.shape[1], x.dtype)
    _, (losses, realized) = jax.lax.scan(
        step, theta1, jnp.arange(1, steps, dtype=jnp.int32))
    return jnp.concatenate([loss(theta1)[None], losses]), realized

  return jax.jit(jax.vmap(jax.vmap(run, (None, None, 0, None)),
                          (None, None, None, 0)))


def train(x, y, method, keys, epsilons, cfg, kappa=None, measurements=None):
  """Losses [E, S, T] and realized per-step eps [E, S, T - 1] as numpy."""
  fn = _trainer(method, int(kappa or cfg['kappa']),
                int(measurements or cfg['num_measurements']),
                int(cfg['steps']), float(cfg['xi']),
                float(cfg['learning_rate']))
  losses, realized = fn(jnp.asarray(x), jnp.asarray(y), keys,
                        jnp.asarray(epsilons, jnp.float32))
  return np.asarray(losses, np.float64), np.asarray(realized, np.float64)


def _curve_points(steps: int, num: int = 80) -> list[int]:
  """Log-spaced iterations 1..T (1-based) for the stored curves."""
  return sorted(set(int(round(v)) for v in np.geomspace(1, steps, num)))


def _stats(values: np.ndarray) -> tuple[float, float]:
  """(mean, SEM) over the last axis."""
  values = np.asarray(values, np.float64)
  sem = values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else 0.
  return float(values.mean()), float(sem)


def _privacy(eps: float, releases: int, delta: float,
             pld_max_epsilon: float) -> dict[str, float]:
  """Total epsilon of ``releases`` eps-DP Laplace releases.

  Basic composition always; PLD (dp_accounting, at ``delta``) only up to
  ``pld_max_epsilon`` per step: above it dp_accounting's PLD takes seconds
  to minutes (and fails at eps = 1000) while gaining under 1% over basic
  composition (eps = 100: 99121 vs 99900 over 999 releases).
  """
  total = dp_accounting.SelfComposedDpEvent(accounting.laplace_event(eps),
                                            releases)
  basic, _ = accounting.basic_composition(total)
  pld = None
  if eps <= pld_max_epsilon:
    pld = accounting.epsilon(total, delta, accountant='pld')
  return dict(eps_total_basic=basic, eps_total_pld=pld)


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  del out_dir
  start = time.time()

  def say(message):
    if progress:
      print(f'[{NAME}] {message} ({time.time() - start:.0f} s)',
            file=sys.stderr, flush=True)

  x, y, dataset = load_problem(cfg)
  n, d = x.shape
  if cfg['kappa'] > d:
    raise ValueError(f"Expected kappa={cfg['kappa']} <= n_theta={d}.")
  theta_star, f_star = least_squares(x, y)
  if not f_star > 0:
    raise ValueError(f'f(theta*)={f_star}: the data is fit exactly, so the '
                     'relative loss is undefined')
  per_example = 2 * (x @ theta_star - y)[:, None] * x
  clipped_at_star = float(np.mean(np.abs(per_example) > cfg['xi']))
  clipped_at_zero = float(np.mean(np.abs(2 * y[:, None] * x) > cfg['xi']))
  seeds = list(range(cfg['seed'], cfg['seed'] + cfg['num_seeds']))
  keys = jax.vmap(jax.random.key)(jnp.asarray(seeds, jnp.uint32))
  releases = cfg['steps'] - 1
  epsilons = [float(e) for e in cfg['epsilons']]
  points = _curve_points(cfg['steps'])
  shown = (cfg['eps_small'], cfg['eps_large'])
  say(f'data {dataset["name"]}: n={n}, n_theta={d}, f(theta*)={f_star:.4g}')

  final, curves, realized_rows = [], [], []
  losses, realized_by_eps = {}, {}
  for method in METHODS:
    private = method in PRIVATE
    eps_list = epsilons if private else [1.0]  # non-private: eps unused
    # gd and top_k are deterministic: one run stands for every seed.
    loss, realized = train(x, y, method, keys if private else keys[:1],
                           eps_list, cfg)
    rel = loss / f_star - 1
    say(f'{method} done')
    for i, eps in enumerate(eps_list):
      row_eps = eps if private else None
      mean, sem = _stats(rel[i, :, -1])
      row = dict(method=method, epsilon=row_eps, kappa=cfg['kappa'],
                 measurements=cfg['num_measurements'],
                 final_rel_loss_mean=mean, final_rel_loss_sem=sem,
                 seeds=rel.shape[1])
      final.append(row)
      if not private or eps in shown:
        sub = rel[i][:, np.asarray(points) - 1]  # [seeds, points]
        sem = (sub.std(axis=0, ddof=1) / math.sqrt(len(sub)) if len(sub) > 1
               else np.zeros(len(points)))
        for e in ([eps] if private else list(shown)):
          curves.append(dict(method=method, epsilon=e, iterations=points,
                             mean=[float(v) for v in sub.mean(axis=0)],
                             sem=[float(v) for v in sem]))
      if method in COMPRESSIVE:
        realized_by_eps[(method, eps)] = float(realized[i].mean())
      if method == 'compressive_paper':
        per_seed_total = realized[i].sum(axis=1)
        realized_rows.append(dict(
            epsilon=eps, releases=releases,
            realized_mean=float(realized[i].mean()),
            realized_max=float(realized[i].max()),
            realized_total_mean=float(per_seed_total.mean()),
            realized_total_max=float(per_seed_total.max()),
            claimed_total=releases * eps,
            ratio=float(per_seed_total.mean() / (releases * eps))))
    losses[method] = rel[:, :, -1]

  privacy = []
  for eps in epsilons:
    row = dict(epsilon=eps, releases=releases, delta=cfg['delta'])
    row.update(_privacy(eps, releases, cfg['delta'], cfg['pld_max_epsilon']))
    privacy.append(row)
  for row in realized_rows:  # upper bound: every step at the largest eps seen
    row.update({f'realized_{k}': v for k, v in _privacy(
        row['realized_max'], releases, cfg['delta'],
        cfg['pld_max_epsilon']).items()})
  say('accounting done')

  kappa_rows = []
  for kappa in cfg['kappas']:
    if kappa > d:
      continue
    p = max(3, cfg['measurements_per_kappa'] * kappa)
    loss, _ = train(x, y, 'top_k', keys[:1], [1.0], cfg, kappa, p)
    mean, sem = _stats(loss[0, :, -1] / f_star - 1)
    for eps in shown:
      kappa_rows.append(dict(method='top_k', epsilon=eps, kappa=kappa,
                             measurements=None, final_rel_loss_mean=mean,
                             final_rel_loss_sem=0.0, seeds=1))
    for method in COMPRESSIVE:
      if kappa == cfg['kappa'] and p == cfg['num_measurements']:
        rel_final = losses[method][[epsilons.index(e) for e in shown]]
        realized_mean = [realized_by_eps.get((method, e)) for e in shown]
      else:
        loss, realized = train(x, y, method, keys, list(shown), cfg, kappa, p)
        rel_final = loss[:, :, -1] / f_star - 1
        realized_mean = [float(realized[i].mean()) for i in range(2)]
      for i, eps in enumerate(shown):
        mean, sem = _stats(rel_final[i])
        kappa_rows.append(dict(
            method=method, epsilon=eps, kappa=kappa, measurements=p,
            final_rel_loss_mean=mean, final_rel_loss_sem=sem,
            realized_eps_mean=realized_mean[i], seeds=len(seeds)))
    say(f'kappa={kappa} done')

  return dict(experiment=NAME, config=cfg, dataset=dataset, seeds=seeds,
              n=n, n_theta=d, f_star=f_star,
              rel_loss_at_zero=float(np.mean(y.astype(np.float64) ** 2) /
                                     f_star - 1),
              theta_star_norm=float(np.linalg.norm(theta_star)),
              clipped_fraction_at_theta_star=clipped_at_star,
              clipped_fraction_at_zero=clipped_at_zero,
              final=final, curves=curves, privacy=privacy,
              realized=realized_rows, kappa_sweep=kappa_rows,
              verdicts=verdicts(final, cfg),
              wall_seconds=round(time.time() - start, 1))


# ---------------------------------------------------------------- verdicts


def _row(final, method, eps):
  return next(r for r in final if r['method'] == method and (
      r['epsilon'] == eps or method not in PRIVATE))


def compare(final, method, baseline, eps) -> dict[str, Any]:
  """Sparsified method vs an unsparsified baseline at one per-step eps."""
  a, b = _row(final, method, eps), _row(final, baseline, eps)
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


# ------------------------------------------------------------------ report


def plot_iterations(results, out_dir) -> str:
  cfg = results['config']
  shown = (cfg['eps_small'], cfg['eps_large'])
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
  for ax, eps in zip(axes, shown):
    for curve in results['curves']:
      if curve['epsilon'] != eps:
        continue
      it = np.asarray(curve['iterations'])
      mean, sem = np.asarray(curve['mean']), np.asarray(curve['sem'])
      floor = 1e-12
      color = COLORS[curve['method']]
      ax.plot(it, np.maximum(mean, floor), color=color,
              ls='--' if curve['method'] == 'top_k' else '-',
              label=LABELS[curve['method']], lw=1.2)
      ax.fill_between(it, np.maximum(mean - sem, floor),
                      np.maximum(mean + sem, floor), alpha=0.25, color=color)
    ax.set_yscale('log')
    ax.set_xscale('log')
    ax.set_xlabel('iteration k')
    ax.set_title(f'eps = {eps:g} per step, kappa = {cfg["kappa"]}, '
                 f'p = {cfg["num_measurements"]}')
  axes[0].set_ylabel('f(theta_k) / f(theta*) - 1')
  axes[0].legend(fontsize=6)
  return report_lib.save_figure(fig, out_dir, 'relative_loss_vs_iteration.png')


def plot_kappa(results, out_dir) -> str:
  cfg = results['config']
  shown = (cfg['eps_small'], cfg['eps_large'])
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
  for ax, eps in zip(axes, shown):
    ax.axhline(results['rel_loss_at_zero'], color='C7', ls='-.', lw=0.8,
               label='theta = 0 (no training)')
    for method in ('top_k',) + COMPRESSIVE:
      rows = [r for r in results['kappa_sweep']
              if r['method'] == method and r['epsilon'] == eps]
      ax.errorbar([r['kappa'] for r in rows],
                  [max(r['final_rel_loss_mean'], 1e-12) for r in rows],
                  yerr=[r['final_rel_loss_sem'] for r in rows], fmt='o-',
                  color=COLORS[method], capsize=2, label=LABELS[method] +
                  ('' if method == 'top_k' else ', p = 4 kappa'))
    for method in ('gd',) + BASELINES:
      row = _row(results['final'], method, eps)
      ax.axhline(max(row['final_rel_loss_mean'], 1e-12),
                 color=COLORS[method], ls=':',
                 label=LABELS[method] + ' (no sparsification)')
    ax.set_yscale('log')
    ax.set_xlabel('kappa')
    ax.set_title(f'eps = {eps:g} per step, T = {cfg["steps"]}')
  axes[0].set_ylabel(f'relative loss at T = {cfg["steps"]}')
  axes[0].legend(fontsize=6)
  return report_lib.save_figure(fig, out_dir, 'relative_loss_vs_kappa.png')


def _pm(mean, sem):
  return f'{report_lib.fmt(mean)} ± {report_lib.fmt(sem, 2)}'


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg = results['config']
  pngs = [plot_iterations(results, out_dir), plot_kappa(results, out_dir)]
  final = results['final']
  eps_small, eps_large = cfg['eps_small'], cfg['eps_large']
  releases = cfg['steps'] - 1
  seeds = results['seeds']

  # Final relative loss per method at every eps (the sweep), mean ± SEM.
  sweep_rows = []
  for method in METHODS:
    row = dict(method=method)
    for eps in cfg['epsilons']:
      r = _row(final, method, eps)
      row[f'e{eps}'] = _pm(r['final_rel_loss_mean'], r['final_rel_loss_sem'])
    sweep_rows.append(row)
  sweep_cols = [('method', 'method')] + [
      (f'e{e}', f'eps={e:g}') for e in cfg['epsilons']]

  shown_rows = []
  for method in METHODS:
    a, b = _row(final, method, eps_small), _row(final, method, eps_large)
    shown_rows.append(dict(
        method=method, private='yes' if method in PRIVATE else 'no',
        small=_pm(a['final_rel_loss_mean'], a['final_rel_loss_sem']),
        large=_pm(b['final_rel_loss_mean'], b['final_rel_loss_sem'])))
  shown_cols = [('method', 'method'), ('private', 'private'),
                ('small', f'eps={eps_small:g}'),
                ('large', f'eps={eps_large:g}')]

  privacy_cols = [('epsilon', 'eps per step'), ('releases', 'releases'),
                  ('eps_total_basic', 'total (basic)'),
                  ('eps_total_pld', 'total (PLD)'), ('delta', 'delta')]
  realized_cols = [('epsilon', 'claimed eps per step'),
                   ('realized_mean', 'realized mean'),
                   ('realized_max', 'realized max'),
                   ('claimed_total', 'claimed total (basic)'),
                   ('realized_total_mean', 'realized total (basic, mean)'),
                   ('realized_total_max', 'realized total (max over seeds)'),
                   ('ratio', 'realized / claimed'),
                   ('realized_eps_total_pld', 'PLD bound at realized max')]

  verdict_rows = []
  for v in results['verdicts']:
    verdict_rows.append(dict(
        method=v['method'], baseline=v['baseline'],
        small=f"{v['small']['verdict']} (x{v['small']['ratio']:.3g})",
        large=f"{v['large']['verdict']} (x{v['large']['ratio']:.3g})",
        crossover=v['crossover'],
        reproduced='yes' if v['reproduced'] else 'no',
        pattern='yes' if v['pattern'] else 'no',
        sweep=' '.join(s[0] for s in v['sweep'])))
  verdict_cols = [('method', 'sparsified'), ('baseline', 'baseline'),
                  ('small', f'eps={eps_small:g}: vs baseline (loss ratio)'),
                  ('large', f'eps={eps_large:g}: vs baseline (loss ratio)'),
                  ('crossover', 'first eps not better'),
                  ('sweep', 'sweep b/t/w'),
                  ('reproduced', f'reproduced at eps {eps_small:g} / '
                   f'{eps_large:g}'),
                  ('pattern', 'pattern over the sweep')]

  kappa_rows = []
  for kappa in sorted({r['kappa'] for r in results['kappa_sweep']}):
    for eps in (eps_small, eps_large):
      row = dict(kappa=kappa, epsilon=eps)
      for r in results['kappa_sweep']:
        if r['kappa'] == kappa and r['epsilon'] == eps:
          row[r['method']] = _pm(r['final_rel_loss_mean'],
                                 r['final_rel_loss_sem'])
          row['p'] = r['measurements'] or row.get('p')
          if r['method'] == 'compressive_paper':
            row['realized'] = r.get('realized_eps_mean')
      kappa_rows.append(row)
  kappa_cols = [('kappa', 'kappa'), ('p', 'p'), ('epsilon', 'eps'),
                ('top_k', 'top_k (non-private)'),
                ('compressive', 'compressive'),
                ('compressive_paper', 'compressive_paper'),
                ('realized', 'paper: realized eps (mean)')]
  flat = {(b, eps): _row(final, b, eps) for b in ('gd',) + BASELINES
          for eps in (eps_small, eps_large)}

  by = {(v['method'], v['baseline']): v for v in results['verdicts']}
  real = {r['epsilon']: r for r in results['realized']}

  def claim_line(method):
    parts = []
    for baseline in BASELINES:
      v = by[(method, baseline)]
      parts.append(
          f"vs `{baseline}`: **{'yes' if v['reproduced'] else 'no'}** at the "
          f"plotted eps "
          f"(eps={eps_small:g}: {v['small']['verdict']}, "
          f"{report_lib.fmt(v['small']['method_loss'])} vs "
          f"{report_lib.fmt(v['small']['baseline_loss'])}; "
          f"eps={eps_large:g}: {v['large']['verdict']}, "
          f"{report_lib.fmt(v['large']['method_loss'])} vs "
          f"{report_lib.fmt(v['large']['baseline_loss'])}; first eps of the "
          f"sweep where it is not better: {report_lib.fmt(v['crossover'])}; "
          f"better at the smallest and not at the largest eps of the sweep: "
          f"{'yes' if v['pattern'] else 'no'})")
    return '; '.join(parts)

  rs = real[eps_small]
  kappa_lines = []
  for eps in (eps_small, eps_large):
    for method in COMPRESSIVE:
      rows = [r for r in results['kappa_sweep']
              if r['method'] == method and r['epsilon'] == eps]
      best = min(rows, key=lambda r: r['final_rel_loss_mean'])
      worst = max(rows, key=lambda r: r['final_rel_loss_mean'])
      low = best['final_rel_loss_mean']
      refs = [(f"unsparsified `{b}`", flat[(b, eps)]['final_rel_loss_mean'])
              for b in BASELINES]
      refs.append(('theta = 0', results['rel_loss_at_zero']))
      kappa_lines.append(
          f"- eps = {eps:g}, `{method}`: best kappa {best['kappa']} "
          f"({report_lib.fmt(low)}), worst kappa {worst['kappa']} "
          f"({report_lib.fmt(worst['final_rel_loss_mean'])}); the best is "
          'below ' + ', below '.join(
              f"{label} ({report_lib.fmt(ref)}): "
              f"**{'yes' if low < ref else 'no'}**" for label, ref in refs)
          + '.')
  mean_gap = (_row(final, 'laplace_mean', eps_small)['final_rel_loss_mean'] /
              _row(final, 'gd', eps_small)['final_rel_loss_mean'] - 1)
  useless = [e for e in cfg['epsilons']
             if min(_row(final, m, e)['final_rel_loss_mean']
                    for m in COMPRESSIVE + ('laplace',))
             > results['rel_loss_at_zero']]
  lines = [
      f'## {NAME} ({cfg["mode"]})', '',
      report_lib.dataset_line(results['dataset']), '',
      f"Linear regression, n = {results['n']} examples (the whole set is the "
      f"training set), n_theta = {results['n_theta']} (intercept included); "
      f"features scaled to [-1, 1] per column by max-abs and the target to "
      f"[-1, 1], non-privately (as the paper). f(theta*) = "
      f"{results['f_star']:.4g}. Alg. 3: theta_1 = 0, T = {cfg['steps']} "
      f"({releases} private releases), rho_k = {cfg['learning_rate']:g}/"
      f"sqrt(k), kappa = {cfg['kappa']}, p = {cfg['num_measurements']} "
      f"(Fig. 1); per-example gradients clipped to [-xi, xi], xi = "
      f"{cfg['xi']:g} (fraction of per-example coordinates clipped: "
      f"{results['clipped_fraction_at_zero']:.3f} at theta = 0, "
      f"{results['clipped_fraction_at_theta_star']:.3f} at theta*). The "
      f"starting point theta_1 = 0 has relative loss "
      f"{results['rel_loss_at_zero']:.4g}: a private run above that ends "
      f"worse than not training. "
      f"Seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}); ± is one SEM over "
      f"seeds. Epsilon is per step, as in the paper; eps = {eps_small:g} "
      f"(the paper's small value) and {eps_large:g} (chosen before the runs, "
      f"the top of the planned sweep 0.1..1000) are plotted; the sweep table "
      f"has every eps.",
      '',
      f'**Final relative loss f(theta_T)/f(theta*) - 1** at the plotted eps '
      f'(non-private rows do not depend on eps):', '',
      report_lib.markdown_table(shown_rows, shown_cols), '',
      '**Epsilon sweep** (final relative loss, mean ± SEM):', '',
      report_lib.markdown_table(sweep_rows, sweep_cols), '',
      f'**Privacy per method.** Every private method is eps-DP per release '
      f'(`laplace_event(eps)`) as designed; {releases} releases compose to:',
      '', report_lib.markdown_table(results['privacy'], privacy_cols), '',
      "The certified compressive mechanism, `laplace` and `laplace_mean` "
      "carry these guarantees (`laplace_mean` for the replace-one relation "
      "on the mean of clipped per-example gradients). **The paper's "
      "calibration does not**: given its sensing matrix, a release with "
      "scale sqrt(p)/eps is only Delta(Psi)/sqrt(p) * eps-DP (module "
      "docstring of `dpjax/_compressive.py`). Realized per-step epsilon of "
      "`compressive_paper` over all its steps and seeds:", '',
      report_lib.markdown_table(results['realized'], realized_cols), '',
      f"At eps = {eps_small:g} the paper's mechanism spent "
      f"{rs['realized_total_mean']:.4g} in total (basic composition) where "
      f"it claims {rs['claimed_total']:.4g} (x{rs['ratio']:.3f}); single "
      f"steps reached eps = {rs['realized_max']:.3g}.", '',
      '**Claim check** ("sparsification helps at small eps, not at large"; '
      'better/worse = difference beyond 2 SEM, ratio = sparsified / '
      'baseline final loss; sweep letters b/t/w per eps of the sweep):', '',
      report_lib.markdown_table(verdict_rows, verdict_cols), '',
      "- Paper's mechanism (`compressive_paper`): "
      f"{claim_line('compressive_paper')}.",
      f"- Certified mechanism (`compressive`): {claim_line('compressive')}.",
      f"- Usefulness: at eps per step "
      f"{', '.join(f'{e:g}' for e in useless) or '(none of the sweep)'} "
      f"every one of `compressive`, `compressive_paper` and `laplace` ends "
      f"worse than theta = 0 (relative loss {results['rel_loss_at_zero']:.4g}"
      f"); the \"improvement\" there is between models worse than not "
      f"training, while `laplace_mean` is within "
      f"{mean_gap:.1%}"
      f" of non-private GD already at eps = {eps_small:g}.",
      f"- `laplace_mean` is the baseline the paper does not consider: its "
      f"noise shrinks as 1/n, which the compressive mechanism cannot use "
      f"(top-k of the mean gradient can change its support between "
      f"neighbouring datasets, so its inputs differ by up to 2 xi kappa in "
      f"L1 whatever n is).", '',
      f'**Relative loss at T vs kappa** (Fig. 2 analogue; p = '
      f'{cfg["measurements_per_kappa"]} kappa, a choice: the paper only '
      f'says p = O(kappa log(n_theta / kappa)); kappa <= n_theta; top_k is '
      f'non-private and deterministic). Unsparsified lines: '
      + ', '.join(
          f"`{b}` {report_lib.fmt(flat[(b, eps_small)]['final_rel_loss_mean'])}"
          f" / {report_lib.fmt(flat[(b, eps_large)]['final_rel_loss_mean'])}"
          for b in ('gd',) + BASELINES)
      + f' (eps = {eps_small:g} / {eps_large:g}).', '',
      report_lib.markdown_table(kappa_rows, kappa_cols), '',
      *kappa_lines, '',
      "The paper's mechanism's realized eps does not depend on the data or "
      "on eps (Delta(Psi) is a function of the sensing matrix; every eps "
      "reuses the seeds' keys, hence the same matrices); it grows as p "
      "shrinks (kappa = 1, p = 4).", '',
  ]
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
