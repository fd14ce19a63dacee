"""correlated_noise's training: a 784-h-10 MLP, every private run jitted.

Each trainer is one ``lax.scan`` over the steps, vmapped over seeds (and the
fixed-clip grid); it returns the final parameters and the last step's
optimizer state, from which the run's event is read
(``dpjax.accounting.step_event``), never from the settings. The chains
take the ``ClippedSum`` of the clipping (``per_example=False``), so their
noise follows the bound it carries (no second ``l2_norm_clip``).
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

import dpjax


def init_mlp(key: jax.Array, hidden: int) -> dict[str, jax.Array]:
  k1, k2 = jax.random.split(key)
  return {'w1': jax.random.normal(k1, (784, hidden)) / 28.0,
          'b1': jnp.zeros(hidden),
          'w2': jax.random.normal(k2, (hidden, 10)) / jnp.sqrt(hidden),
          'b2': jnp.zeros(10)}


def logits(params, x):
  h = jnp.tanh(x.reshape(x.shape[:-3] + (784,)) @ params['w1'] + params['b1'])
  return h @ params['w2'] + params['b2']


def example_loss(params, example):
  x, y = example
  return optax.softmax_cross_entropy_with_integer_labels(logits(params, x), y)


def accuracy(params, x, y) -> jax.Array:
  return jnp.mean(jnp.argmax(logits(params, x), -1) == y)


def _scan(params, tx, steps: int, step_grads: Callable, key: jax.Array):
  """Runs ``steps`` steps; ``step_grads(params, t, key) -> (g, kwargs)``."""
  state = tx.init(params)

  def body(carry, t):
    params, state = carry
    grads, kwargs = step_grads(params, t, key)
    updates, state = tx.update(grads, state, params, **kwargs)
    return (optax.apply_updates(params, updates), state), None

  (params, state), _ = jax.lax.scan(body, (params, state), jnp.arange(steps))
  return params, state


def _example_batch(sampler, x, y, t, key):
  batch = sampler.sample(key, t)
  return (x[batch.indices], y[batch.indices]), batch.mask


def _over_grid(cfg, sampler, steps: int, make_tx: Callable) -> Callable:
  """jit(vmap over seeds x (clip, lr) pairs) of ghost-clipped training with
  the chain ``make_tx(lr, key)`` (its noise follows the sum's C)."""

  def one(key, clip, lr, x, y):
    grad_sum = dpjax.clipped_grad_sum(example_loss, clip, 'ghost')

    def step_grads(params, t, key):
      batch, mask = _example_batch(sampler, x, y, t, key)
      return grad_sum(params, batch, mask).grad_sum, {}

    return _scan(init_mlp(jax.random.split(key)[0], cfg.hidden),
                 make_tx(lr, key), steps, step_grads, key)

  over_pairs = jax.vmap(one, in_axes=(None, 0, 0, None, None))
  return jax.jit(jax.vmap(over_pairs, in_axes=(0, None, None, None, None)))


def fixed_clip(cfg, sampler, sigma: float, steps: int) -> Callable:
  """DP-SGD over the (clip, lr) grid (``_over_grid``)."""
  return _over_grid(cfg, sampler, steps, lambda lr, key: dpjax.dpsgd(
      lr, None, sigma, sampler, key=key,
      momentum=cfg.momentum, per_example=False))


def bandmf(cfg, sampler, sigma: float, steps: int, strategy) -> Callable:
  """BandMF over the (clip, lr) grid (``_over_grid``)."""
  return _over_grid(cfg, sampler, steps, lambda lr, key: dpjax.bandmf(
      lr, None, sigma, sampler, strategy, key=key,
      momentum=cfg.momentum, per_example=False))


def _over_lrs(one: Callable) -> Callable:
  """jit(vmap over seeds x learning rates) of ``one(key, lr, x, y)``."""
  over = jax.vmap(one, in_axes=(None, 0, None, None))
  return jax.jit(jax.vmap(over, in_axes=(0, None, None, None)))


def adaptive_clip(cfg, sampler, sigma: float, steps: int) -> Callable:
  """jit(vmap over seeds x lrs): adaptive clipping at total sigma."""

  def one(key, lr, x, y):
    tx = dpjax.adaptive_dpsgd(
        lr, min(cfg.l2_norm_clips), sigma, sampler,
        target_quantile=cfg.target_quantile,
        clip_learning_rate=cfg.clip_learning_rate, key=key,
        momentum=cfg.momentum)
    grads_fn = dpjax.per_example_grads(example_loss)

    def step_grads(params, t, key):
      batch, mask = _example_batch(sampler, x, y, t, key)
      return grads_fn(params, batch), dict(mask=mask)

    return _scan(init_mlp(jax.random.split(key)[0], cfg.hidden), tx, steps,
                 step_grads, key)

  return _over_lrs(one)


def user_level(cfg, sampler, sigma: float, steps: int) -> Callable:
  """jit(vmap over seeds x lrs): user-level DP-SGD (users clipped whole)."""

  def one(key, lr, x, y):
    grad_sum = dpjax.clipping.clipped_user_grad_sum(example_loss,
                                                    cfg.user_l2_norm_clip,
                                                    'ghost')
    tx = dpjax.dpsgd(lr, None, sigma, sampler, key=key,
                     momentum=cfg.momentum, per_example=False)

    def step_grads(params, t, key):
      batch = sampler.sample(key, t)
      users = (x[batch.indices], y[batch.indices])
      return grad_sum(params, users, batch).grad_sum, {}

    return _scan(init_mlp(jax.random.split(key)[0], cfg.hidden), tx, steps,
                 step_grads, key)

  return _over_lrs(one)


def example_level(cfg, sampler, sigma: float, steps: int) -> Callable:
  """The user-level part's baseline: example-level DP-SGD at C_user."""

  def one(key, lr, x, y):
    grad_sum = dpjax.clipped_grad_sum(example_loss, cfg.user_l2_norm_clip,
                                      'ghost')
    tx = dpjax.dpsgd(lr, None, sigma, sampler, key=key,
                     momentum=cfg.momentum, per_example=False)

    def step_grads(params, t, key):
      batch, mask = _example_batch(sampler, x, y, t, key)
      return grad_sum(params, batch, mask).grad_sum, {}

    return _scan(init_mlp(jax.random.split(key)[0], cfg.hidden), tx, steps,
                 step_grads, key)

  return _over_lrs(one)


def evaluate(params: Any, x, y) -> jax.Array:
  """Accuracy of a batch of parameter sets (leading axes vmapped)."""
  fn = lambda p: accuracy(p, x, y)
  for _ in range(params['w1'].ndim - 2):
    fn = jax.vmap(fn)
  return jax.jit(fn)(params)
