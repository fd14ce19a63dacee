"""Blocked k-nearest-neighbour search: no [m, n] distance matrix in memory.

Queries are split into blocks; ``lax.map`` computes one block's squared
distances to all points at a time and keeps ``lax.top_k`` of them. Ties go
to the lower point index.
"""

import functools

import jax
import jax.numpy as jnp

BLOCK_ELEMENTS = 1 << 22  # entries of one block's distance matrix


@functools.partial(jax.jit, static_argnums=(3,))
def nearest(queries: jax.Array, points: jax.Array, valid: jax.Array,
            k: int) -> tuple[jax.Array, jax.Array]:
  """Indices and squared distances ``[m, k]`` of the k nearest valid points.

  Example:
    >>> pts = jnp.array([[0.0], [1.0], [5.0]])
    >>> idx, sq = nearest(jnp.array([[0.9]]), pts, jnp.ones(3, bool), 2)
    >>> idx.tolist()
    [[1, 0]]
  """
  m, n = queries.shape[0], points.shape[0]
  block = max(1, min(m, BLOCK_ELEMENTS // max(n, 1)))
  num_blocks = -(-m // block)
  q = jnp.pad(queries, ((0, num_blocks * block - m), (0, 0)))
  p_sq = jnp.sum(points * points, axis=1)
  p_sq = jnp.where(valid, p_sq, jnp.inf)

  def one(qb):
    d2 = (jnp.sum(qb * qb, axis=1)[:, None] + p_sq[None, :]
          - 2.0 * (qb @ points.T))
    neg, idx = jax.lax.top_k(-jnp.maximum(d2, 0.0), k)
    return idx.astype(jnp.int32), -neg

  idx, sq = jax.lax.map(one, q.reshape(num_blocks, block, -1))
  return (idx.reshape(-1, k)[:m], sq.reshape(-1, k)[:m])
