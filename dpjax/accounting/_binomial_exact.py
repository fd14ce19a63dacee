"""Exact privacy of the one-dimensional Binomial mechanism.

M(D) = f(D) + s (Z - N p), Z ~ Bin(N, p), for a scalar query whose values on
neighbouring datasets differ by j lattice steps, |j| <= ``shift`` (so
Delta / s = ``shift``). Its exact privacy profile is the hockey-stick
divergence of Bin(N, p) against its shift by j steps (both directions):

  delta(epsilon) = max_{1 <= j <= shift, +-} sum_x max(0, P(x) - e^epsilon
                   P(x -+ j)).

It is evaluated on a window of +-``TAIL_SDS`` standard deviations (plus the
shift) of scipy's log pmf; the mass outside the window is added in full and
Q is taken as 0 where x -+ j leaves the window, so the computed delta is
never below the true one. Theorem 1 (``binomial_epsilon``) bounds the same
mechanism in d dimensions; in one dimension it is several times larger than
the exact epsilon.
"""

import math

import numpy as np
from scipy import stats

from dpjax import _validate

TAIL_SDS = 14.0  # pmf window: +-14 sd around N p (the tails are added whole)


class _BinomialPmf:
  """log pmf of Bin(N, p) on a window of +-TAIL_SDS sd (plus the shift)."""

  def __init__(self, trials: int, p: float, shift: int):
    mean, sd = trials * p, math.sqrt(trials * p * (1 - p))
    self.lo = max(0, math.floor(mean - TAIL_SDS * sd) - shift)
    self.hi = min(trials, math.ceil(mean + TAIL_SDS * sd) + shift)
    x = np.arange(self.lo, self.hi + 1)
    self.logpmf = stats.binom.logpmf(x, trials, p)
    self.pmf = np.exp(self.logpmf)
    # Mass outside the window: counted in full in every divergence below.
    self.tail = float(stats.binom.cdf(self.lo - 1, trials, p)
                      + stats.binom.sf(self.hi, trials, p))

  def hockey_stick(self, shift: int, epsilon: float) -> float:
    """max over both directions of sum_x max(0, P(x) - e^eps P(x -+ shift)).

    Q is taken as 0 where x -+ shift leaves the window (conservative).
    """
    out, size = 0.0, len(self.logpmf)
    for direction in (1, -1):
      logq = np.full_like(self.logpmf, -np.inf)
      if shift < size and direction == 1:
        logq[shift:] = self.logpmf[:size - shift]
      elif shift < size:
        logq[:size - shift] = self.logpmf[shift:]
      with np.errstate(invalid='ignore', over='ignore'):
        ratio = np.exp(np.minimum(epsilon + logq - self.logpmf, 0.0))
      terms = np.where(self.pmf > 0, self.pmf * (1 - ratio), 0.0)
      out = max(out, float(np.sum(terms)) + self.tail)
    return out


def _check(trials: int, p: float, shift: int, delta: float) -> None:
  _validate.positive_int(trials=trials, shift=shift)
  _validate.open_unit(p=p, delta=delta)


def binomial_exact_epsilon(trials: int, p: float, shift: int,
                           delta: float) -> tuple[float, bool]:
  """Exact epsilon (d = 1) for neighbours up to ``shift`` lattice steps apart.

  Bisection (to 1e-6, upper end returned) on epsilon for the largest shift;
  every smaller shift is then checked at that epsilon. If one is worse, the
  epsilon is recomputed as the maximum over all shifts.

  Args:
    trials: N (> 0).
    p: success probability in (0, 1).
    shift: j = Delta / s (> 0), the largest distance of neighbouring query
      values in lattice steps.
    delta: in (0, 1).

  Returns:
    (epsilon, largest_shift_worst): the smallest epsilon (within 1e-6) with
    delta(epsilon) <= ``delta`` over all shifts 1..j, and whether the
    largest shift alone already gave it.

  Privacy:
    The scalar Binomial mechanism is (epsilon, delta)-DP for neighbours whose
    query values differ by at most ``shift`` lattice steps; its event is
    ``EpsilonDeltaDpEvent(epsilon, delta)``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 2.2 and Theorem 1 (the bound
    this is compared with); Balle & Wang, ICML 2018, Thm. 5 (the privacy
    profile as a hockey-stick divergence).

  Example:
    >>> eps, largest_worst = binomial_exact_epsilon(4000, 0.5, 4, 1e-5)
    >>> round(eps, 4), largest_worst
    (0.4404, True)
  """
  _check(trials, p, shift, delta)
  pmf = _BinomialPmf(trials, p, shift)

  def solve(j):
    lo, hi = 0.0, 1.0
    while pmf.hockey_stick(j, hi) > delta:
      lo, hi = hi, 2 * hi
    while hi - lo > 1e-6:
      mid = (lo + hi) / 2
      if pmf.hockey_stick(j, mid) <= delta:
        hi = mid
      else:
        lo = mid
    return hi

  eps = solve(shift)
  worst = all(pmf.hockey_stick(j, eps) <= delta for j in range(1, shift))
  if not worst:
    eps = max(solve(j) for j in range(1, shift + 1))
  return eps, worst


def binomial_exact_delta(trials: int, p: float, shift: int,
                         epsilon: float) -> float:
  """Exact delta (d = 1) at ``epsilon``: the privacy profile over all shifts.

  max over 1 <= j <= ``shift`` and both directions of the hockey-stick
  divergence of Bin(N, p) against its shift by j steps, as in the module
  docstring (never below the true value). The scalar Binomial mechanism is
  (epsilon, delta)-DP exactly when this is at most delta, so its least trials
  for a target (epsilon, delta) are ``calibrate(lambda n:
  EpsilonDeltaDpEvent(epsilon, binomial_exact_delta(n, p, shift, epsilon)),
  epsilon, delta, start=16)``.

  Args:
    trials: N (> 0).
    p: success probability in (0, 1).
    shift: j = Delta / s (> 0), as ``binomial_exact_epsilon``.
    epsilon: >= 0.

  Returns:
    delta in [0, 1].

  References:
    Balle & Wang, ICML 2018, Thm. 5 (the privacy profile as a hockey-stick
    divergence); Agarwal et al., cpSGD, NeurIPS 2018, Fig. 1.

  Example:
    >>> eps, _ = binomial_exact_epsilon(4000, 0.5, 4, 1e-5)
    >>> binomial_exact_delta(4000, 0.5, 4, eps) <= 1e-5
    True
  """
  _validate.positive_int(trials=trials, shift=shift)
  _validate.open_unit(p=p)
  _validate.non_negative(epsilon=epsilon)
  pmf = _BinomialPmf(trials, p, shift)
  return max(pmf.hockey_stick(j, float(epsilon)) for j in range(1, shift + 1))
