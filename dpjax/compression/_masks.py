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


def smallest_k(words: Any, k: jax.typing.ArrayLike,
               eligible: jax.Array | None = None) -> jax.Array:
  """Boolean mask of the ``k`` smallest ``eligible`` entries, by key.

  ``words``: a uint32 vector [n] or a tuple of them, compared
  lexicographically (two random words make a tie about 2^-64 likely per
  pair); remaining ties go to the earlier position: the selection is the
  first ``k`` of a stable argsort. No sort: per word, a 32-step bisection
  finds the cut value among the candidates still tied, so the cost is
  O(32 n) compares per word and one cumsum (XLA's CPU sort of 5e4 keys takes
  60-90 ms; this about 1 ms). ``k`` may be traced; ``k <= 0`` selects none,
  ``k`` above the number eligible selects all of them.
  """
  words = tuple(jnp.asarray(w, jnp.uint32) for w in (
      words if isinstance(words, (tuple, list)) else (words,)))
  tied = (jnp.ones(words[0].shape, bool) if eligible is None
          else jnp.asarray(eligible, bool))
  room = jnp.clip(jnp.asarray(k, jnp.int32), 0, jnp.sum(tied, dtype=jnp.int32))
  chosen = jnp.zeros(words[0].shape, bool)
  for w in words:  # among the still-tied candidates, cut on this word

    def bisect(_, bounds, w=w, tied=tied, room=room):
      lo, hi = bounds  # invariant: #{tied, w <= hi} >= room
      mid = lo + (hi - lo) // 2
      enough = jnp.sum(tied & (w <= mid), dtype=jnp.int32) >= room
      return jnp.where(enough, lo, mid + 1), jnp.where(enough, mid, hi)

    _, cut = jax.lax.fori_loop(0, 32, bisect, (jnp.uint32(0),
                                               jnp.uint32(2**32 - 1)))
    below = tied & (w < cut)
    chosen = chosen | below
    room = room - jnp.sum(below, dtype=jnp.int32)
    tied = tied & (w == cut)
  return chosen | (tied & (jnp.cumsum(tied, dtype=jnp.int32) <= room))


def random_mask(key: jax.Array, like: Any, num_zeros: jax.typing.ArrayLike):
  """A 0/1 mask shaped like ``like`` with exactly ``num_zeros`` zeros.

  The zeroed set is uniform over all subsets of that size of the flattened
  coordinates, up to ties between 64-bit random keys (as
  ``jax.random.permutation``'s): coordinate j is zeroed iff its key is among
  the ``num_zeros`` smallest (``smallest_k``). ``num_zeros`` may be traced.
  The mask depends on the key alone, never on data.

  Example:
    >>> m = random_mask(jax.random.key(0), {'w': jnp.zeros((2, 3))}, 4)
    >>> int(m['w'].sum())
    2
  """
  leaves, treedef = jax.tree.flatten(like)
  sizes = [int(np.prod(x.shape)) for x in leaves]
  words = jax.random.bits(_validate.key(key), (2, sum(sizes)), jnp.uint32)
  keep = ~smallest_k((words[0], words[1]), num_zeros)
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
