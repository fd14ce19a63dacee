"""compgd's run: generated data, four full-batch optimizers, privacy."""

import functools
import math
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from dpjax import accounting
from experiments.common import runner
from experiments.common import verdict
from experiments.compgd._config import COMPRESSED
from experiments.compgd._config import Config
from experiments.compgd._config import METHODS
from experiments.compgd._config import PRIVATE
from experiments.compgd._results import Results


def problem(key, n: int, n_val: int, n_test: int, d: int, k: int,
            signal: float):
  """(z [n, d], y [n], z_val [n_val, d], z_test [n_test, d], w*, radius): z
  uniform on the unit sphere, w* with k nonzeros of size signal sqrt(d / k)
  and random signs (<z, w*> has stddev ~ signal), y ~ Bernoulli(sigmoid(<z,
  w*>)), radius = ||w*||_1 (C is the smallest l1 ball holding w*)."""
  kz, ks, kg, ky = jax.random.split(key, 4)
  z = jax.random.normal(kz, (n + n_val + n_test, d))
  z = z / jnp.linalg.norm(z, axis=1, keepdims=True)
  support = jax.random.permutation(ks, d)[:k]
  signs = jnp.where(jax.random.bernoulli(kg, 0.5, (k,)), 1.0, -1.0)
  w_star = jnp.zeros(d).at[support].set(signs * signal * math.sqrt(d / k))
  p = jax.nn.sigmoid(z[:n] @ w_star)
  y = jax.random.bernoulli(ky, p).astype(jnp.float32)
  return (z[:n], y, z[n:n + n_val], z[n + n_val:], w_star,
          signal * math.sqrt(d * k))


def expected_test_loss(w, z_test, w_star):
  """Mean over the test points of E_y[logistic loss], y ~ Bern(sigmoid(<z,
  w*>)): the test loss averaged over the label noise (lower variance than
  one draw of labels, same expectation)."""
  a = z_test @ w
  p = jax.nn.sigmoid(z_test @ w_star)
  return jnp.mean(jax.nn.softplus(a) - p * a)


def expected_error(w, z_test, w_star):
  """Mean over the points of P_y[sign(<z, w>) misclassifies y]: the test
  error (the thesis's measure) averaged over the label noise. <z, w> = 0
  predicts label 0, so w = 0 errs with probability mean(sigmoid(<z, w*>))."""
  p = jax.nn.sigmoid(z_test @ w_star)
  return jnp.mean(jnp.where(z_test @ w > 0, 1.0 - p, p))


NO_CLIP = 1e30  # non-private runs: clipping at 1e30 clips nothing
CURVE = ('val_error', 'test_error', 'excess')  # per step of a run


@functools.lru_cache(maxsize=None)
def _trainer(compressed: bool, n: int, n_val: int, n_test: int, d: int,
             k: int, signal: float, num_rows: int, max_steps: int,
             solver_iterations: int):
  """jit(vmap over seeds): (data_key, run_key, sigma, steps, lr0, clip) ->
  (curve [max_steps, 3]: ``CURVE`` of the average iterate after each step t
  < ``steps`` (traced; NaN beyond), the largest lift residual, [test error
  of w = 0, Bayes test error (of w*)]).

  One program per (compressed, d, k): DP-CompGD is ``dp_compgd`` and DP-GD
  ``dp_projected_gd``; CompGD and GD are the same programs at sigma = 0 and
  clip = NO_CLIP, where h_t = Phi_t (1/n) sum_i grad_i exactly as ``compgd``
  (resp. ``projected_gd``) computes it (tests/test_compgd.py checks the
  equality), which halves the compilations. Without noise the step sizes
  do not depend on T, so one run of the most steps gives every T's average
  iterate; a private run is one call per T (sigma depends on T).
  """

  def run(data_key, run_key, sigma, steps, lr0, clip):
    z, y, z_val, z_test, w_star, radius = problem(data_key, n, n_val, n_test,
                                                  d, k, signal)
    coord = num_rows if compressed else d
    # eta_t = lr0 ||w*||_1 / sqrt(t (G^2 + coord s^2)): thesis Thm 7.1's
    # step with s the per-coordinate noise stddev of the gradient estimate.
    s = 2 * jnp.minimum(clip, 1.0) * sigma / n
    gscale = 1.0 / math.sqrt(d)  # L / sqrt(d) with L = 1

    def rate(count):
      t = count.astype(jnp.float32) + 1
      return lr0 * radius / jnp.sqrt(t * (gscale**2 + coord * s**2))

    if compressed:
      tx = dpjax.transforms.dp_compgd(rate, num_rows, radius, clip, sigma, n,
                                      key=run_key,
                                      solver_iterations=solver_iterations)
    else:
      tx = dpjax.transforms.dp_projected_gd(rate, radius, clip, sigma, n,
                                            key=run_key)
    w0 = jnp.zeros(d)
    w_test = expected_test_loss(w_star, z_test, w_star)

    def step(t, carry):
      w, state, curve, residual = carry
      coef = jax.nn.sigmoid(z @ w) - y
      update, state = tx.update(coef[:, None] * z, state, w)
      w_bar = dpjax.transforms.average_iterate(state)
      curve = curve.at[t].set(jnp.stack([
          expected_error(w_bar, z_val, w_star),
          expected_error(w_bar, z_test, w_star),
          expected_test_loss(w_bar, z_test, w_star) - w_test]))
      return (optax.apply_updates(w, update), state, curve,
              jnp.maximum(residual, state.residual))

    init = (w0, tx.init(w0), jnp.full((max_steps, len(CURVE)), jnp.nan),
            jnp.zeros([], jnp.float32))
    _, _, curve, residual = jax.lax.fori_loop(0, steps, step, init)
    return curve, residual, jnp.stack([expected_error(w0, z_test, w_star),
                                       expected_error(w_star, z_test, w_star)])

  return jax.jit(jax.vmap(run, (0, 0, None, None, None, None)))


def _privacy(cfg: Config) -> tuple[list, dict, dict]:
  """Privacy rows (one per T, and the K runs' composition), sigma per T."""
  privacy, sigmas, events = [], {}, []
  for epochs in cfg.epochs:
    sigma = accounting.calibrate(accounting.gaussian_event, cfg.epsilon,
                                 cfg.delta, cfg.accountant, steps=epochs)
    event = accounting.gaussian_event(sigma, steps=epochs)
    sigmas[epochs] = sigma
    events.append(event)
    privacy.append(dict(
        epochs=epochs, steps=epochs, noise_multiplier=sigma,
        noise_stddev_per_coordinate=2 * cfg.l2_norm_clip * sigma /
        cfg.num_examples,
        epsilon_rdp=accounting.epsilon(event, cfg.delta, 'rdp'),
        epsilon_pld=accounting.epsilon(event, cfg.delta, 'pld'),
        delta=cfg.delta))
  every = dp_accounting.ComposedDpEvent(events)
  selection = dict(runs=len(events), delta=cfg.delta,
                   epsilon_rdp=accounting.epsilon(every, cfg.delta, 'rdp'),
                   epsilon_pld=accounting.epsilon(every, cfg.delta, 'pld'))
  return privacy, sigmas, selection


def _stats(values) -> dict[str, Any]:
  a = np.asarray(values, np.float64)
  return dict(mean=float(a.mean()),
              sem=float(a.std(ddof=1) / math.sqrt(a.size)))


def tune(rows: list[dict[str, Any]], epochs) -> dict[str, Any]:
  """Per seed, the T of lowest validation error among ``rows`` (one per T,
  in the order of ``epochs``; ties: the fewest epochs) and its test error."""
  val = np.asarray([r['val_error'] for r in rows]).T  # [seeds, T]
  test = np.asarray([r['test_error'] for r in rows]).T
  chosen = verdict.selected_settings(val, higher_is_better=False)
  error = test[np.arange(test.shape[0]), chosen]
  return dict(chosen_epochs=[int(epochs[c]) for c in chosen],
              test_error=error.tolist(),
              **{f'test_error_{k}': v for k, v in _stats(error).items()})


def _method_rows(cfg: Config, method: str, d: int, k: int,
                 sigmas: dict[int, float], data_keys, run_keys
                 ) -> tuple[list[dict[str, Any]], np.ndarray]:
  """One method at (d, k): a row per T (errors per seed, mean and SEM),
  and the [seeds, 2] test errors of w = 0 and of w* (Bayes)."""
  m = d // cfg.compression
  max_steps = max(cfg.epochs)
  private = method in PRIVATE
  fn = _trainer(method in COMPRESSED, cfg.num_examples, cfg.num_val,
                cfg.num_test, d, k, cfg.signal, m, max_steps,
                cfg.solver_iterations)
  clip = jnp.float32(cfg.l2_norm_clip if private else NO_CLIP)
  runs = {}
  for epochs in (cfg.epochs if private else [max_steps]):
    curve, residual, fixed = fn(
        data_keys, run_keys, jnp.float32(sigmas[epochs] if private else 0.0),
        jnp.int32(epochs), jnp.float32(cfg.learning_rate_scale), clip)
    runs[epochs] = (np.asarray(curve, np.float64), float(np.max(residual)))
  rows = []
  for epochs in cfg.epochs:
    curve, residual = runs[epochs if private else max_steps]
    at = {name: curve[:, epochs - 1, i] for i, name in enumerate(CURVE)}
    rows.append(dict(
        method=method, d=d, m=m if method in COMPRESSED else None,
        intrinsic=k, epochs=epochs,
        noise_multiplier=sigmas[epochs] if private else 0.0,
        epsilon=cfg.epsilon if private else None,
        delta=cfg.delta if private else None,
        **{name: v.tolist() for name, v in at.items()},
        **{f'{name}_{s}': v for name in ('test_error', 'excess')
           for s, v in _stats(at[name]).items()},
        max_solver_residual=(residual if method in COMPRESSED else None)))
  return rows, np.asarray(fixed, np.float64)


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Every (k, d, method, epochs): validation and test errors per seed,
  each method's T chosen on validation, baselines, and privacy."""
  base = jax.vmap(jax.random.key)(jnp.asarray(cfg.seeds, jnp.uint32))
  data_keys = jax.vmap(lambda kk: jax.random.fold_in(kk, 0))(base)
  run_keys = jax.vmap(lambda kk: jax.random.fold_in(kk, 1))(base)
  privacy, sigmas, selection = _privacy(cfg)
  ctx.say('noise calibrated')
  rows, tuned, baselines = [], [], []
  for k in cfg.intrinsic_dimensions:
    for d in cfg.dimensions:
      for method in METHODS:
        method_rows, fixed = _method_rows(cfg, method, d, k, sigmas,
                                          data_keys, run_keys)
        rows += method_rows
        tuned.append(dict(method=method, d=d, intrinsic=k,
                          **tune(method_rows, cfg.epochs)))
      baselines.append(dict(d=d, intrinsic=k, zero_error=fixed[:, 0].tolist(),
                            bayes_error=fixed[:, 1].tolist(),
                            zero_error_mean=float(fixed[:, 0].mean()),
                            bayes_error_mean=float(fixed[:, 1].mean())))
      ctx.say(f'k={k} d={d} done')
  return Results(dataset=dict(name='generated: unit sphere, sparse logistic '
                              'labels', n_train=cfg.num_examples,
                              n_val=cfg.num_val, n_test=cfg.num_test),
                 privacy=privacy, selection_privacy=selection, rows=rows,
                 tuned=tuned, baselines=baselines)
