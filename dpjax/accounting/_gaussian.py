"""The Gaussian mechanism on a sum: epsilon, stddev and calibration.

Four views of one mechanism (noise N(0, stddev^2) per coordinate on a query
of L2 sensitivity Delta_2), from loosest to tightest:

* classical: ``gaussian_protocol_epsilon`` and its inverse
  ``classical_gaussian_stddev``, Delta_2 sqrt(2 ln(1.25/delta)) / epsilon
  (Dwork & Roth 2014, Thm. A.1; proved for epsilon <= 1 only);
* accountant: ``gaussian_event(stddev / Delta_2)`` composed by ``epsilon``
  and calibrated by ``calibrate(lambda s: gaussian_event(s / Delta_2), ...)``
  under the RDP or PLD accountant;
* exact: ``gaussian_epsilon`` and its inverse ``gaussian_stddev``, the
  closed-form privacy profile of the Gaussian mechanism (Balle & Wang 2018)
  as dp_accounting evaluates it, for one release or T composed ones (T
  Gaussian releases compose exactly into one of sensitivity sqrt(T)
  Delta_2).
"""

import math

from dp_accounting.pld import accountant as pld_accountant
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_mechanism

from dpjax import _validate


def gaussian_protocol_epsilon(stddev: float, l2_sensitivity: float,
                              delta: float) -> float:
  """Classical Gaussian-mechanism epsilon: Delta_2 sqrt(2 ln(1.25/delta)) / sigma.

  The baseline of cpSGD Theorem 2 (Gaussian noise of stddev sigma on the
  sum). The classical bound is proved only for epsilon <= 1, so a larger
  value raises instead of being returned. For the tight epsilon (any size)
  compose ``gaussian_event(stddev / l2_sensitivity)`` with ``epsilon(...)``
  (default neighbouring relation: the sensitivity is the distance); it is always
  smaller than this bound.

  Args:
    stddev: sigma (> 0), stddev of the noise on the released sum.
    l2_sensitivity: Delta_2 (>= 0), in the same units.
    delta: in (0, 1).

  Returns:
    epsilon in [0, 1].

  Raises:
    ValueError: on bad input, or if the bound exceeds 1.

  Privacy:
    (epsilon, delta)-DP for neighbours whose sums differ by at most Delta_2
    in L2 norm (Dwork & Roth 2014, Thm. A.1, which assumes epsilon < 1; the
    boundary epsilon = 1 follows by continuity).

  References:
    Dwork & Roth, "The Algorithmic Foundations of Differential Privacy",
    2014, Thm. A.1; Agarwal et al. 2018, Theorem 2.

  Example:
    >>> round(gaussian_protocol_epsilon(10.0, 1.0, 1e-5), 4)
    0.4845
  """
  _validate.positive(stddev=stddev)
  _validate.non_negative(l2_sensitivity=l2_sensitivity)
  _validate.open_unit(delta=delta)
  eps = (float(l2_sensitivity) * math.sqrt(2 * math.log(1.25 / float(delta)))
         / float(stddev))
  if eps > 1:
    raise ValueError(
        f'The classical Gaussian bound gives epsilon={eps:.6g} > 1 for '
        f'stddev={stddev}, l2_sensitivity={l2_sensitivity}, '
        f'delta={delta}, where it is not proved; use epsilon('
        f'gaussian_event(stddev / l2_sensitivity), delta) for the tight '
        'value.')
  return eps


def classical_gaussian_stddev(epsilon: float, delta: float,
                              l2_sensitivity: float) -> float:
  """Classical Gaussian-mechanism stddev: Delta_2 sqrt(2 ln(1.25/delta)) / eps.

  The inverse of ``gaussian_protocol_epsilon``. The bound is proved only for
  epsilon <= 1, so a larger epsilon raises. ``gaussian_stddev`` (exact) and
  ``calibrate`` on ``gaussian_event`` (an accountant) give less noise for the same
  (epsilon, delta).

  Args:
    epsilon: in (0, 1].
    delta: in (0, 1).
    l2_sensitivity: Delta_2 (>= 0), the L2 distance of neighbouring values
      of the query (e.g. of the sums, for a protocol on a sum).

  Returns:
    the stddev sigma of the noise on the query.

  Raises:
    ValueError: on bad input, or if epsilon > 1.

  Privacy:
    The Gaussian mechanism with this sigma is (epsilon, delta)-DP for
    neighbours at L2 distance <= Delta_2; its event is
    ``gaussian_event(sigma / l2_sensitivity)``.

  References:
    Dwork & Roth, "The Algorithmic Foundations of Differential Privacy",
    2014, Thm. A.1; Agarwal et al., cpSGD, NeurIPS 2018, Sec. 2.2 (the
    Gaussian curve of Fig. 1).

  Example:
    >>> round(classical_gaussian_stddev(0.5, 1e-5, 1.0), 4)
    9.6896
  """
  _validate.positive(epsilon=epsilon)
  _validate.open_unit(delta=delta)
  _validate.non_negative(l2_sensitivity=l2_sensitivity)
  if float(epsilon) > 1:
    raise ValueError(
        f'Expected epsilon={epsilon} <= 1: the classical Gaussian bound is '
        'not proved above 1; use gaussian_stddev or calibrate on '
        'gaussian_event.')
  return (float(l2_sensitivity) * math.sqrt(2 * math.log(1.25 / float(delta)))
          / float(epsilon))


def gaussian_stddev(epsilon: float, delta: float, l2_sensitivity: float,
                    rounds: int = 1) -> float:
  """Smallest stddev making ``rounds`` Gaussian releases (epsilon, delta)-DP.

  Exact: the Gaussian mechanism's privacy profile in closed form (Balle &
  Wang 2018), inverted by dp_accounting
  (``pld.accountant.get_smallest_gaussian_noise``). T releases of stddev
  sigma and sensitivity Delta_2 compose exactly into one release of
  sensitivity sqrt(T) Delta_2. The inverse of ``gaussian_epsilon``.

  Args:
    epsilon: > 0.
    delta: in (0, 1).
    l2_sensitivity: Delta_2 (> 0) of each release.
    rounds: T (> 0), the number of releases.

  Returns:
    sigma, the stddev of each release's noise.

  Privacy:
    Neighbours at L2 distance <= Delta_2 in every release (for a protocol on
    a sum: the sums'); one release's event is
    ``gaussian_event(sigma / l2_sensitivity)``.

  References:
    Balle & Wang, "Improving the Gaussian mechanism for differential
    privacy: analytical calibration and optimal denoising", ICML 2018,
    Thm. 8.

  Example:
    >>> round(gaussian_stddev(1.0, 1e-5, 1.0), 4)
    3.7306
    >>> round(gaussian_stddev(1.0, 1e-5, 1.0, rounds=10), 4)
    11.7973
  """
  _validate.positive(epsilon=epsilon, l2_sensitivity=l2_sensitivity)
  _validate.open_unit(delta=delta)
  _validate.positive_int(rounds=rounds)
  return float(pld_accountant.get_smallest_gaussian_noise(
      pld_common.DifferentialPrivacyParameters(epsilon, delta),
      num_queries=rounds, sensitivity=l2_sensitivity))


def gaussian_epsilon(stddev: float, l2_sensitivity: float, delta: float,
                     rounds: int = 1) -> float:
  """Exact epsilon of ``rounds`` Gaussian releases at ``delta``.

  T releases of stddev sigma and sensitivity Delta_2 compose exactly into
  one of sensitivity sqrt(T) Delta_2 (their privacy-loss distributions are
  Gaussian); its hockey-stick divergence is dp_accounting's closed form
  (``GaussianPrivacyLoss.get_delta_for_epsilon``), inverted by 60 steps of
  bisection. The upper end of the bracket is returned, so the epsilon is
  never too small. The inverse of ``gaussian_stddev``; the PLD accountant on
  ``gaussian_event(stddev / l2_sensitivity)`` agrees up to its
  discretization.

  Args:
    stddev: sigma (> 0) of each release's noise.
    l2_sensitivity: Delta_2 (> 0) of each release.
    delta: in (0, 1).
    rounds: T (> 0), the number of releases.

  Returns:
    epsilon (0.0 if the releases are (0, delta)-DP).

  Privacy:
    As ``gaussian_stddev``.

  References:
    Balle & Wang, ICML 2018, Thm. 8; Dong, Roth, Su, "Gaussian differential
    privacy", 2019, Cor. 3.3 (composition of Gaussian mechanisms).

  Example:
    >>> round(gaussian_epsilon(3.730631664679545, 1.0, 1e-5), 6)
    1.0
  """
  _validate.positive(stddev=stddev, l2_sensitivity=l2_sensitivity)
  _validate.open_unit(delta=delta)
  _validate.positive_int(rounds=rounds)
  loss = privacy_loss_mechanism.GaussianPrivacyLoss(
      stddev, l2_sensitivity * math.sqrt(rounds))
  delta_of = lambda e: float(loss.get_delta_for_epsilon(e))
  if delta_of(0.0) <= delta:
    return 0.0
  lo, hi = 0.0, 1.0
  while delta_of(hi) > delta:
    lo, hi = hi, hi * 2
  for _ in range(60):
    mid = (lo + hi) / 2
    if delta_of(mid) > delta:
      lo = mid
    else:
      hi = mid
  return hi
