"""compressive_regression's run: data, private GD per method, privacy totals."""

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.compressive_regression._config import COMPRESSIVE
from experiments.compressive_regression._config import Config
from experiments.compressive_regression._config import METHODS
from experiments.compressive_regression._config import PRIVATE
from experiments.compressive_regression._results import Results

# Validation runs (the kappa choice) use seeds VALIDATION_OFFSET + s: keys
# independent of every test run's.
VALIDATION_OFFSET = 1_000_000


def load_problem(cfg) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
  """(X [n, n_theta] float32 with intercept, y [n] float32, dataset info)."""
  name = cfg.dataset
  options = {}
  if name == 'synthetic_regression' or name.startswith(data_lib.CSV_PREFIX):
    options['n_samples'] = cfg.num_examples
  ds = data_lib.load(name, seed=cfg.seed, **options)
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


def _transform(method: str, kappa: int, num_measurements: int,
               linf_clip: float, eps, key, n: int, d: int
               ) -> optax.GradientTransformation:
  """The method's transform of the (clipped) mean gradient at step k."""
  # Every private method runs the paper's float Laplace (exact=False): eps
  # is traced (one compile for the whole sweep), which the exact samplers
  # cannot take, and the published numbers are those of the float path.
  if method in COMPRESSIVE:
    return dpjax.transforms.compressive_privatizer(
        kappa, num_measurements, eps, linf_clip, key=key,
        noise_calibration='certified' if method == 'compressive' else 'paper',
        exact=False)
  if method == 'laplace':
    return dpjax.transforms.laplace_privatizer(eps, linf_clip, key=key,
                                               exact=False)
  if method == 'laplace_mean':  # L1 sensitivity 2 xi d / n of the mean
    return dpjax.add_laplace_noise(2 * linf_clip * d / n / eps, key=key,
                                   exact=False)
  if method == 'top_k':
    return dpjax.transforms.sparsify_top_k(kappa)
  return optax.identity()


@functools.lru_cache(maxsize=None)
def _trainer(method: str, kappa: int, num_measurements: int, steps: int,
             linf_clip: float, learning_rate: float):
  """jit(vmap_eps(vmap_seed(run))): (x, y, keys[S], eps[E]) ->
  (losses [E, S, steps], realized eps [E, S, steps - 1])."""

  def run(x, y, key, eps):
    n, d = x.shape

    def loss(theta):
      return jnp.mean(jnp.square(x @ theta - y))

    def clipped_mean_grad(residual):  # Assumption 1, per example
      per_example = 2 * residual[:, None] * x
      return jnp.clip(per_example, -linf_clip, linf_clip).mean(axis=0)

    def full_grad(residual):
      return 2 * (x.T @ residual) / n

    tx = _transform(method, kappa, num_measurements, linf_clip, eps, key,
                    n, d)

    def step(carry, k):
      theta, state = carry
      residual = x @ theta - y  # one matvec: the loss of theta_k and g_k
      grad = (clipped_mean_grad(residual) if method in PRIVATE
              else full_grad(residual))
      update, state = tx.update(grad, state)
      realized = (state.epsilon.astype(x.dtype) if method in COMPRESSIVE
                  else jnp.asarray(eps if method in PRIVATE else 0.0, x.dtype))
      rate = learning_rate / jnp.sqrt(k.astype(x.dtype))
      return (theta - rate * update, state), (
          jnp.mean(jnp.square(residual)), realized)

    theta1 = jnp.zeros(x.shape[1], x.dtype)
    state = tx.init(theta1)
    if method in PRIVATE:  # Alg. 3: k = 1..T-1; step k uses fold_in(key, k)
      state = state._replace(count=jnp.ones([], jnp.int32))
    (theta_t, _), (losses, realized) = jax.lax.scan(
        step, (theta1, state), jnp.arange(1, steps, dtype=jnp.int32))
    # losses[k - 1] = f(theta_k), k = 1..T-1; then f(theta_T)
    return jnp.concatenate([losses, loss(theta_t)[None]]), realized

  return jax.jit(jax.vmap(jax.vmap(run, (None, None, 0, None)),
                          (None, None, None, 0)))


def train(x, y, method, keys, epsilons, cfg, kappa=None, measurements=None):
  """Losses [E, S, T] and realized per-step eps [E, S, T - 1] as numpy."""
  fn = _trainer(method, int(kappa or cfg.kappa),
                int(measurements or cfg.num_measurements),
                int(cfg.steps), float(cfg.linf_clip),
                float(cfg.learning_rate))
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
  total = accounting.laplace_event(eps, steps=releases)
  basic, _ = accounting.basic_composition(total)
  pld = None
  if eps <= pld_max_epsilon:
    pld = accounting.epsilon(total, delta, accountant='pld')
  return dict(eps_total_basic=basic, eps_total_pld=pld)


@dataclasses.dataclass(frozen=True)
class _Problem:
  """The data, the reference solution and the keys every training reads."""
  x: np.ndarray  # [n, n_theta] float32, intercept included
  y: np.ndarray  # [n] float32
  f_star: float  # f(theta*)
  keys: jax.Array  # one per seed
  validation_keys: jax.Array  # one per seed, VALIDATION_OFFSET away
  epsilons: list[float]  # the sweep
  shown: tuple[float, float]  # (small_epsilon, large_epsilon)


def _method_rows(problem: _Problem, method: str, i: int, eps: float,
                 rel: np.ndarray, realized: np.ndarray, cfg: Config
                 ) -> tuple[dict[str, Any], list[dict[str, Any]],
                            dict[str, Any] | None]:
  """One method at the sweep's i-th eps: its final row, its curves (the
  plotted eps; every one for a non-private method) and, for
  ``compressive_paper``, its realized-epsilon row."""
  private = method in PRIVATE
  mean, sem = _stats(rel[i, :, -1])
  final = dict(method=method, epsilon=eps if private else None,
               kappa=cfg.kappa, measurements=cfg.num_measurements,
               final_rel_loss_mean=mean, final_rel_loss_sem=sem,
               seeds=rel.shape[1], per_seed=rel[i, :, -1].tolist())
  curves = []
  if not private or eps in problem.shown:
    points = _curve_points(cfg.steps)
    sub = rel[i][:, np.asarray(points) - 1]  # [seeds, points]
    sem = (sub.std(axis=0, ddof=1) / math.sqrt(len(sub)) if len(sub) > 1
           else np.zeros(len(points)))
    for e in ([eps] if private else list(problem.shown)):
      curves.append(dict(method=method, epsilon=e, iterations=points,
                         mean=[float(v) for v in sub.mean(axis=0)],
                         sem=[float(v) for v in sem]))
  return final, curves, (_realized_row(eps, realized[i], cfg.steps - 1)
                         if method == 'compressive_paper' else None)


def _realized_row(eps: float, realized: np.ndarray,
                  releases: int) -> dict[str, Any]:
  """compressive_paper's realized per-step eps [seeds, releases] at eps."""
  per_seed_total = realized.sum(axis=1)
  return dict(epsilon=eps, releases=releases,
              realized_mean=float(realized.mean()),
              realized_max=float(realized.max()),
              realized_total_mean=float(per_seed_total.mean()),
              realized_total_max=float(per_seed_total.max()),
              claimed_total=releases * eps,
              ratio=float(per_seed_total.mean() / (releases * eps)),
              per_seed_ratio=(per_seed_total / (releases * eps)).tolist())


def _sweep(problem: _Problem, cfg: Config, say) -> dict[str, Any]:
  """Every method at every eps of the sweep (non-private methods once):
  final rows, curves, realized rows, and the per-method final losses
  [eps, seeds] and mean realized eps the kappa sweep reuses."""
  final, curves, realized_rows = [], [], []
  losses, realized_by_eps = {}, {}
  for method in METHODS:
    private = method in PRIVATE
    eps_list = problem.epsilons if private else [1.0]  # non-private: unused
    # gd and top_k are deterministic: one run stands for every seed.
    loss, realized = train(problem.x, problem.y, method,
                           problem.keys if private else problem.keys[:1],
                           eps_list, cfg)
    rel = loss / problem.f_star - 1
    say(f'{method} done')
    for i, eps in enumerate(eps_list):
      row, method_curves, realized_row = _method_rows(
          problem, method, i, eps, rel, realized, cfg)
      final.append(row)
      curves += method_curves
      if method in COMPRESSIVE:
        realized_by_eps[(method, eps)] = float(realized[i].mean())
      if realized_row is not None:
        realized_rows.append(realized_row)
    losses[method] = rel[:, :, -1]
  return dict(final=final, curves=curves, realized=realized_rows,
              losses=losses, realized_by_eps=realized_by_eps)


def _privacy_rows(cfg: Config, realized_rows: list[dict[str, Any]]
                  ) -> list[dict[str, Any]]:
  """The totals per eps of the sweep; adds to each realized row the totals
  at its largest realized eps (an upper bound: every step at that eps)."""
  releases = cfg.steps - 1
  privacy = []
  for eps in cfg.epsilons:
    row = dict(epsilon=float(eps), releases=releases, delta=cfg.delta)
    row.update(_privacy(float(eps), releases, cfg.delta, cfg.pld_max_epsilon))
    privacy.append(row)
  for row in realized_rows:
    row.update({f'realized_{k}': v for k, v in _privacy(
        row['realized_max'], releases, cfg.delta,
        cfg.pld_max_epsilon).items()})
  return privacy


def _kappa_rows(problem: _Problem, sweep: dict[str, Any], kappa: int,
                p: int, cfg: Config) -> list[dict[str, Any]]:
  """The kappa sweep's rows at one kappa (p measurements): top_k, then each
  compressive method at the plotted eps (the main runs where kappa and p
  are the main ones)."""
  x, y, f_star, shown = problem.x, problem.y, problem.f_star, problem.shown
  loss, _ = train(x, y, 'top_k', problem.keys[:1], [1.0], cfg, kappa, p)
  mean, _ = _stats(loss[0, :, -1] / f_star - 1)
  rows = [dict(method='top_k', epsilon=eps, kappa=kappa, measurements=None,
               final_rel_loss_mean=mean, final_rel_loss_sem=0.0, seeds=1)
          for eps in shown]
  for method in COMPRESSIVE:
    if kappa == cfg.kappa and p == cfg.num_measurements:
      rel_final = sweep['losses'][method][
          [problem.epsilons.index(e) for e in shown]]
      realized_mean = [sweep['realized_by_eps'].get((method, e))
                       for e in shown]
    else:
      loss, realized = train(x, y, method, problem.keys, list(shown), cfg,
                             kappa, p)
      rel_final = loss[:, :, -1] / f_star - 1
      realized_mean = [float(realized[i].mean()) for i in range(2)]
    for i, eps in enumerate(shown):
      mean, sem = _stats(rel_final[i])
      rows.append(dict(
          method=method, epsilon=eps, kappa=kappa, measurements=p,
          final_rel_loss_mean=mean, final_rel_loss_sem=sem,
          realized_eps_mean=realized_mean[i], seeds=len(cfg.seeds),
          per_seed=rel_final[i].tolist()))
  return rows


def _validation_rows(problem: _Problem, kappa: int, p: int,
                     cfg: Config) -> list[dict[str, Any]]:
  """The certified mechanism at one kappa on the validation keys (the
  kappa choice: the same settings, new keys)."""
  loss, _ = train(problem.x, problem.y, 'compressive',
                  problem.validation_keys, list(problem.shown), cfg, kappa, p)
  rows = []
  for i, eps in enumerate(problem.shown):
    rel_final = loss[i, :, -1] / problem.f_star - 1
    rows.append(dict(
        method='compressive', epsilon=eps, kappa=kappa, measurements=p,
        final_rel_loss_mean=float(rel_final.mean()),
        per_seed=rel_final.tolist()))
  return rows


def _problem(x: np.ndarray, y: np.ndarray, f_star: float,
             cfg: Config) -> _Problem:
  seeds = jnp.asarray(cfg.seeds, jnp.uint32)
  return _Problem(
      x=x, y=y, f_star=f_star, keys=jax.vmap(jax.random.key)(seeds),
      validation_keys=jax.vmap(jax.random.key)(seeds + VALIDATION_OFFSET),
      epsilons=[float(e) for e in cfg.epsilons],
      shown=(cfg.small_epsilon, cfg.large_epsilon))


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Every method at every eps, the kappa sweep and its validation runs."""
  x, y, dataset = load_problem(cfg)
  n, d = x.shape
  if cfg.kappa > d:
    raise ValueError(f"Expected kappa={cfg.kappa} <= n_theta={d}.")
  theta_star, f_star = least_squares(x, y)
  if not f_star > 0:
    raise ValueError(f'f(theta*)={f_star}: the data is fit exactly, so the '
                     'relative loss is undefined')
  per_example = 2 * (x @ theta_star - y)[:, None] * x
  problem = _problem(x, y, f_star, cfg)
  ctx.say(f'data {dataset["name"]}: n={n}, n_theta={d}, '
          f'f(theta*)={f_star:.4g}')
  sweep = _sweep(problem, cfg, ctx.say)
  privacy = _privacy_rows(cfg, sweep['realized'])
  ctx.say('accounting done')
  kappa_rows, validation_rows = [], []
  for kappa in cfg.kappas:
    if kappa > d:
      continue
    p = max(3, cfg.measurements_per_kappa * kappa)
    kappa_rows += _kappa_rows(problem, sweep, kappa, p, cfg)
    validation_rows += _validation_rows(problem, kappa, p, cfg)
    ctx.say(f'kappa={kappa} done')
  return Results(
      dataset=dataset, n=n, n_theta=d, f_star=f_star,
      rel_loss_at_zero=float(np.mean(y.astype(np.float64) ** 2) / f_star - 1),
      theta_star_norm=float(np.linalg.norm(theta_star)),
      clipped_fraction_at_theta_star=float(
          np.mean(np.abs(per_example) > cfg.linf_clip)),
      clipped_fraction_at_zero=float(
          np.mean(np.abs(2 * y[:, None] * x) > cfg.linf_clip)),
      final=sweep['final'], curves=sweep['curves'], privacy=privacy,
      realized=sweep['realized'], kappa_sweep=kappa_rows,
      kappa_validation=validation_rows,
      validation_seeds=[s + VALIDATION_OFFSET for s in cfg.seeds])
