"""Gaussian random projections Phi_t in R^{m x d}, fresh every step.

Step t draws Phi_t with i.i.d. N(0, 1 / m) entries from ``fold_in(key, t)``:
no matrix is stored across steps, and the same key and step give the same
matrix. ``block_size`` generates Phi_t in column blocks, block b from
``fold_in(step_key, b)``, and applies it block by block, so memory stays
O(m * block_size + d) instead of O(m d); a matrix is defined by its key AND
its block size (the dense and the blocked draws of one key differ).

A schedule m_t = min(d, omega(C)^2 / beta_t^2) with beta_t = 1 / (t + 1)
(Huang thesis, Alg. 5 line 4) changes the shape every step, which ``jit``
cannot follow; here ``num_rows`` rows are allocated once and the draw keeps
the first m_t <= num_rows of them (scaled by 1 / sqrt(m_t)), the rest zero.
"""

import math
from typing import Callable, NamedTuple

import jax
from jax import flatten_util
import jax.numpy as jnp
import optax

from dpjax import _keys
from dpjax import _validate
from dpjax.transforms._state import KeyStepState

_STREAM = _keys.register('gaussian_projection', __name__)


def validate_rows(num_rows: int, dimension: int | None = None) -> None:
  """1 <= num_rows (<= dimension when it is known), integers."""
  _validate.positive_int(num_rows=num_rows)
  if dimension is not None and num_rows > dimension:
    raise ValueError(f'Expected num_rows={num_rows} <= '
                     f'dimension={dimension}: a '
                     'projection to more rows than the dimension compresses '
                     'nothing.')


class GaussianProjection(NamedTuple):
  """Phi in R^{num_rows x dimension}, N(0, 1 / m) entries, defined by its key.

  Build with ``gaussian_projection``. ``num_rows``, ``dimension`` and
  ``block_size`` are static; ``active_rows`` (m, may be traced) keeps the
  first m rows and zeroes the rest. Without blocks the matrix is drawn once
  (``dense``) and reused by every product; with blocks each product
  regenerates the blocks from the key (memory O(m block_size + d), time one
  Gaussian draw per entry per product).
  """
  key: jax.Array
  num_rows: int
  dimension: int
  block_size: int | None
  active_rows: jax.Array
  dense: jax.Array | None = None

  @property
  def _num_blocks(self) -> int:
    return -(-self.dimension // self.block_size)

  def _scale(self, dtype) -> jax.Array:
    m = self.active_rows
    rows = (jnp.arange(self.num_rows) < m).astype(dtype)
    return rows / jnp.sqrt(m.astype(dtype))

  def _block(self, b, dtype) -> jax.Array:
    z = jax.random.normal(jax.random.fold_in(self.key, b),
                          (self.num_rows, self.block_size), dtype)
    return z * self._scale(dtype)[:, None]

  def matrix(self, dtype=jnp.float32) -> jax.Array:
    """The dense [num_rows, dimension] matrix (the blocks' entries)."""
    if self.block_size is None:
      if self.dense is not None:
        return self.dense.astype(dtype)
      z = jax.random.normal(self.key, (self.num_rows, self.dimension), dtype)
      return z * self._scale(dtype)[:, None]
    blocks = [self._block(b, dtype) for b in range(self._num_blocks)]
    return jnp.concatenate(blocks, axis=1)[:, :self.dimension]

  def _padded(self, x: jax.Array) -> jax.Array:
    """x [..., dimension] -> [num_blocks, ..., block_size] (zero padded)."""
    pad = self._num_blocks * self.block_size - self.dimension
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])
    x = x.reshape(x.shape[:-1] + (self._num_blocks, self.block_size))
    return jnp.moveaxis(x, -2, 0)

  def matvec(self, v: jax.Array) -> jax.Array:
    """Phi v for v [..., dimension] -> [..., num_rows] (rows of a batch too)."""
    v = jnp.asarray(v)
    if self.block_size is None:
      return v @ self.matrix(v.dtype).T
    blocks = self._padded(v)

    def body(acc, xs):
      b, vb = xs
      return acc + vb @ self._block(b, v.dtype).T, None

    acc0 = jnp.zeros(v.shape[:-1] + (self.num_rows,), v.dtype)
    out, _ = jax.lax.scan(body, acc0, (jnp.arange(self._num_blocks), blocks))
    return out

  def rmatvec(self, u: jax.Array) -> jax.Array:
    """Phi^T u for u [num_rows] -> [dimension]."""
    u = jnp.asarray(u)
    if self.block_size is None:
      return self.matrix(u.dtype).T @ u
    out = jax.lax.map(lambda b: self._block(b, u.dtype).T @ u,
                      jnp.arange(self._num_blocks))
    return out.reshape(-1)[:self.dimension]


def gaussian_projection(key: jax.Array, num_rows: int, dimension: int, *,
                        block_size: int | None = None,
                        active_rows: jax.typing.ArrayLike | None = None
                        ) -> GaussianProjection:
  """Phi in R^{m x d} with i.i.d. N(0, 1 / m) entries, drawn from ``key``.

  Args:
    key: PRNG key (required).
    num_rows: rows allocated, 1 <= num_rows <= dimension (static).
    dimension: d (static).
    block_size: None for one dense draw; else columns per block (static),
      each block from ``fold_in(key, block)``, applied without ever holding
      the whole matrix.
    active_rows: m <= num_rows (may be traced); default num_rows.

  Returns:
    A ``GaussianProjection`` with ``matvec``, ``rmatvec`` and ``matrix``.

  References:
    Huang thesis, Alg. 8 line 5; Johnson & Lindenstrauss 1984:
    E ||Phi v||^2 = ||v||^2 and ||Phi v||^2 / ||v||^2 ~ chi^2_m / m.

  Example:
    >>> phi = gaussian_projection(jax.random.key(0), 4, 10, block_size=3)
    >>> v = jnp.ones(10)
    >>> bool(jnp.allclose(phi.matvec(v), phi.matrix() @ v, atol=1e-5))
    True
  """
  _validate.positive_int(dimension=dimension)
  validate_rows(num_rows, dimension)
  if block_size is not None:
    _validate.positive_int(block_size=block_size)
  if active_rows is None:
    active_rows = num_rows
  elif _validate.concrete(active_rows):
    validate_rows(int(active_rows), num_rows)
  phi = GaussianProjection(_validate.key(key), num_rows, dimension, block_size,
                           jnp.asarray(active_rows, jnp.int32))
  if block_size is None:  # draw once; every product reuses it
    phi = phi._replace(dense=phi.matrix())
  return phi


def l1_ball_gaussian_width(dimension: int, radius: float = 1.0) -> float:
  """omega(B_1(r)) = r E ||g||_inf <= r sqrt(2 log(2 d)) (the bound returned)."""
  _validate.positive_int(dimension=dimension)
  _validate.positive(radius=radius)
  return float(radius) * math.sqrt(2 * math.log(2 * dimension))


def l2_ball_gaussian_width(dimension: int, radius: float = 1.0) -> float:
  """omega(B_2(r)) = r E ||g||_2 <= r sqrt(d) (the bound returned)."""
  _validate.positive_int(dimension=dimension)
  _validate.positive(radius=radius)
  return float(radius) * math.sqrt(dimension)


def projection_dim_schedule(gaussian_width: float, dimension: int
                            ) -> Callable[[jax.Array], jax.Array]:
  """count -> m_t = min(d, ceil(omega^2 / beta_t^2)), beta_t = 1 / (t + 1).

  ``count`` is the 0-based step counter of the transform (thesis step t =
  count + 1). Use with ``num_rows`` allocated rows: the projection keeps
  min(num_rows, m_t) of them. omega is the Gaussian width of the
  constraint set of unit scale (``l1_ball_gaussian_width(d)``): the thesis
  states m_t up to a constant.

  Example:
    >>> int(projection_dim_schedule(2.0, 100)(jnp.int32(0)))
    16
  """
  _validate.positive(gaussian_width=gaussian_width)
  _validate.positive_int(dimension=dimension)

  def schedule(count):
    t = jnp.asarray(count, jnp.float32) + 1
    m = jnp.ceil(gaussian_width**2 * (t + 1)**2)
    return jnp.minimum(m, dimension).astype(jnp.int32)

  return schedule


def project_gaussian(num_rows: int, *, key: jax.Array,
                     block_size: int | None = None,
                     rows_schedule: Callable[[jax.Array], jax.Array] | None
                     = None) -> optax.GradientTransformation:
  """Maps the update g (a pytree, flattened to R^d) to Phi_t g in R^m.

  Args:
    num_rows: m (static), 1 <= m <= d (checked at ``init``).
    key: PRNG key (required); step t draws Phi_t from ``fold_in(key, t)``.
    block_size: generate and apply Phi_t in column blocks (static), for d
      too large for a dense m x d matrix.
    rows_schedule: count -> m_t (e.g. ``projection_dim_schedule``); the
      first min(m, m_t) rows are kept, N(0, 1 / m_t) entries.

  Returns:
    An optax transformation with ``KeyStepState``; the output is a vector
    of ``num_rows`` entries (rows beyond m_t are 0).

  References:
    Huang thesis, Alg. 5-9 (Phi_t); Kasiviswanathan, "SGD with
    low-dimensional gradients with applications to private and distributed
    learning", UAI 2021.

  Example:
    >>> tx = project_gaussian(3, key=jax.random.key(0))
    >>> out, _ = tx.update(jnp.ones(8), tx.init(jnp.zeros(8)))
    >>> out.shape
    (3,)
  """
  validate_rows(num_rows)
  state0 = KeyStepState.create(key, stream=_STREAM)

  def init_fn(params):
    validate_rows(num_rows, flatten_util.ravel_pytree(params)[0].size)
    return state0

  def update_fn(updates, state, params=None):
    del params
    flat, _ = flatten_util.ravel_pytree(updates)
    rows = None
    if rows_schedule is not None:
      rows = jnp.minimum(rows_schedule(state.count), num_rows)
    phi = gaussian_projection(state.step_key(), num_rows, flat.size,
                              block_size=block_size, active_rows=rows)
    return phi.matvec(flat), state.advance()

  return optax.GradientTransformation(init_fn, update_fn)
