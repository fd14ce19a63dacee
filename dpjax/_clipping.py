"""Per-example gradients and clipped sums (the vmap path).

A per-example gradient g_i is clipped to g_i * min(1, C / ||g_i||) and the
clipped gradients are summed (Abadi et al. 2016, eqs. (2)-(4) of Zhu &
Blaschko). With per-layer clipping, ``l2_norm_clip`` is a pytree of bounds C_l
(a prefix of the gradient tree) and each group is clipped on its own; one
clipped gradient then has L2 norm at most sqrt(sum_l C_l^2).

Two rules keep the sum's sensitivity honest:

* Padded rows (``mask`` False) contribute exactly zero.
* A per-example gradient with a non-finite norm (NaN or inf anywhere) is
  *dropped*: it contributes exactly zero, like a padded row. Zero is inside the
  clipping ball, so the sensitivity bound still holds. The returned norms keep
  the non-finite value, so callers can count drops with ``count_nonfinite``.
  That count depends on the data and is not privatized.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate

PyTree = Any
LossFn = Callable[[PyTree, PyTree], jax.Array]

METHODS = ('vmap',)


class ClippedGradSum(NamedTuple):
  """Sum of clipped per-example gradients and the per-example norms.

  Attributes:
    grad_sum: pytree shaped like params, sum_i clip(g_i) over unmasked rows.
    norms: per-example L2 norms before clipping, shape [B] (flat clipping) or
      a pytree of [B] arrays shaped like ``l2_norm_clip`` (per-layer).
  """
  grad_sum: PyTree
  norms: PyTree


def per_example_grads(loss_fn: LossFn) -> Callable[[PyTree, PyTree], PyTree]:
  """Returns ``fn(params, batch)``: gradients of ``loss_fn`` per example.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example; the batch
      passed to the returned function has a leading axis B on every leaf.

  Returns:
    A function giving a pytree shaped like params with a leading axis B.

  Example:
    >>> loss = lambda w, x: jnp.sum(w * x)
    >>> per_example_grads(loss)(jnp.ones(2), jnp.arange(6.).reshape(3, 2))
    Array([[0., 1.],
           [2., 3.],
           [4., 5.]], dtype=float32)
  """
  return jax.vmap(jax.grad(loss_fn), in_axes=(None, 0))


def clipped_norm_bound(l2_norm_clip: Any) -> float:
  """L2 bound on one clipped per-example gradient: C, or sqrt(sum_l C_l^2).

  The clipped sum then has L2 sensitivity ``clipped_norm_bound`` under
  add/remove-one neighbours and twice that under replace-one.

  Example:
    >>> clipped_norm_bound({'a': 3.0, 'b': 4.0})
    5.0
  """
  bounds = np.asarray(jax.tree.leaves(l2_norm_clip), dtype=np.float64)
  return float(np.sqrt(np.sum(bounds**2)))


def validate_l2_norm_clip(l2_norm_clip: Any) -> None:
  leaves = jax.tree.leaves(l2_norm_clip)
  if not leaves:
    raise ValueError(f'Expected l2_norm_clip={l2_norm_clip} to be non-empty.')
  for c in leaves:
    _validate.positive(l2_norm_clip=c)


def _per_example_sq_norm(tree: PyTree) -> jax.Array:
  sq = [jnp.sum(jnp.square(x.astype(jnp.float32)),
                axis=tuple(range(1, x.ndim))) for x in jax.tree.leaves(tree)]
  return sum(sq[1:], sq[0])


def _weighted_sum(grads: PyTree, weight: jax.Array, valid: jax.Array):
  """sum_i weight_i g_i over rows with ``valid``; invalid rows give exactly 0."""

  def one(g):
    g = jnp.where(valid.reshape((-1,) + (1,) * (g.ndim - 1)), g, 0)
    return jnp.tensordot(weight.astype(g.dtype), g, axes=1)

  return jax.tree.map(one, grads)


def _clip_weight(clip: Any, norm: jax.Array, valid: jax.Array) -> jax.Array:
  return jnp.where(valid, jnp.minimum(1.0, clip / norm), 0.0)


def clip_and_sum(grads: PyTree, l2_norm_clip: Any,
                 mask: jax.typing.ArrayLike | None = None) -> ClippedGradSum:
  """Clips per-example gradients (leading axis B) and sums them.

  Args:
    grads: pytree of per-example gradients, leading axis B on every leaf.
    l2_norm_clip: a positive scalar C (flat clipping) or a pytree of positive
      bounds that is a prefix of ``grads`` (per-layer clipping: each subtree
      is clipped to its own bound).
    mask: optional bool [B]; False marks padded rows, which contribute zero.

  Returns:
    ``ClippedGradSum(grad_sum, norms)``.

  Example:
    >>> g = {'w': jnp.array([[3., 4.], [0.3, 0.4]])}
    >>> out = clip_and_sum(g, 1.0)
    >>> out.grad_sum['w'], out.norms
    (Array([0.90000004, 1.2       ], dtype=float32), Array([5. , 0.5], dtype=float32))
  """
  validate_l2_norm_clip(l2_norm_clip)
  batch = jax.tree.leaves(grads)[0].shape[0]
  keep = (jnp.ones((batch,), bool) if mask is None
          else jnp.asarray(mask, bool).reshape((batch,)))
  if jax.tree_util.treedef_is_leaf(jax.tree.structure(l2_norm_clip)):
    norm = jnp.sqrt(_per_example_sq_norm(grads))
    valid = keep & jnp.isfinite(norm)
    weight = _clip_weight(l2_norm_clip, norm, valid)
    return ClippedGradSum(_weighted_sum(grads, weight, valid), norm)
  # Per-layer: a non-finite norm in any group drops the whole example, so one
  # example's contribution stays inside the product of the group balls.
  norms = jax.tree.map(lambda c, g: jnp.sqrt(_per_example_sq_norm(g)),
                       l2_norm_clip, grads)
  valid = keep
  for n in jax.tree.leaves(norms):
    valid = valid & jnp.isfinite(n)
  grad_sum = jax.tree.map(
      lambda c, g, n: _weighted_sum(g, _clip_weight(c, n, valid), valid),
      l2_norm_clip, grads, norms)
  return ClippedGradSum(grad_sum, norms)


def count_nonfinite(norms: PyTree,
                    mask: jax.typing.ArrayLike | None = None) -> jax.Array:
  """Number of (unmasked) examples dropped for a non-finite gradient norm.

  Not private: report it as a diagnostic only.
  """
  leaves = jax.tree.leaves(norms)
  bad = jnp.zeros(leaves[0].shape, bool)
  for n in leaves:
    bad = bad | ~jnp.isfinite(n)
  if mask is not None:
    bad = bad & jnp.asarray(mask, bool)
  return jnp.sum(bad, dtype=jnp.int32)


def clipped_grad_sum(loss_fn: LossFn, l2_norm_clip: Any,
                     method: str = 'vmap') -> Callable[..., ClippedGradSum]:
  """Returns ``fn(params, batch, mask=None) -> ClippedGradSum``.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for one example.
    l2_norm_clip: scalar C or a pytree prefix of per-layer bounds (see
      ``clip_and_sum``).
    method: ``'vmap'`` materializes per-example gradients with ``jax.vmap``.

  Returns:
    A jittable function of ``(params, batch, mask=None)``.

  Privacy:
    The returned sum has L2 sensitivity ``clipped_norm_bound(l2_norm_clip)``
    under add/remove-one and twice that under replace-one, whatever the data
    (padded and non-finite rows contribute zero).

  References:
    Abadi et al. 2016, "Deep Learning with Differential Privacy", Alg. 1.

  Example:
    >>> loss = lambda w, x: jnp.sum(w * x)
    >>> fn = clipped_grad_sum(loss, l2_norm_clip=1.0)
    >>> fn(jnp.ones(2), jnp.array([[3., 4.], [0., 0.5]])).grad_sum
    Array([0.6, 1.3], dtype=float32)
  """
  validate_l2_norm_clip(l2_norm_clip)
  if method not in METHODS:
    raise ValueError(f'Expected method={method!r} in {METHODS}.')
  grads_fn = per_example_grads(loss_fn)

  def fn(params, batch, mask=None):
    return clip_and_sum(grads_fn(params, batch), l2_norm_clip, mask)

  return fn
