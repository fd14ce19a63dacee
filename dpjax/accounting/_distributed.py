"""RDP of the distributed discrete Gaussian and Skellam mechanisms.

dp_accounting has no event for either mechanism, and neither bound is exactly
representable by its events (the DDG bound is a minimum of three curves, one
of them ``ZCDpEvent(rho, xi)``; the Skellam bound is not linear in the
order), so both are dpjax events whose RDP curve dpjax's RDP accountant
(``make_accountant("rdp")``) composes, alone or Poisson-subsampled
(``sampling_rate < 1``, the general upper bound of Zhu & Wang 2019, Thm. 5).
Every quantity here is in the integer units of the scaled, rounded vectors
(a client's vector x becomes round(R x / gamma)); the protocol companions in
``dpjax.distributed`` convert from real units.
"""

import math

import attr
import dp_accounting
import numpy as np
from scipy import special

from dpjax import _validate


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DistributedDiscreteGaussianDpEvent(dp_accounting.DpEvent):
  """Sum of n clients' vectors, each with its own N_Z(0, sigma^2)^d noise.

  Attributes:
    sigma: each client's discrete Gaussian parameter (integer units).
    num_clients: n, the number of noise shares in the sum.
    l2_sensitivity: Delta_2, L2 bound of the change of the integer sum.
    l1_sensitivity: Delta_1, L1 bound of the same change.
    dimension: d, the number of coordinates summed.
  """
  sigma: float
  num_clients: int
  l2_sensitivity: float
  l1_sensitivity: float
  dimension: int


@attr.s(frozen=True, slots=True, auto_attribs=True)
class SkellamDpEvent(dp_accounting.DpEvent):
  """Integer sum plus symmetric Skellam noise of total variance ``variance``.

  Attributes:
    variance: total variance V of the noise per coordinate (Sk(mu) =
      Poisson(mu) - Poisson(mu) has variance 2 mu; n clients of Sk(mu) give
      Sk(n mu), V = 2 n mu).
    l2_sensitivity: Delta_2 (integer units).
    l1_sensitivity: Delta_1 (integer units).
  """
  variance: float
  l2_sensitivity: float
  l1_sensitivity: float


EVENT_TYPES = (DistributedDiscreteGaussianDpEvent, SkellamDpEvent)


def rounded_l2_norm_bound(l2_norm: float, dimension: int,
                          beta: float) -> float:
  """L2 norm bound after conditional randomized rounding to Z^d.

  A vector of L2 norm <= c (already scaled) rounded coordinate-wise at
  random has norm <= c + sqrt(d) always, and at most
  sqrt(c^2 + d/4 + sqrt(2 ln(1/beta)) (c + sqrt(d)/2)) with probability
  >= 1 - beta; conditional rounding retries until the rounded vector meets
  the smaller of the two, which is the bound returned (beta = 0: the
  deterministic c + sqrt(d)).

  Args:
    l2_norm: c > 0, the norm bound of the scaled vector.
    dimension: d >= 1.
    beta: in [0, 1).

  Returns:
    The rounded vector's L2 norm bound.

  References:
    Kairouz, Liu, Steinke, "The Distributed Discrete Gaussian Mechanism for
    Federated Learning with Secure Aggregation", ICML 2021, Sec. 4.1
    (conditional randomized rounding; Thm. 1 of arXiv 2102.06387v1 as cited
    by google-research/federated ``distributed_dp``).

  Example:
    >>> round(rounded_l2_norm_bound(100.0, 100, math.exp(-0.5)), 4)
    100.6479
  """
  _validate.positive(l2_norm=l2_norm)
  _validate.positive_int(dimension=dimension)
  if not 0 <= beta < 1:
    raise ValueError(f'Expected beta={beta} in [0, 1).')
  c, d = float(l2_norm), int(dimension)
  bound = c + math.sqrt(d)
  if beta == 0:
    return bound
  sq = c**2 + d / 4 + math.sqrt(2 * math.log(1 / beta)) * (c + math.sqrt(d) / 2)
  return min(bound, math.sqrt(sq))


def rounded_l1_norm_bound(l2_norm_bound: float, dimension: int) -> float:
  """L1 bound of an integer vector of L2 norm <= B: B min(sqrt(d), B).

  ||z||_1 <= sqrt(d) ||z||_2 always, and ||z||_1 <= ||z||_2^2 for integer z
  (|z_j| <= z_j^2).

  Example:
    >>> rounded_l1_norm_bound(3.0, 100)
    9.0
  """
  _validate.positive(l2_norm_bound=l2_norm_bound)
  _validate.positive_int(dimension=dimension)
  b = float(l2_norm_bound)
  return b * min(math.sqrt(dimension), b)


def ddg_tau(sigma: float, num_clients: int) -> float:
  """tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k / (k + 1)).

  How far the sum of n N_Z(0, sigma^2) is from N_Z(0, n sigma^2); 0 for
  n = 1.

  References:
    Kairouz, Liu, Steinke, ICML 2021, Thm. 1 (sums of discrete Gaussians).

  Example:
    >>> ddg_tau(1.0, 1), f'{ddg_tau(1.0, 100):.4g}'
    (0.0, '0.0005478')
  """
  _validate.positive(sigma=sigma)
  _validate.positive_int(num_clients=num_clients)
  k = np.arange(1, int(num_clients), dtype=np.float64)
  return float(10 * np.sum(np.exp(-2 * math.pi**2 * float(sigma)**2
                                  * k / (k + 1))))


def _check_sensitivities(l2, l1):
  _validate.non_negative(l2_sensitivity=l2, l1_sensitivity=l1)


def ddg_event(sigma: float, num_clients: int, l2_sensitivity: float,
              l1_sensitivity: float, dimension: int,
              sampling_rate: float = 1.0) -> dp_accounting.DpEvent:
  """One round of the distributed discrete Gaussian mechanism.

  RDP of order a (``ddg_rdp``), with s = sqrt(n) sigma and tau =
  ``ddg_tau(sigma, n)``:
  min(a D2^2 / (2 s^2) + tau d,
  (a/2) (D2^2 / s^2 + 2 tau D1 / s + tau^2 d),
  (a/2) (D2 / s + tau sqrt(d))^2).

  Args:
    sigma: each client's discrete Gaussian parameter (integer units).
    num_clients: n >= 1 noise shares.
    l2_sensitivity: Delta_2 (integer units).
    l1_sensitivity: Delta_1 (integer units).
    dimension: d >= 1.
    sampling_rate: Poisson client sampling rate q in (0, 1].

  Returns:
    ``DistributedDiscreteGaussianDpEvent``, wrapped in
    ``PoissonSampledDpEvent(q, ...)`` when q < 1. Compose with
    ``epsilon(..., accountant="rdp")`` or a ``PrivacyLedger``.

  Privacy:
    For an observer of the modular sum only (secure aggregation), with the
    neighbouring relation the sensitivities were computed for.

  References:
    Kairouz, Liu, Steinke, ICML 2021, Thm. 1 and Prop. 14 / eq. (17)
    (numbering of arXiv 2102.06387 as cited by the reference code).

  Example:
    >>> ev = ddg_event(10.0, 100, 50.0, 500.0, 1000)
    >>> round(epsilon(ev, 1e-5), 3)
    2.166
  """
  _validate.positive(sigma=sigma)
  _validate.positive_int(num_clients=num_clients, dimension=dimension)
  _check_sensitivities(l2_sensitivity, l1_sensitivity)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  ev = DistributedDiscreteGaussianDpEvent(
      float(sigma), int(num_clients), float(l2_sensitivity),
      float(l1_sensitivity), int(dimension))
  return _sampled(ev, sampling_rate)


def skellam_event(variance: float, l2_sensitivity: float,
                  l1_sensitivity: float,
                  sampling_rate: float = 1.0) -> dp_accounting.DpEvent:
  """One round of the (distributed) Skellam mechanism.

  RDP of order a (``skellam_rdp``), with V the total variance:
  a D2^2 / (2 V) + min(((2 a - 1) D2^2 + 6 D1) / (4 V^2), 3 D1 / (2 V)).

  Args:
    variance: total noise variance V > 0 per coordinate (integer units).
    l2_sensitivity: Delta_2.
    l1_sensitivity: Delta_1.
    sampling_rate: Poisson client sampling rate q in (0, 1].

  Returns:
    ``SkellamDpEvent``, wrapped in ``PoissonSampledDpEvent`` when q < 1.

  Privacy:
    As ``ddg_event``.

  References:
    Agarwal, Kairouz, Liu, "The Skellam Mechanism for Differentially Private
    Federated Learning", NeurIPS 2021, Sec. 3 (RDP of the multi-dimensional
    Skellam mechanism; the form of google-research/federated
    ``distributed_dp/accounting_utils.py``).

  Example:
    >>> round(epsilon(skellam_event(2500.0, 50.0, 500.0), 1e-5), 3)
    4.754
  """
  _validate.positive(variance=variance)
  _check_sensitivities(l2_sensitivity, l1_sensitivity)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  ev = SkellamDpEvent(float(variance), float(l2_sensitivity),
                      float(l1_sensitivity))
  return _sampled(ev, sampling_rate)


def _sampled(ev, q):
  if q == 1:
    return ev
  return dp_accounting.PoissonSampledDpEvent(float(q), ev)


def ddg_rdp(event: DistributedDiscreteGaussianDpEvent,
            orders) -> np.ndarray:
  """RDP of ``event`` at real orders > 1 (Prop. 14 holds for every a > 1)."""
  a = np.asarray(orders, np.float64)
  s = math.sqrt(event.num_clients) * event.sigma
  tau = ddg_tau(event.sigma, event.num_clients)
  l2, l1, d = event.l2_sensitivity / s, event.l1_sensitivity / s, \
      event.dimension
  return np.minimum.reduce([
      a * l2**2 / 2 + tau * d,
      a / 2 * (l2**2 + 2 * l1 * tau + tau**2 * d),
      a / 2 * (l2 + math.sqrt(d) * tau)**2])


def skellam_rdp(event: SkellamDpEvent, orders) -> np.ndarray:
  """RDP of ``event``; a non-integer order a is bounded by the value at
  ceil(a) (the bound is stated for integer orders and RDP is
  non-decreasing in the order)."""
  a = np.ceil(np.asarray(orders, np.float64))
  v, l2, l1 = event.variance, event.l2_sensitivity, event.l1_sensitivity
  return a * l2**2 / (2 * v) + np.minimum(
      ((2 * a - 1) * l2**2 + 6 * l1) / (4 * v**2), 3 * l1 / (2 * v))


def event_rdp(event: dp_accounting.DpEvent, orders) -> np.ndarray:
  """RDP curve of a dpjax distributed event at ``orders``."""
  if isinstance(event, DistributedDiscreteGaussianDpEvent):
    return ddg_rdp(event, orders)
  if isinstance(event, SkellamDpEvent):
    return skellam_rdp(event, orders)
  raise ValueError(f'No RDP curve for {type(event).__name__}.')


def _log_comb(n, k):
  return (special.gammaln(n + 1) - special.gammaln(k + 1)
          - special.gammaln(n - k + 1))


def subsampled_rdp(event: dp_accounting.DpEvent, q: float,
                   orders) -> np.ndarray:
  """RDP of the Poisson-subsampled ``event`` (add/remove-one neighbours).

  Zhu & Wang's general upper bound at the integer order A = ceil(a) >= 2:
  (1/(A-1)) log[(1-q)^(A-1) (A q - q + 1) + C(A,2) q^2 (1-q)^(A-2) e^eps(2)
  + 3 sum_{l=3}^A C(A,l) (1-q)^(A-l) q^l e^((l-1) eps(l))], capped by the
  unsampled RDP at a.

  References:
    Zhu, Wang, "Poisson Subsampled Renyi Differential Privacy", ICML 2019,
    Thm. 5.
  """
  orders = np.asarray(orders, np.float64)
  base = event_rdp(event, orders)
  if q == 1:
    return base
  log1mq, logq = math.log1p(-q), math.log(q)
  out = np.empty_like(orders)
  for i, a in enumerate(orders):
    big = max(2, int(math.ceil(a)))
    ls = np.arange(2, big + 1, dtype=np.float64)
    terms = ((ls - 1) * event_rdp(event, ls) + _log_comb(big, ls)
             + (big - ls) * log1mq + ls * logq)
    logs = np.concatenate([[(big - 1) * log1mq + math.log(big * q - q + 1)],
                           terms])
    weights = np.concatenate([[1.0, 1.0], np.full(len(ls) - 1, 3.0)])
    val = special.logsumexp(logs, b=weights) / (big - 1)
    out[i] = min(val, base[i])
  return out
