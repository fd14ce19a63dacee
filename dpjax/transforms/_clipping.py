"""Clipping aggregator: per-example gradients in, clipped sum out (Abadi et al. 2016)."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax.clipping import _per_example as _clipping


class ClipPerExampleState(NamedTuple):
  """Counts the examples dropped so far for a non-finite gradient norm.

  Data-dependent and not private: a diagnostic for the researcher.
  """
  num_dropped: jax.Array  # int32 scalar


def clip_per_example(l2_norm_clip: Any) -> optax.GradientTransformationExtraArgs:
  """Clips per-example gradients and sums them (an aggregator: chain it first).

  ``update(per_example_grads, state, params=None, *, mask=None)``: the updates
  carry a leading batch axis B; ``mask`` (bool [B]) marks real rows, padded
  rows contribute exactly zero. Rows whose gradient is not finite are dropped
  (contribute zero) and counted in the state.

  Args:
    l2_norm_clip: scalar C, or a pytree prefix of per-layer bounds.

  Returns:
    An optax transformation whose output is the clipped sum (no batch axis).

  Privacy:
    The output has L2 sensitivity ``clipped_norm_bound(l2_norm_clip)`` under
    add/remove-one and twice that under replace-one.

  References:
    Abadi et al. 2016, Alg. 1 (clip gradient).

  Example:
    >>> tx = clip_per_example(1.0)
    >>> g = {'w': jnp.array([[3., 4.], [0.3, 0.4]])}
    >>> out, _ = tx.update(g, tx.init(None))
    >>> out['w']
    Array([0.90000004, 1.2       ], dtype=float32)
  """
  _clipping.validate_l2_norm_clip(l2_norm_clip)

  def init_fn(params):
    del params
    return ClipPerExampleState(num_dropped=jnp.zeros([], jnp.int32))

  def update_fn(updates, state, params=None, *, mask=None, **extra_args):
    del params, extra_args
    grad_sum, norms = _clipping.clip_and_sum(updates, l2_norm_clip, mask)
    dropped = _clipping.count_nonfinite(norms, mask)
    return grad_sum, ClipPerExampleState(state.num_dropped + dropped)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)
