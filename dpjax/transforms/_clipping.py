"""Clipping aggregator: per-example gradients in, clipped sum out (Abadi et al. 2016)."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax import _numerics
from dpjax import _validate
from dpjax import clipping


class ClipPerExampleState(NamedTuple):
  """Counts the examples dropped so far for a non-finite gradient norm.

  Data-dependent and not private: a diagnostic for the researcher.
  """
  num_dropped: jax.Array  # int32 scalar


def clip_per_example(l2_norm_clip: Any) -> optax.GradientTransformationExtraArgs:
  """Clips per-example gradients and sums them (an aggregator: chain it first).

  ``update(per_example_grads, state, params, *, mask)``: every update leaf is
  ``(B,) + param.shape`` (checked against ``params``, so a gradient without
  its batch axis raises instead of being clipped coordinate by coordinate);
  ``mask`` (bool [B], required) marks real rows, padded rows contribute
  exactly zero. Rows whose gradient is not finite are dropped (contribute
  zero) and counted in the state; finite rows of any size are clipped
  (overflow-safe norms).

  Args:
    l2_norm_clip: scalar C, or a pytree prefix of per-layer bounds.

  Returns:
    An optax transformation whose output is the clipped sum (no batch axis)
    as a ``dpjax.clipping.ClippedSum`` carrying its bound (``.value`` the
    sum): chain ``add_dpsgd_noise`` next, which calibrates to that bound.

  Privacy:
    The output has L2 sensitivity ``clipped_norm_bound(l2_norm_clip)`` under
    add/remove-one and twice that under replace-one.

  References:
    Abadi et al. 2016, Alg. 1 (clip gradient).

  Example:
    >>> tx = clip_per_example(1.0)
    >>> g = {'w': jnp.array([[3., 4.], [0.3, 0.4]])}
    >>> out, _ = tx.update(g, tx.init(None), {'w': jnp.zeros(2)},
    ...                    mask=jnp.ones(2, bool))
    >>> out.value['w']
    Array([0.90000004, 1.2       ], dtype=float32)
  """
  _validate.l2_norm_clip(l2_norm_clip)

  def init_fn(params):
    del params
    return ClipPerExampleState(num_dropped=jnp.zeros([], jnp.int32))

  def update_fn(updates, state, params=None, *, mask=None, **extra_args):
    del extra_args
    if params is None:
      raise ValueError('clip_per_example needs params in update() to check '
                       'that every gradient has its batch axis.')
    _validate.per_example_grads(updates, params)
    grad_sum, norms = clipping.clip_and_sum(updates, l2_norm_clip, mask)
    dropped = clipping.count_nonfinite(norms, mask)
    return grad_sum, ClipPerExampleState(state.num_dropped + dropped)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def sum_per_example(l2_norm_clip: Any) -> optax.GradientTransformationExtraArgs:
  """Sums per-example gradients over real rows WITHOUT clipping (not private).

  The aggregator of the noisy-SGD ablation (Zhu & Blaschko Alg. 2); the same
  shape, mask and non-finite rules as ``clip_per_example``. The output is a
  ``ClippedSum`` of unit ``'unclipped'`` whose bound is only the noise's
  nominal scale ``clipped_norm_bound(l2_norm_clip)``: the noise adds sigma
  times it, and no event can be read from such a step.

  Example:
    >>> tx = sum_per_example(1.0)
    >>> g = {'w': jnp.array([[3., 4.], [0.3, 0.4]])}
    >>> tx.update(g, tx.init(None), {'w': jnp.zeros(2)},
    ...           mask=jnp.array([True, False]))[0].value['w']
    Array([3., 4.], dtype=float32)
  """
  _validate.l2_norm_clip(l2_norm_clip)

  def update_fn(updates, state, params=None, *, mask=None, **extra_args):
    del extra_args
    if params is None:
      raise ValueError('sum_per_example needs params in update() to check '
                       'that every gradient has its batch axis.')
    batch = _validate.per_example_grads(updates, params)
    keep = _validate.row_mask(mask, batch)
    finite = jnp.ones_like(keep)
    for g in jax.tree.leaves(updates):
      finite = finite & jnp.all(jnp.isfinite(g.reshape(batch, -1)), axis=1)
    rows = keep & finite
    summed = jax.tree.map(
        lambda g: _numerics.weighted_row_sum(g, rows, rows),
        updates)
    return clipping.unclipped_sum(summed, l2_norm_clip), state

  return optax.GradientTransformationExtraArgs(lambda _: optax.EmptyState(),
                                               update_fn)
