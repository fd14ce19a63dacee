"""The DP-SGD benchmark's JAX steps, compiled, and the clipped-sum check.

Every column is one full jitted training step on random data: gradients (and
clipping) + noise + optimizer update + ``optax.apply_updates``:

* non-private: ``jax.grad`` of the mean batch loss + ``optax.sgd``.
* noise only: ``dpjax.add_gaussian_noise`` on a params-shaped zero update +
  ``optax.apply_updates``, the cost every DP step pays on top of its
  gradients (threefry on CPU; the same sampler in every DP column).
* dpjax ghost: ``dpjax.clipped_grad_sum(..., method='ghost')`` (no
  per-example gradients; Bu et al. 2023 book-keeping) -> ``add_gaussian_noise``
  -> ``normalize`` -> ``optax.sgd``.
* dpjax vmap: the same chain on ``clipped_grad_sum(..., method='vmap')``.
* optax DP: ``jax.vmap(jax.grad)`` +
  ``optax.contrib.differentially_private_aggregate`` + ``optax.sgd``.
* jax_privacy: ``jax_privacy.clipping.clipped_grad`` (vmap inside) +
  ``noise_addition.gaussian_privatizer`` + ``optax.sgd`` (the ``bench``
  extra; skipped with the reason printed when it is missing).

Before timing, ``clipped_sums`` computes each framework's sum of clipped
per-example gradients (no noise) and ``agreement`` compares it with dpjax's
vmap sum (exact norms): a column that disagrees by more than
``dpsgd_cli.tolerance(column)`` is not timed.
"""

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib

import dpjax
from experiments.bench import dpsgd_cli
from experiments.bench import models
from experiments.bench import timing

LR, CLIP, SIGMA = dpsgd_cli.LR, dpsgd_cli.CLIP, dpsgd_cli.SIGMA
TOL = dpsgd_cli.TOL


def optional_imports() -> dict[str, Any]:
  """name -> module, or name -> reason string when it cannot be used."""
  out = {}
  try:
    # pylint: disable=g-import-not-at-top
    from jax_privacy import clipping as jp_clipping
    from jax_privacy import noise_addition as jp_noise
    # pylint: enable=g-import-not-at-top
    out['jax_privacy'] = (jp_clipping, jp_noise)
  except Exception as e:  # pylint: disable=broad-except
    out['jax_privacy'] = f'jax_privacy unavailable ({type(e).__name__}: {e})'
  try:
    import opacus  # pylint: disable=g-import-not-at-top
    import torch  # pylint: disable=g-import-not-at-top
    out['torch'] = (torch, opacus)
  except Exception as e:  # pylint: disable=broad-except
    out['torch'] = f'torch/opacus unavailable ({type(e).__name__}: {e})'
  return out


def _losses(model: nn.Module) -> tuple[Callable, Callable]:
  """``model``'s softmax cross-entropy: (one example's, the batch mean)."""

  def example_loss(params, example):
    x, y = example
    return optax.softmax_cross_entropy_with_integer_labels(
        model.apply(params, x), y)

  def batch_loss(params, batch):
    x, y = batch
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(
        model.apply(params, x), y))

  return example_loss, batch_loss


def _reference_steps(batch_loss: Callable, key
                     ) -> dict[str, tuple[Any, Callable]]:
  """The non-private step and the noise-only step (the DP floor)."""
  sgd = optax.sgd(LR)

  def non_private(params, state, batch, mask):
    del mask
    updates, state = sgd.update(jax.grad(batch_loss)(params, batch), state,
                                params)
    return optax.apply_updates(params, updates), state

  noise_tx = dpjax.add_gaussian_noise(SIGMA * CLIP, key=key)

  def noise_only(params, state, batch, mask):  # the DP floor: noise + update
    del batch, mask
    updates, state = noise_tx.update(jax.tree.map(jnp.zeros_like, params),
                                     state)
    return optax.apply_updates(params, updates), state

  return {'non-private': (sgd, non_private), 'noise': (noise_tx, noise_only)}


def _dpjax_steps(example_loss: Callable, batch_size: int, key,
                 ghost_modes: tuple[str, ...]
                 ) -> dict[str, tuple[Any, Callable]]:
  """dpjax ghost and vmap (and ghost per mode): clipped sum -> noise ->
  normalize -> sgd."""
  steps = {}
  variants = [('ghost', 'ghost', 'auto'), ('vmap', 'vmap', 'auto')]
  variants += [(f'ghost {mode}', 'ghost', mode) for mode in ghost_modes]
  for name, method, mode in variants:
    tx = optax.chain(dpjax.add_gaussian_noise(SIGMA * CLIP, key=key),
                     dpjax.normalize(batch_size), optax.sgd(LR))
    clipped = dpjax.clipped_grad_sum(example_loss, CLIP, method=method,
                                     ghost_mode=mode)

    def dp_step(params, state, batch, mask, tx=tx, clipped=clipped):
      grad_sum = clipped(params, batch, mask).grad_sum.value
      updates, state = tx.update(grad_sum, state, params)
      return optax.apply_updates(params, updates), state

    steps[name] = (tx, dp_step)
  return steps


def _optax_step(example_loss: Callable, key) -> tuple[Any, Callable]:
  """optax.contrib's DP aggregate on ``jax.vmap(jax.grad)`` + sgd."""
  optax_tx = optax.chain(optax.contrib.differentially_private_aggregate(
      l2_norm_clip=CLIP, noise_multiplier=SIGMA, key=key), optax.sgd(LR))
  vmap_grads = jax.vmap(jax.grad(example_loss), (None, 0))

  def optax_step(params, state, batch, mask):
    del mask
    updates, state = optax_tx.update(vmap_grads(params, batch), state, params)
    return optax.apply_updates(params, updates), state

  return optax_tx, optax_step


def _jax_privacy_step(example_loss: Callable, batch_size: int, key,
                      jax_privacy: tuple) -> tuple[Any, Callable]:
  """jax_privacy's clipped_grad + gaussian_privatizer + 1/B + sgd."""
  jp_clipping, jp_noise = jax_privacy
  jp_grad = jp_clipping.clipped_grad(
      example_loss, l2_clip_norm=CLIP, batch_argnums=1,
      keep_batch_dim=False)
  jp_tx = optax.chain(jp_noise.gaussian_privatizer(stddev=SIGMA * CLIP,
                                                   prng_key=key),
                      optax.scale(1.0 / batch_size), optax.sgd(LR))

  def jp_step(params, state, batch, mask):
    del mask
    updates, state = jp_tx.update(jp_grad(params, batch), state, params)
    return optax.apply_updates(params, updates), state

  return jp_tx, jp_step


def make_jax_steps(model: nn.Module, batch_size: int, optional: dict,
                   ghost_modes: tuple[str, ...] = ()
                   ) -> dict[str, tuple[Any, Callable]]:
  """name -> (optax transformation, step(params, state, batch, mask)).

  ``ghost_modes`` adds a step ``'ghost <mode>'`` per ``ghost_mode`` of
  ``dpjax.clipped_grad_sum`` ('ghost' itself is ``'auto'``).
  """
  example_loss, batch_loss = _losses(model)
  key = jax.random.key(0)
  steps = {**_reference_steps(batch_loss, key),
           **_dpjax_steps(example_loss, batch_size, key, ghost_modes),
           'optax': _optax_step(example_loss, key)}
  if not isinstance(optional['jax_privacy'], str):
    steps['jax_privacy'] = _jax_privacy_step(example_loss, batch_size, key,
                                             optional['jax_privacy'])
  return steps


def compile_steps(name: str, batch_size: int, optional: dict, methods=None
                  ) -> dict[str, Any]:
  """The row's compiled steps: runners, memory, FLOPs, params and data.

  ``runners[m]()`` makes one jitted step and blocks until it is done;
  ``memory[m]`` is ``timing.memory_bytes`` and ``flops[m]`` the compiled
  FLOP count of method m's step.
  """
  model = models.MODELS[name]()
  kp, kb = jax.random.split(jax.random.key(1))
  x, y = models.random_batch(name, batch_size, kb)
  params = model.init(kp, x[0])
  batch, mask = (x, y), jnp.ones((batch_size,), bool)
  runners, memory, cost, carry = {}, {}, {}, {}
  for method, (tx, step) in make_jax_steps(model, batch_size,
                                           optional).items():
    if methods is not None and method not in methods:
      continue
    state = tx.init(params)
    compiled = jax.jit(step).lower(params, state, batch, mask).compile()
    memory[method] = timing.memory_bytes(compiled)
    cost[method] = timing.flops(compiled)
    carry[method] = (params, state)

    def run(method=method, compiled=compiled):
      carry[method] = jax.block_until_ready(
          compiled(*carry[method], batch, mask))

    runners[method] = run
  n_params = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))
  return {'runners': runners, 'memory': memory, 'flops': cost,
          'n_params': n_params, 'batch': (x, y), 'params': params,
          'model': model}


def clipped_sums(model: nn.Module, params, batch, optional: dict,
                 methods) -> dict[str, Any]:
  """Each JAX framework's sum of clipped per-example gradients, no noise."""
  example_loss, _ = _losses(model)
  size = batch[1].shape[0]
  mask = jnp.ones((size,), bool)
  out = {}
  for method in ('ghost', 'vmap'):
    if method in methods:
      fn = dpjax.clipped_grad_sum(example_loss, CLIP, method=method)
      out[method] = jax.jit(lambda p, b, fn=fn: fn(p, b, mask).grad_sum.value
                            )(params, batch)
  if 'optax' in methods:
    agg = optax.contrib.differentially_private_aggregate(
        l2_norm_clip=CLIP, noise_multiplier=0.0, key=jax.random.key(0))
    grads = jax.vmap(jax.grad(example_loss), (None, 0))

    def optax_sum(p, b):  # the aggregate is (sum + noise) / B
      mean, _ = agg.update(grads(p, b), agg.init(p))
      return jax.tree.map(lambda g: g * size, mean)

    out['optax'] = jax.jit(optax_sum)(params, batch)
  if 'jax_privacy' in methods and not isinstance(optional['jax_privacy'], str):
    jp_clipping, _ = optional['jax_privacy']
    out['jax_privacy'] = jax.jit(jp_clipping.clipped_grad(
        example_loss, l2_clip_norm=CLIP, batch_argnums=1,
        keep_batch_dim=False))(params, batch)
  return out


def agreement(reference: dict[str, np.ndarray], other: dict[str, np.ndarray]
              ) -> float:
  """max |other - reference| / max(1, max |reference|) over matching leaves.

  Both are dicts of arrays with the same keys (flattened trees or PyTorch
  state-dict layouts); a key mismatch is an error.
  """
  if set(reference) != set(other):
    raise ValueError('clipped sums have different parameters: '
                     f'{sorted(set(reference) ^ set(other))}')
  err = max(float(np.max(np.abs(np.asarray(other[k], np.float64)
                                - np.asarray(reference[k], np.float64))))
            for k in reference)
  scale = max(1.0, max(float(np.max(np.abs(np.asarray(v))))
                       for v in reference.values()))
  return err / scale


def flat(tree) -> dict[str, np.ndarray]:
  """A pytree as {path: numpy array}."""
  return {jax.tree_util.keystr(k): np.asarray(v)
          for k, v in jax.tree_util.tree_flatten_with_path(tree)[0]}
