"""The clipped sum as a typed value that carries its bound.

DP-SGD's noise is calibrated to the bound C of one example's contribution to
the sum it perturbs (Abadi et al. 2016, Alg. 1). A bare pytree cannot say
whether it was clipped, or to which C, so a noise step could be recorded at
sigma for a sum clipped to 4 C, or not clipped at all. ``ClippedSum`` binds
the value to its bound: dpjax's clipping functions (``clip_and_sum``,
``clipped_grad_sum`` vmap or ghost, ``sharded_clipped_grad_sum``, the
``clip_per_example`` transform) return one, and ``add_dpsgd_noise`` takes
only a ``ClippedSum`` whose bound is at most its own C.

The bound is ``clipped_norm_bound(l2_norm_clip)`` (sqrt(sum_l C_l^2) for
per-layer bounds): the L2 sensitivity of the sum under add/remove-one, twice
that under replace-one (the sampler's event applies the factor). A concrete
bound is static pytree data, so a mismatch is refused while tracing; a
traced bound (``inject_hyperparams``, a ``vmap`` over C) is a leaf, and the
noise state records it for ``dpsgd_step_event`` to check.

There is deliberately no public constructor from a bare value: wrap your own
per-example gradients with ``clip_and_sum`` (clipping an already clipped
gradient again leaves it unchanged). A sum with no per-example gradients
behind it has no bound dpjax can check; noise it with ``add_gaussian_noise``
and state its sensitivity in ``add_gaussian_noise_event`` yourself.

Example:
  >>> s = dpjax.clipping.clip_and_sum({'a': jnp.ones((2, 3)), 'b': jnp.ones(2)},
  ...                                 {'a': 0.3, 'b': 0.4}, jnp.ones(2, bool))
  >>> s.grad_sum.l2_norm_clip, s.grad_sum.value['b']
  (0.5, Array(0.8, dtype=float32))
"""

from typing import Any

import jax
import numpy as np

PyTree = Any


def _is_static(bound: Any) -> bool:
  return isinstance(bound, float)


@jax.tree_util.register_pytree_node_class
class ClippedSum:
  """A sum of per-example contributions, each of L2 norm <= ``l2_norm_clip``.

  Built only by dpjax's clipping functions (see the module doc). Read the
  sum as ``.value`` (a pytree shaped like the parameters).

  Attributes:
    value: the clipped sum (pytree).
    l2_norm_clip: the bound of one example's contribution,
      ``clipped_norm_bound`` of the clip bounds used: a Python float (static)
      or a scalar array when the bound was traced.
  """

  __slots__ = ('value', 'l2_norm_clip')

  def __init__(self, *args, **kwargs):
    del args, kwargs
    raise TypeError(
        'ClippedSum is built by dpjax\'s clipping functions only (e.g. '
        'dpjax.clipping.clip_and_sum(per_example_grads, l2_norm_clip, mask)'
        '.grad_sum), which clip what they sum.')

  @classmethod
  def _make(cls, value: PyTree, l2_norm_clip: Any) -> 'ClippedSum':
    out = object.__new__(cls)
    object.__setattr__(out, 'value', value)
    object.__setattr__(out, 'l2_norm_clip', l2_norm_clip)
    return out

  def __setattr__(self, name, value):
    raise AttributeError('ClippedSum is immutable.')

  def __repr__(self) -> str:
    return (f'ClippedSum(value={self.value!r}, '
            f'l2_norm_clip={self.l2_norm_clip!r})')

  def tree_flatten(self):
    if _is_static(self.l2_norm_clip):
      return (self.value,), (self.l2_norm_clip,)
    return (self.value, self.l2_norm_clip), (None,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    bound, = aux
    if bound is None:
      value, bound = children
    else:
      value, = children
    return cls._make(value, bound)


def make(value: PyTree, bound: Any) -> ClippedSum:
  """A ``ClippedSum`` of ``value`` under ``bound`` (``clipped_norm_bound``).

  For dpjax's clipping code only: ``value`` must be a sum of per-example
  contributions each of L2 norm at most ``bound``.
  """
  if not isinstance(bound, jax.core.Tracer):
    bound = float(bound)
  return ClippedSum._make(value, bound)  # pylint: disable=protected-access


def unwrap(updates: Any, l2_norm_clip_bound: Any, *,
           clipped: bool = True) -> tuple[PyTree, Any]:
  """Checks the sum a noise step gets; returns ``(value, its bound)``.

  Args:
    updates: the aggregate a transform received.
    l2_norm_clip_bound: the noise's bound, ``clipped_norm_bound(C)``.
    clipped: False for the unclipped ablation: a bare pytree passes (bound
      inf), and so does a ``ClippedSum`` of any bound.

  Raises:
    ValueError: naming ``updates``: not a ``ClippedSum`` (with
      ``clipped``), or a concrete bound above the noise's (compared in
      float32, the precision the clipping and the noise run in). A traced
      bound is returned for the caller's state and checked at recording.
  """
  if not isinstance(updates, ClippedSum):
    if clipped:
      raise ValueError(
          'Expected updates to be a ClippedSum (the output of '
          'clip_per_example, dpjax.clipping.clip_and_sum or clipped_grad_sum),'
          ' got a bare pytree: the noise is calibrated to l2_norm_clip and '
          'cannot tell a clipped sum from an unclipped one. Pass the clipped '
          'function\'s grad_sum as it is, or per-example gradients with '
          'per_example=True.')
    return updates, float('inf')
  bound = updates.l2_norm_clip
  concrete = not any(isinstance(b, jax.core.Tracer)
                     for b in (bound, l2_norm_clip_bound))
  if clipped and concrete and exceeds(bound, l2_norm_clip_bound):
    raise ValueError(
        f'Expected updates clipped to at most l2_norm_clip='
        f'{float(l2_norm_clip_bound)} (the bound the noise is calibrated '
        f'to), got a ClippedSum clipped to {np.asarray(bound)}: clip with '
        'the same l2_norm_clip as the noise.')
  return updates.value, bound


def exceeds(sum_bound: Any, noise_bound: Any) -> bool:
  """True if a concrete sum bound is above the noise's (in float32)."""
  return bool(np.any(np.asarray(sum_bound, np.float32)
                     > np.asarray(noise_bound, np.float32)))
