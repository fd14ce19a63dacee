"""Histogram cells: exact cell identities for any dimension, lookup, search.

A point u of [0, 1]^d lies in the cell with integer coordinates
``floor(u * b)`` (clipped to ``b - 1``). Cells are identified by their
coordinate vectors, never by a flattened index (b^d overflows int64 for
d = 40, b = 10): grouping is a ``jnp.lexsort`` over the d coordinates, and a
query cell is found among stored cells by a joint lexsort of both sets, an
exact comparison. All shapes are fixed, so everything runs under ``jit``.
Unused rows of a stored-cell array hold the sentinel coordinate ``b``, which
sorts after every real cell.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax import _keys
from dpjax import _validate
from dpjax.nonparametric import _neighbours

_STREAM = _keys.register('jl_projection', __name__)


def cell_coordinates(u: jax.Array, bins) -> jax.Array:
  """int32 ``[n, d]`` cell coordinates in ``[0, bins)`` of ``u`` in [0, 1]^d.

  Example:
    >>> cell_coordinates(jnp.array([[0.0, 0.55, 1.0]]), 10)
    Array([[0, 5, 9]], dtype=int32)
  """
  b = jnp.asarray(bins, jnp.int32)
  c = jnp.floor(u * b.astype(u.dtype)).astype(jnp.int32)
  return jnp.clip(c, 0, b - 1)


def _lexsort_rows(rows: jax.Array, *last_keys: jax.Array) -> jax.Array:
  """Order sorting ``rows`` lexicographically (column 0 first), then keys."""
  keys = tuple(last_keys) + tuple(rows[:, j] for j in
                                  reversed(range(rows.shape[1])))
  return jnp.lexsort(keys)


def group_cells(cells: jax.Array, valid: jax.Array, bins):
  """Groups rows of ``cells`` ``[n, d]`` by cell; invalid rows are ignored.

  Returns:
    ``(unique, group, num)``: ``unique`` ``[n, d]`` the distinct valid cells
    in lexicographic order then sentinel rows (all ``bins``), ``group``
    ``[n]`` each row's index into ``unique`` (invalid rows point at a
    sentinel row), ``num`` the number of distinct valid cells.

  Example:
    >>> c = jnp.array([[1, 0], [0, 2], [1, 0]])
    >>> u, g, num = group_cells(c, jnp.array([True, True, True]), 3)
    >>> u[:2].tolist(), g.tolist(), int(num)
    ([[0, 2], [1, 0]], [1, 0, 1], 2)
  """
  n, d = cells.shape
  cells = jnp.where(valid[:, None], cells, jnp.asarray(bins, jnp.int32))
  order = _lexsort_rows(cells)
  s = cells[order]
  new = jnp.concatenate([jnp.ones((1,), bool),
                         jnp.any(s[1:] != s[:-1], axis=1)])
  gid_sorted = jnp.cumsum(new.astype(jnp.int32)) - 1
  group = jnp.zeros((n,), jnp.int32).at[order].set(gid_sorted)
  unique = jnp.full((n, d), bins, jnp.int32).at[gid_sorted].set(s)
  num = jnp.sum((new & valid[order]).astype(jnp.int32))
  return unique, group, num


def find_cells(stored: jax.Array, num_stored: jax.Array,
               queries: jax.Array) -> jax.Array:
  """Index of each query cell among the first ``num_stored`` stored cells.

  Exact: a joint lexsort of stored and query cells puts every query right
  after its equal stored cell (if any); the candidate is then compared
  coordinate by coordinate. Returns int32 ``[m]``, -1 where absent.

  Example:
    >>> stored = jnp.array([[0, 2], [1, 0], [3, 3]])
    >>> find_cells(stored, 2, jnp.array([[1, 0], [0, 1], [0, 2]])).tolist()
    [1, -1, 0]
  """
  p, m = stored.shape[0], queries.shape[0]
  both = jnp.concatenate([stored, queries.astype(stored.dtype)])
  is_query = jnp.concatenate([jnp.zeros((p,), jnp.int32),
                              jnp.ones((m,), jnp.int32)])
  order = _lexsort_rows(both, is_query)
  pos = jnp.arange(p + m)
  last_stored = jax.lax.cummax(jnp.where(order < p, pos, -1))
  cand = order[jnp.maximum(last_stored, 0)]
  same = jnp.all(both[cand] == both[order], axis=1)
  hit = (last_stored >= 0) & same & (cand < num_stored)
  found = jnp.where(hit, cand, -1).astype(jnp.int32)
  target = jnp.where(order >= p, order - p, m)  # stored rows dropped
  return jnp.full((m + 1,), -1, jnp.int32).at[target].set(found)[:m]


def nearest_cells(stored: jax.Array, num_stored: jax.Array,
                  queries: jax.Array, max_sq_distance) -> jax.Array:
  """Nearest stored cell within squared index distance ``max_sq_distance``.

  Alg. 2's neighbour search: among the first ``num_stored`` stored cells,
  the one of least squared Euclidean distance between integer coordinates
  (ties: the lexicographically smallest), if that distance is at most
  ``max_sq_distance``; else -1. Blocked over queries (no [m, n] matrix).

  Example:
    >>> stored = jnp.array([[0, 0], [5, 5]])
    >>> nearest_cells(stored, 2, jnp.array([[1, 1], [3, 3]]), 2).tolist()
    [0, -1]
  """
  valid = jnp.arange(stored.shape[0]) < num_stored
  idx, sq = _neighbours.nearest(queries.astype(jnp.float32),
                                stored.astype(jnp.float32), valid, 1)
  ok = sq[:, 0] <= jnp.asarray(max_sq_distance, jnp.float32)
  return jnp.where(ok, idx[:, 0], -1).astype(jnp.int32)


def jl_projection(key: jax.Array, num_features: int,
                  dimension: int) -> jax.Array:
  """A Gaussian Johnson-Lindenstrauss matrix ``[dimension, num_features]``.

  Entries are i.i.d. N(0, 1 / dimension). It depends on the key only, so it
  is public: releasing it costs no privacy.

  Example:
    >>> jl_projection(jax.random.key(0), 10, 3).shape
    (3, 10)
  """
  key = _keys.stream(_validate.key(key), _STREAM)
  _validate.positive_int(num_features=num_features, dimension=dimension)
  return jax.random.normal(key, (dimension, num_features),
                           jnp.float32) / jnp.sqrt(jnp.float32(dimension))


def project_unit(u: jax.Array, projection: ArrayLike) -> jax.Array:
  """Maps ``u`` in [0, 1]^d through ``projection`` onto [0, 1]^m.

  The bounds of Phi u come from Phi and the public box only: row i of
  Phi u ranges over [sum of Phi_i's negative entries, sum of its positive
  entries] as u ranges over [0, 1]^d; that interval is rescaled to [0, 1].

  Example:
    >>> project_unit(jnp.array([[1.0, 0.0]]), jnp.array([[1.0, -1.0]]))
    Array([[1.]], dtype=float32)
  """
  phi = jnp.asarray(projection, jnp.float32)
  lo = jnp.sum(jnp.minimum(phi, 0.0), axis=1)
  hi = jnp.sum(jnp.maximum(phi, 0.0), axis=1)
  z = u.astype(jnp.float32) @ phi.T
  return jnp.clip((z - lo) / jnp.maximum(hi - lo, 1e-30), 0.0, 1.0)
