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


def smallest_k(values: jax.Array, k: jax.typing.ArrayLike) -> jax.Array:
  """Boolean mask of the ``k`` smallest of uint32 ``values`` (1-D), ties
  broken by position: what a stable argsort's first ``k`` would select.

  No sort: a 32-step bisection finds the k-th smallest value t (the least t
  with ``#{v <= t} >= k``), then every value below t and the first
  ``k - #{v < t}`` equal to t are selected. O(32 n) compares and one cumsum
  (XLA's CPU sort of 5e4 keys takes 60-90 ms; this about 1 ms). ``k`` may be
  traced; ``k <= 0`` selects none, ``k >= n`` all.
  """
  values = jnp.asarray(values, jnp.uint32)
  k = jnp.clip(jnp.asarray(k, jnp.int32), 0, values.size)

  def bisect(_, bounds):  # invariant: #{v <= hi} >= k; answer in [lo, hi]
    lo, hi = bounds
    mid = lo + (hi - lo) // 2
    enough = jnp.sum(values <= mid, dtype=jnp.int32) >= k
    return jnp.where(enough, lo, mid + 1), jnp.where(enough, mid, hi)

  _, t = jax.lax.fori_loop(0, 32, bisect, (jnp.uint32(0),
                                           jnp.uint32(2**32 - 1)))
  below = values < t
  at = values == t
  room = k - jnp.sum(below, dtype=jnp.int32)
  return below | (at & (jnp.cumsum(at, dtype=jnp.int32) <= room))


def random_mask(key: jax.Array, like: Any, num_zeros: jax.typing.ArrayLike):
  """A 0/1 mask shaped like ``like`` with exactly ``num_zeros`` zeros.

  The zeroed set is uniform over all subsets of that size of the flattened
  coordinates, up to ties between 32-bit random values: coordinate j is
  zeroed iff its random word ``u_j`` is among the ``num_zeros`` smallest
  (``smallest_k``; a tie at the cut, probability about n / 2^32, goes to
  the earlier coordinate). ``num_zeros`` may be traced. The mask depends on
  the key alone, never on data.

  Example:
    >>> m = random_mask(jax.random.key(0), {'w': jnp.zeros((2, 3))}, 4)
    >>> int(m['w'].sum())
    2
  """
  leaves, treedef = jax.tree.flatten(like)
  sizes = [int(np.prod(x.shape)) for x in leaves]
  words = jax.random.bits(_validate.key(key), (sum(sizes),), jnp.uint32)
  keep = ~smallest_k(words, num_zeros)
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
