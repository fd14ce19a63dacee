"""Masks that sparsify a pytree or a vector: random, ranked, top-k.

``random_mask`` zeroes a uniformly random subset of a given size (Zhu &
Blaschko, Alg. 1), ``ranked_mask`` the coordinates of smallest magnitude
score (their Alg. 4), and ``keep_top_k`` keeps the k largest-magnitude
entries of a vector (Farokhi, eq. 2; the pruning step of CoSaMP).
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate


def random_mask(key: jax.Array, like: Any, num_zeros: jax.typing.ArrayLike):
  """A 0/1 mask shaped like ``like`` with exactly ``num_zeros`` zeros.

  The zeroed set is uniform over all subsets of that size of the flattened
  coordinates: coordinate j is zeroed iff ``perm[j] < num_zeros`` for a
  uniformly random permutation ``perm``. ``num_zeros`` may be traced.

  Example:
    >>> m = random_mask(jax.random.key(0), {'w': jnp.zeros((2, 3))}, 4)
    >>> int(m['w'].sum())
    2
  """
  leaves, treedef = jax.tree.flatten(like)
  sizes = [int(np.prod(x.shape)) for x in leaves]
  keep = jax.random.permutation(_validate.key(key), sum(sizes)) >= num_zeros
  parts = jnp.split(keep, np.cumsum(sizes)[:-1])
  return treedef.unflatten([
      p.reshape(x.shape).astype(x.dtype) for p, x in zip(parts, leaves)])


def ranked_mask(scores: Any, num_zeros: jax.typing.ArrayLike):
  """A 0/1 mask zeroing the ``num_zeros`` coordinates of smallest |score|.

  Ties are broken by position (a stable sort), so the mask is deterministic.

  Example:
    >>> ranked_mask({'w': jnp.array([3., -1., 0.5, 2.])}, 2)['w']
    Array([1., 0., 0., 1.], dtype=float32)
  """
  leaves, treedef = jax.tree.flatten(scores)
  flat = jnp.concatenate([jnp.abs(x).ravel() for x in leaves])
  rank = jnp.argsort(jnp.argsort(flat, stable=True), stable=True)
  keep = rank >= num_zeros
  sizes = [int(np.prod(x.shape)) for x in leaves]
  parts = jnp.split(keep, np.cumsum(sizes)[:-1])
  return treedef.unflatten([p.reshape(x.shape).astype(x.dtype)
                            for p, x in zip(parts, leaves)])


def keep_top_k(v: jax.Array, k: int) -> jax.Array:
  """``v`` with all but its ``k`` largest-magnitude entries set to zero (eq. 2).

  Ties are broken towards the lower index (``jax.lax.top_k``), so exactly
  ``min(k, nnz)`` nonzeros survive and the result is deterministic.

  Example:
    >>> keep_top_k(jnp.array([3., -5., 1., 4.]), 2)
    Array([ 0., -5.,  0.,  4.], dtype=float32)
  """
  _, idx = jax.lax.top_k(jnp.abs(v), k)
  return jnp.zeros_like(v).at[idx].set(v[idx])
