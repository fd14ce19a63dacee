"""compgd's run: generated data, four full-batch optimizers, privacy."""

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from dpjax import accounting
from experiments.common import runner
from experiments.compgd._config import COMPRESSED
from experiments.compgd._config import Config
from experiments.compgd._config import METHODS
from experiments.compgd._config import PRIVATE


def problem(key, n: int, n_test: int, d: int, k: int, signal: float):
  """(z [n, d], y [n], z_test [n_test, d], w*, radius): z uniform on the unit
  sphere, w* with k nonzeros of size signal sqrt(d / k) and random signs
  (<z, w*> has stddev ~ signal), y ~ Bernoulli(sigmoid(<z, w*>)), radius =
  ||w*||_1 (C is the smallest l1 ball holding w*)."""
  kz, kt, ks, kg, ky = jax.random.split(key, 5)
  z = jax.random.normal(kz, (n + n_test, d))
  z = z / jnp.linalg.norm(z, axis=1, keepdims=True)
  support = jax.random.permutation(ks, d)[:k]
  signs = jnp.where(jax.random.bernoulli(kg, 0.5, (k,)), 1.0, -1.0)
  w_star = jnp.zeros(d).at[support].set(signs * signal * math.sqrt(d / k))
  p = jax.nn.sigmoid(z[:n] @ w_star)
  y = jax.random.bernoulli(ky, p).astype(jnp.float32)
  del kt
  return z[:n], y, z[n:], w_star, signal * math.sqrt(d * k)


def expected_test_loss(w, z_test, w_star):
  """Mean over the test points of E_y[logistic loss], y ~ Bern(sigmoid(<z,
  w*>)): the test loss averaged over the label noise (lower variance than
  one draw of labels, same expectation)."""
  a = z_test @ w
  p = jax.nn.sigmoid(z_test @ w_star)
  return jnp.mean(jax.nn.softplus(a) - p * a)


NO_CLIP = 1e30  # non-private runs: clipping at 1e30 clips nothing


@functools.lru_cache(maxsize=None)
def _trainer(compressed: bool, n: int, n_test: int, d: int, k: int,
             signal: float, num_rows: int, max_steps: int,
             solver_iterations: int):
  """jit(vmap over seeds): (data_key, run_key, sigma, steps, lr0, clip) ->
  (excess test risk of the average iterate after ``steps`` (traced) steps,
  the largest lift residual).

  One program per (compressed, d, k): DP-CompGD is ``dp_compgd`` and DP-GD
  ``dp_projected_gd``; CompGD and GD are the same programs at sigma = 0 and
  clip = NO_CLIP, where h_t = Phi_t (1/n) sum_i grad_i exactly as ``compgd``
  (resp. ``projected_gd``) computes it (tests/test_compgd.py checks the
  equality), which halves the compilations.
  """

  def run(data_key, run_key, sigma, steps, lr0, clip):
    z, y, z_test, w_star, radius = problem(data_key, n, n_test, d, k, signal)
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

    def step(carry, t):
      w, state = carry
      coef = jax.nn.sigmoid(z @ w) - y
      update, new_state = tx.update(coef[:, None] * z, state, w)
      live = t < steps
      pick = lambda a, b: jnp.where(live, a, b)
      return (pick(optax.apply_updates(w, update), w),
              jax.tree.map(pick, new_state, state)), new_state.residual

    (_, state), residuals = jax.lax.scan(step, (w0, tx.init(w0)),
                                         jnp.arange(max_steps))
    w_bar = dpjax.transforms.average_iterate(state)
    excess = (expected_test_loss(w_bar, z_test, w_star) -
              expected_test_loss(w_star, z_test, w_star))
    return excess, jnp.max(residuals)

  return jax.jit(jax.vmap(run, (0, 0, None, None, None, None)))


def run(cfg: Config, ctx: runner.Context) -> dict[str, Any]:
  """Every (k, d, method, epochs): excess risks per seed, and privacy."""
  base = jax.vmap(jax.random.key)(jnp.asarray(cfg.seeds, jnp.uint32))
  data_keys = jax.vmap(lambda kk: jax.random.fold_in(kk, 0))(base)
  run_keys = jax.vmap(lambda kk: jax.random.fold_in(kk, 1))(base)
  max_steps = max(cfg.epochs)
  privacy = []
  sigmas = {}
  for epochs in cfg.epochs:
    sigma = dpjax.transforms.calibrate_dp_compgd(
        cfg.epsilon, cfg.delta, epochs, cfg.accountant)
    event = dpjax.transforms.dp_compgd_event(sigma, epochs)
    sigmas[epochs] = sigma
    privacy.append(dict(
        epochs=epochs, steps=epochs, noise_multiplier=sigma,
        noise_stddev_per_coordinate=2 * cfg.l2_norm_clip * sigma / cfg.n,
        epsilon_rdp=accounting.epsilon(event, cfg.delta, 'rdp'),
        epsilon_pld=accounting.epsilon(event, cfg.delta, 'pld'),
        delta=cfg.delta))
  ctx.say('noise calibrated')
  rows = []
  for k in cfg.intrinsic:
    for d in cfg.dims:
      m = d // cfg.compression
      for method in METHODS:
        fn = _trainer(method in COMPRESSED, cfg.n, cfg.n_test, d, k,
                      cfg.signal, m, max_steps, cfg.solver_iterations)
        for epochs in cfg.epochs:
          private = method in PRIVATE
          sigma = sigmas[epochs] if private else 0.0
          excess, residual = fn(data_keys, run_keys, jnp.float32(sigma),
                                jnp.int32(epochs), jnp.float32(cfg.lr_scale),
                                jnp.float32(cfg.l2_norm_clip if private
                                            else NO_CLIP))
          excess = np.asarray(excess, np.float64)
          rows.append(dict(
              method=method, d=d, m=m if method in COMPRESSED else None,
              intrinsic=k, epochs=epochs, noise_multiplier=sigma,
              epsilon=cfg.epsilon if private else None,
              delta=cfg.delta if private else None,
              excess_mean=float(excess.mean()),
              excess_sem=float(excess.std(ddof=1) / math.sqrt(excess.size)),
              per_seed=excess.tolist(),
              max_solver_residual=(float(np.max(residual))
                                   if method in COMPRESSED else None)))
      ctx.say(f'k={k} d={d} done')
  return dict(dataset=dict(name='generated: unit sphere, sparse logistic '
                           'labels', n_train=cfg.n, n_test=cfg.n_test),
              privacy=privacy, rows=rows)
