"""Optimized banded Toeplitz strategies for the prefix-sum workload.

The objective of a Toeplitz C with coefficients c (``bands`` of them) on n
steps is the published one, sens(C)^2 times the mean (or max) over t of the
squared error of the t-th prefix sum, ||(A C^{-1})_t||^2 (Choquette-Choo et
al. 2023, "(Amplified) banded matrix factorization", Eq. (3) with Sec. 4's
banded Toeplitz class; McKenna 2024, "Scaling up the banded matrix
factorization mechanism", Eq. (2) and Sec. 4). With ``bands <= b`` the
multi-participation sensitivity is the single-participation one, ||c||_2,
summed over participations, so the single-participation objective is the
one to optimize for every b-min-separation setting. The objective and its
exact gradient are computed in float64 in O(n bands) with IIR filters, and
minimized by L-BFGS from the banded inverse square root.
"""

import numpy as np
from scipy import optimize as scipy_optimize
from scipy import signal

from dpjax.correlated_noise import _strategies

OBJECTIVES = ('mean', 'max')


def _weights(n: int, objective: str) -> np.ndarray:
  if objective == 'mean':  # mean_t sum_{i <= t} B_i^2
    return (n - np.arange(n)) / n
  return np.ones(n)  # Toeplitz: the max error is the last query's


def toeplitz_loss(coefs: np.ndarray, n: int, objective: str = 'mean'
                  ) -> tuple[float, np.ndarray]:
  """(objective, gradient) of Toeplitz coefficients on n steps.

  Example:
    >>> round(toeplitz_loss(np.array([1.0]), 3)[0], 9)  # mean of 1, 2, 3
    2.0
  """
  c = np.asarray(coefs, np.float64)
  w = _weights(n, objective)
  impulse = np.zeros(n)
  impulse[0] = 1.0
  v = signal.lfilter([1.0], c, impulse)  # C^{-1} coefficients
  b = np.cumsum(v)  # B = A C^{-1} coefficients
  f = float(np.sum(w * b * b))
  g = np.cumsum((2 * w * b)[::-1])[::-1]  # dF / dv
  u = signal.lfilter([1.0], c, g[::-1])[::-1]  # C^{-T} g
  df = -np.array([np.dot(u[k:], v[:n - k]) for k in range(c.size)])
  sens = float(np.dot(c, c))
  return sens * f, 2 * c * f + sens * df


def optimize_banded_toeplitz(n: int, bands: int, *, objective: str = 'mean',
                             max_steps: int = 500) -> np.ndarray:
  """Banded Toeplitz coefficients minimizing the prefix-sum objective.

  Args:
    n: the number of steps.
    bands: the number of coefficients, 1 <= bands <= n (1 is DP-SGD).
    objective: ``'mean'`` (mean squared error over prefix sums) or ``'max'``
      (the largest, the last prefix sum's for a Toeplitz C).
    max_steps: L-BFGS iterations.

  Returns:
    float64 [bands], unit L2 norm (the objective is scale-invariant), with a
    positive first entry; build the strategy with
    ``banded_toeplitz(coefs, n)``.

  Raises:
    ValueError: naming ``n``, ``bands``, ``objective`` or ``max_steps``.

  Example:
    >>> c = optimize_banded_toeplitz(16, 4)
    >>> bool(toeplitz_loss(c, 16)[0] < toeplitz_loss(np.ones(1), 16)[0])
    True
  """
  n = _strategies._check_steps(n)  # pylint: disable=protected-access
  if (isinstance(bands, bool) or not isinstance(bands, (int, np.integer))
      or not 1 <= bands <= n):
    raise ValueError(f'Expected bands={bands!r} to be an integer in [1, n].')
  if objective not in OBJECTIVES:
    raise ValueError(f'Expected objective={objective!r} in {OBJECTIVES}.')
  if (isinstance(max_steps, bool) or not isinstance(max_steps, int)
      or max_steps < 0):
    raise ValueError(f'Expected max_steps={max_steps!r} to be an integer '
                     '>= 0.')
  x0 = _strategies.inverse_square_root_coefs(bands)
  if bands > 1 and max_steps:
    # Fix c_0 = 1 (scale invariance) and optimize the rest.
    def fun(rest):
      loss, grad = toeplitz_loss(np.concatenate([[1.0], rest]), n, objective)
      return loss, grad[1:]
    # A trial point whose C^{-1} diverges evaluates to inf or NaN; the line
    # search then steps back, and the result is kept only if it improves.
    with np.errstate(over='ignore', invalid='ignore'):
      result = scipy_optimize.minimize(
          fun, x0[1:], jac=True, method='L-BFGS-B',
          options={'maxiter': max_steps, 'ftol': 1e-12, 'gtol': 1e-10})
    x = np.concatenate([[1.0], result.x])
    with np.errstate(over='ignore', invalid='ignore'):
      better = (toeplitz_loss(x, n, objective)[0]
                <= toeplitz_loss(x0, n, objective)[0])
    if better:
      x0 = x
  return x0 / np.linalg.norm(x0)
