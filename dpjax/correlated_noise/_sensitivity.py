"""L2 sensitivity of a strategy under b-min-separation participation.

One example (or user) contributes a clipped gradient of norm <= 1 at the
steps of a participation pattern pi; the released C G moves by
sum_{i in pi} C[:, i] u_i, so the squared sensitivity is
max_pi max_u ||sum_i C[:, i] u_i||^2 = max_pi sum_{i, j in pi} X_ij u_i.u_j
with X = C^T C (Choquette-Choo et al. 2023, "(Amplified) banded matrix
factorization", Sec. 3). b-min-separation: participations at least
``min_separation`` steps apart, at most ``max_participations`` of them
(capped by ceil(n / b), the most the n steps allow).

* A strategy with ``bands <= min_separation`` has orthogonal columns for any
  two allowed participations, so the bound is exact: the best k diagonal
  entries of X with separation >= b (ibid., Thm. 2 and Alg. 3, VecSens).
* Any other strategy: an upper bound from |X| (ibid., Alg. 4), exact when
  X >= 0 entrywise and a single pattern attains both maxima.
"""

import functools
import math
from typing import Any

import numpy as np

from dpjax.correlated_noise import _strategies

BOUNDS = ('exact', 'upper')


def _participations(n: int, min_separation: Any,
                    max_participations: Any) -> tuple[int, int]:
  if (isinstance(min_separation, bool)
      or not isinstance(min_separation, (int, np.integer))
      or min_separation < 1):
    raise ValueError(f'Expected min_separation={min_separation!r} to be an '
                     'integer >= 1.')
  cap = math.ceil(n / int(min_separation))
  if max_participations is None:
    return int(min_separation), cap
  if (isinstance(max_participations, bool)
      or not isinstance(max_participations, (int, np.integer))
      or max_participations < 1):
    raise ValueError(f'Expected max_participations={max_participations!r} '
                     'to be an integer >= 1 or None.')
  return int(min_separation), min(int(max_participations), cap)


def max_separated_sum(x: np.ndarray, min_separation: int,
                      max_participations: int) -> float:
  """max over index sets pi (gaps >= b, |pi| <= k) of sum_{i in pi} x_i.

  Dynamic program, O(n k) (Choquette-Choo et al. 2023, Alg. 3).

  Example:
    >>> max_separated_sum(np.array([1.0, 5.0, 1.0, 5.0]), 2, 2)
    10.0
  """
  x = np.asarray(x, np.float64)
  n, b = x.size, min_separation
  best = np.zeros(n + b)  # best[i]: at most j picks from x[i:]
  for _ in range(max_participations):
    new = np.zeros(n + b)
    new[:n] = x + best[b:b + n]
    best = np.maximum(
        np.maximum.accumulate(np.maximum(new, 0.0)[::-1])[::-1], best)
  return float(best[0])


def sensitivity(strategy: _strategies.Strategy, *, min_separation: int = 1,
                max_participations: int | None = 1,
                bound: str = 'exact') -> float:
  """L2 sensitivity of C per unit clip norm under b-min-separation.

  Args:
    strategy: the ``Strategy``.
    min_separation: b >= 1, the fewest steps between two participations
      (1: any steps; n / epochs for one fixed data order visited every
      epoch). Epochs reshuffled each epoch have b = 1: a fresh permutation
      can put an example in the last batch of one epoch and the first of
      the next.
    max_participations: k >= 1, or None for as many as n steps allow
      (ceil(n / b)); the default 1 is a single epoch (max column norm).
    bound: ``'exact'`` (default): the exact sensitivity, which needs
      ``strategy.bands <= min_separation`` when k > 1. ``'upper'``: an upper
      bound for any strategy (Alg. 4 of Choquette-Choo et al. 2023; the
      exact value when the strategy is banded within b).

  Returns:
    The sensitivity (multiply by the clip norm for the clipped sums').

  Raises:
    ValueError: naming the bad value: b or k not positive integers, an
      unknown ``bound``, or ``bound='exact'`` with bands above b and k > 1.

  Example:
    >>> s = _strategies.banded_toeplitz([1.0, 1.0], 6)
    >>> round(sensitivity(s, min_separation=2, max_participations=3), 6)
    2.44949
  """
  if bound not in BOUNDS:
    raise ValueError(f'Expected bound={bound!r} in {BOUNDS}.')
  b, k = _participations(strategy.n, min_separation, max_participations)
  col_sq = strategy.column_norms() ** 2
  if k == 1:
    return float(np.sqrt(col_sq.max()))
  if strategy.bands <= b:
    return float(np.sqrt(max_separated_sum(col_sq, b, k)))
  if bound == 'exact':
    raise ValueError(
        f'Expected strategy bands={strategy.bands} <= min_separation={b} '
        'for the exact sensitivity with several participations: the columns '
        'of two participations are not orthogonal. Pass bound=\'upper\' for '
        'an upper bound, or a strategy with fewer bands.')
  c = strategy.matrix()
  gram = np.abs(c.T @ c)
  rows = np.array([max_separated_sum(r, b, k) for r in gram])
  return float(np.sqrt(max_separated_sum(rows, b, k)))


def fixed_epoch_sensitivity(strategy: _strategies.Strategy, *,
                            epochs: int) -> float:
  """Sensitivity under (k, n/k) fixed-epoch order participation.

  Example i takes part at steps i, i + n/k, ..., one per epoch (the data
  visited in one fixed order every epoch): sqrt(max_i sum_{j, l in pi_i}
  |X_jl|), exact when X >= 0 on those patterns (Choquette-Choo et al. 2022,
  "Multi-epoch matrix factorization", Sec. 2; Choquette-Choo et al. 2023,
  Eq. (5)).

  Raises:
    ValueError: naming ``epochs``: not a positive integer dividing n.

  Example:
    >>> fixed_epoch_sensitivity(_strategies.identity(4), epochs=2)
    1.4142135623730951
  """
  n = strategy.n
  if (isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer))
      or epochs < 1 or n % epochs):
    raise ValueError(f'Expected epochs={epochs!r} to be a positive integer '
                     f'dividing the number of steps n={n}.')
  c = strategy.matrix()
  gram = np.abs(c.T @ c)
  period = n // int(epochs)
  best = 0.0
  for start in range(period):
    idx = np.arange(start, n, period)
    best = max(best, float(gram[np.ix_(idx, idx)].sum()))
  return float(np.sqrt(best))


@functools.lru_cache(maxsize=8)
def _cyclic_cached(band_bytes: bytes, shape: tuple[int, int],
                   min_separation: int) -> np.ndarray:
  band = np.frombuffer(band_bytes, np.float64).reshape(shape)
  n, bands = shape
  b = min_separation
  width = -(-bands // b)  # pattern neighbours within the bands
  best = np.zeros(n + 1)
  for p in range(min(b, n)):
    cols = np.arange(p, n, b)
    gram = np.zeros((cols.size, width))  # gram[a, d] = X[cols[a], cols[a+d]]
    total, sums = 0.0, np.zeros(n + 1)
    for r in range(p, n):
      hi = (r - p) // b
      lo = max(0, -(-(r - bands + 1 - p) // b))
      a = np.arange(lo, hi + 1)
      vals = band[r, r - cols[a]]
      for d in range(a.size):
        old = gram[a[:a.size - d], d]
        new = old + vals[:a.size - d] * vals[d:]
        total += (1 if d == 0 else 2) * float(np.sum(np.abs(new) - np.abs(old)))
        gram[a[:a.size - d], d] = new
      sums[r + 1] = total
    best = np.maximum(best, sums)
  best.setflags(write=False)
  return best


def cyclic_squared_sensitivities(band: np.ndarray,
                                 min_separation: int) -> np.ndarray:
  """Squared sensitivities of each prefix of C under b fixed partitions.

  Example i takes part at the steps i mod b, i mod b + b, ... (cyclic
  Poisson sampling at rate 1: every step takes its whole partition). Entry
  t is ``max_p sum_{i, j in pi_p, i, j < t} |X_ij|`` with X the Gram
  matrix of C[:t, :t] and pi_p the steps of partition p: the squared
  sensitivity of the first t steps, exact when X >= 0 on the patterns or
  the strategy has at most b bands (their columns are then orthogonal;
  Choquette-Choo et al. 2023, "(Amplified) banded matrix factorization",
  Sec. 3 and Eq. (5)). Non-decreasing in t. O(n b ceil(bands / b)^2), cached.

  Args:
    band: [n, bands] diagonals of C (``Strategy.band``).
    min_separation: b >= 1, the number of partitions.

  Returns:
    float64 [n + 1], entry 0 being 0.

  Example:
    >>> s = _strategies.banded_toeplitz([1.0, 1.0], 6)
    >>> float(cyclic_squared_sensitivities(s.band, 2)[-1])
    6.0
  """
  b, _ = _participations(1, min_separation, None)
  band = np.ascontiguousarray(band, np.float64)
  return _cyclic_cached(band.tobytes(), band.shape, b)
