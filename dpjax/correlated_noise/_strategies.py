"""Lower-triangular strategy matrices C of the matrix mechanism A = B C.

The matrix mechanism releases B (C G + Z) for the prefix-sum workload A
(A[t, i] = 1 for i <= t) of the per-step clipped sums G; equivalently the
optimizer receives G_t + (C^{-1} Z)_t at step t (Denisov et al. 2022;
Choquette-Choo et al. 2023, "(Amplified) banded matrix factorization", Sec.
2). A lower-triangular C has a lower-triangular C^{-1}: the noise of step t
depends on Z_0..Z_t only, so it streams. A C with ``bands`` non-zero
diagonals (``C[t, i] = 0`` for ``t - i >= bands``) streams with the last
``bands - 1`` noise outputs as its state (ibid., Alg. 9).

A ``Strategy`` holds C by its diagonals, ``band[t, j] = C[t, t - j]``
(float64, numpy; public and static). Build one with ``lower_triangular``,
``banded_toeplitz``, ``identity`` (DP-SGD), ``prefix_sum`` or
``tree_aggregation`` (DP-FTRL).

Example:
  >>> s = banded_toeplitz([1.0, 0.5], 4)
  >>> s.bands, s.matrix()[3].tolist()
  (2, [0.0, 0.0, 0.5, 1.0])
"""

import dataclasses
import math
from typing import Any

import numpy as np
from scipy import signal

_MAX_STEPS = 1 << 14  # a dense strategy is n^2 floats
_MAX_CONDITION = 1e12
_MIN_ENTRY = 1e-30


@dataclasses.dataclass(frozen=True, eq=False)
class Strategy:
  """A lower-triangular, invertible n x n strategy matrix C by diagonals.

  Attributes:
    band: float64 [n, bands], ``band[t, j] = C[t, t - j]`` (0 where
      ``t - j < 0``); ``band[:, 0]`` is the (non-zero) diagonal.
    toeplitz: True if every diagonal is constant (``band[t, j]`` depends on
      j only for t >= j): then the t-th noise row of any t >= n continues
      the same recursion.
  """
  band: np.ndarray
  toeplitz: bool = False

  @property
  def n(self) -> int:
    """The number of steps (rows of C)."""
    return int(self.band.shape[0])

  @property
  def bands(self) -> int:
    """The number of non-zero diagonals, main diagonal included."""
    return int(self.band.shape[1])

  def matrix(self) -> np.ndarray:
    """C as a dense float64 [n, n] array."""
    n, b = self.band.shape
    c = np.zeros((n, n))
    rows = np.arange(n)
    for j in range(b):
      c[rows[j:], rows[j:] - j] = self.band[j:, j]
    return c

  def column_norms(self) -> np.ndarray:
    """The L2 norm of each column of C (O(n bands), no dense matrix)."""
    n, b = self.band.shape
    sq = np.zeros(n)
    for j in range(b):
      sq[:n - j] += self.band[j:, j] ** 2
    return np.sqrt(sq)

  def inverse(self) -> np.ndarray:
    """C^{-1} (dense, lower-triangular float64), by forward substitution."""
    return _solve_lower(self, np.eye(self.n))


def _solve_lower(s: Strategy, rhs: np.ndarray) -> np.ndarray:
  """x with C x = rhs (rows of rhs are steps), streaming over the bands."""
  x = np.zeros_like(rhs, dtype=np.float64)
  for t in range(s.n):
    acc = rhs[t].astype(np.float64)
    for j in range(1, min(s.bands, t + 1)):
      acc = acc - s.band[t, j] * x[t - j]
    x[t] = acc / s.band[t, 0]
  return x


def _check_steps(n: Any, name: str = 'n') -> int:
  if (isinstance(n, bool) or not isinstance(n, (int, np.integer))
      or not 1 <= n <= _MAX_STEPS):
    raise ValueError(f'Expected {name}={n!r} to be an integer in '
                     f'[1, {_MAX_STEPS}].')
  return int(n)


def _check_magnitudes(values: np.ndarray, name: str) -> None:
  """Non-zero entries within float32's comfortable range (the noise runs in
  float32: a 1e-300 diagonal would underflow, its inverse overflow)."""
  mags = np.abs(values[values != 0])
  if mags.size and not (mags.min() >= _MIN_ENTRY
                        and mags.max() <= 1 / _MIN_ENTRY):
    raise ValueError(f'Expected the non-zero entries of {name} to have '
                     f'magnitudes in [{_MIN_ENTRY:g}, {1 / _MIN_ENTRY:g}] (the '
                     'noise is computed in float32).')


def lower_triangular(matrix: Any, *, name: str = 'strategy') -> Strategy:
  """The ``Strategy`` of a square, lower-triangular, invertible matrix.

  Its bands are counted from the last non-zero diagonal.

  Args:
    matrix: concrete [n, n] array C.
    name: the argument name used in error messages.

  Raises:
    ValueError: naming ``name``: not a finite square matrix, an entry above
      the diagonal, a zero diagonal entry (singular), or a condition number
      above 1e12 (its inverse, the noise, would be numerically meaningless).

  Example:
    >>> lower_triangular(np.tril(np.ones((3, 3)))).bands
    3
  """
  try:
    c = np.asarray(matrix, dtype=np.float64)
  except (TypeError, ValueError) as e:
    raise ValueError(f'Expected {name} to be a concrete matrix.') from e
  if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] == 0:
    raise ValueError(f'Expected {name} to be a square matrix, got shape '
                     f'{c.shape}.')
  _check_steps(c.shape[0], f'{name}.shape[0]')
  if not np.all(np.isfinite(c)):
    raise ValueError(f'Expected {name} to have finite entries.')
  if np.any(np.triu(c, 1) != 0):
    raise ValueError(f'Expected {name} to be lower-triangular: it has '
                     'non-zero entries above the diagonal (its noise would '
                     'depend on future steps).')
  _check_magnitudes(c, name)
  diag = np.diag(c)
  if np.any(diag == 0):
    raise ValueError(f'Expected {name} to be invertible: its diagonal has a '
                     f'zero at step {int(np.argmin(np.abs(diag)))}.')
  cond = np.linalg.cond(c)
  if not cond <= _MAX_CONDITION:
    raise ValueError(f'Expected {name} to be well conditioned: condition '
                     f'number {cond:.3g} > {_MAX_CONDITION:g}.')
  n = c.shape[0]
  offsets = [j for j in range(n) if np.any(np.diagonal(c, -j) != 0)]
  bands = max(offsets) + 1
  band = np.zeros((n, bands))
  for j in range(bands):
    band[j:, j] = np.diagonal(c, -j)
  toeplitz = all(np.all(band[j:, j] == band[j, j]) for j in range(bands))
  return Strategy(band, toeplitz)


def banded_toeplitz(coefs: Any, n: int) -> Strategy:
  """The n x n lower-triangular Toeplitz C with C[t, t - j] = coefs[j].

  Args:
    coefs: concrete 1-D, finite, ``coefs[0] != 0``; its length is the number
      of bands (entries beyond n are dropped).
    n: the number of steps.

  Raises:
    ValueError: naming ``coefs`` or ``n``.

  Example:
    >>> banded_toeplitz([2.0], 3).matrix().tolist()[1]
    [0.0, 2.0, 0.0]
  """
  n = _check_steps(n)
  c = np.asarray(coefs, dtype=np.float64)
  if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)):
    raise ValueError('Expected coefs to be a non-empty 1-D array of finite '
                     'numbers.')
  if c[0] == 0:
    raise ValueError(f'Expected coefs[0]={c[0]} != 0 (C would be singular).')
  _check_magnitudes(c, 'coefs')
  c = c[:n]
  band = np.zeros((n, c.size))
  for j in range(c.size):
    band[j:, j] = c[j]
  return Strategy(band, True)


def identity(n: int) -> Strategy:
  """C = I: independent noise per step, DP-SGD's mechanism.

  Example:
    >>> identity(3).bands
    1
  """
  return banded_toeplitz([1.0], n)


def prefix_sum(n: int) -> Strategy:
  """C = A (all-ones lower triangle): noise on each prefix sum, B = I.

  Example:
    >>> prefix_sum(3).bands
    3
  """
  return banded_toeplitz(np.ones(n), n)


def inverse_square_root_coefs(bands: int) -> np.ndarray:
  """The first ``bands`` Toeplitz coefficients of A^{1/2}.

  c_j = prod_{k=1..j} (2k - 1) / (2k) (Fichtenberger et al. 2023); C = A^{1/2}
  gives B = C, and its ``bands``-truncation is the banded inverse square
  root (BISR) strategy of McKenna 2024, "Scaling up the banded matrix
  factorization mechanism", Sec. 3, and the optimizer's starting point.

  Example:
    >>> inverse_square_root_coefs(3).tolist()
    [1.0, 0.5, 0.375]
  """
  _check_steps(bands, 'bands')
  k = np.arange(1, bands)
  return np.concatenate([[1.0], np.cumprod((2 * k - 1) / (2 * k))])


def tree_matrix(n: int) -> np.ndarray:
  """The binary-tree matrix of tree aggregation: one row per dyadic node.

  Row of node [k 2^l, (k+1) 2^l) ∩ [0, n) is its indicator, levels
  l = 0..ceil(log2 n) (Kairouz et al. 2021, Sec. 2.1; Honaker 2015).

  Example:
    >>> tree_matrix(2).tolist()
    [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
  """
  n = _check_steps(n)
  levels = max(1, math.ceil(math.log2(n))) if n > 1 else 0
  rows = []
  for level in range(levels + 1):
    width = 1 << level
    for start in range(0, n, width):
      row = np.zeros(n)
      row[start:start + width] = 1.0
      rows.append(row)
  return np.stack(rows)


def tree_aggregation(n: int) -> Strategy:
  """Tree aggregation (DP-FTRL) as a square lower-triangular strategy.

  The tree matrix T (``tree_matrix``) releases a noisy sum per dyadic node.
  Its Gram matrix X = T^T T is factored as X = C^T C with C lower-triangular
  (a Cholesky factorization of X read in reverse order). C has the tree's
  sensitivity under every participation pattern (sensitivity depends on X
  only) and its decoder B = A C^{-1} is the least-squares estimate from all
  node sums (Honaker 2015), whose error is at most that of the online tree
  estimate of Kairouz et al. 2021.

  Example:
    >>> s = tree_aggregation(4)
    >>> bool(np.allclose(s.matrix().T @ s.matrix(),
    ...                  tree_matrix(4).T @ tree_matrix(4)))
    True
  """
  t = tree_matrix(n)
  gram = t.T @ t
  flipped = np.linalg.cholesky(gram[::-1, ::-1])
  c = flipped.T[::-1, ::-1]
  c = np.where(np.abs(c) < 1e-14 * np.abs(c).max(), 0.0, np.tril(c))
  return lower_triangular(c, name='tree_aggregation')


def per_query_error(strategy: Strategy) -> np.ndarray:
  """E ||(A C^{-1} Z)_t||^2 per unit-variance coordinate, for each step t.

  The squared error of the t-th prefix sum (row norms of B = A C^{-1}); the
  published objectives are its mean or max times the sensitivity squared
  (Choquette-Choo et al. 2023, Eq. (3); McKenna 2024, Eq. (2)).

  Example:
    >>> per_query_error(identity(3)).tolist()
    [1.0, 2.0, 3.0]
  """
  b = np.cumsum(strategy.inverse(), axis=0)
  return np.sum(b * b, axis=1)


def toeplitz_inverse_coefs(coefs: np.ndarray, n: int) -> np.ndarray:
  """The first n Toeplitz coefficients of C^{-1} for Toeplitz C(coefs).

  Example:
    >>> toeplitz_inverse_coefs(np.array([1.0, -1.0]), 3).tolist()
    [1.0, 1.0, 1.0]
  """
  impulse = np.zeros(n)
  impulse[0] = 1.0
  return signal.lfilter([1.0], np.asarray(coefs, np.float64), impulse)
