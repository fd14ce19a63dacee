"""Balls-in-bins (random allocation) epochs of the Gaussian: event and RDP.

One epoch of ``num_steps`` Gaussian steps in which each example is put in
exactly one step, uniformly at random and independently of the others
(Chua et al. 2025, "Balls-and-Bins Sampling for DP-SGD"; the 1-out-of-t
random allocation of Feldman & Shenfeld 2025). ``BallsInBinsDpEvent`` is
one such epoch; the RDP accountant composes it with ``balls_in_bins_rdp``,
an upper bound in both directions of add/remove-one neighbours.

Derivation. Write k = num_steps and s = noise_multiplier (noise stddev s C
on a clipped sum of sensitivity C). For adaptive steps, the epoch is
dominated by the pair P = (1/k) sum_j N(e_j, s^2 I_k), Q = N(0, s^2 I_k):
the dominating pair (P_B, Q_B) of the adaptive batch linear query mechanism
ABLQ_B under balls-and-bins batching, on which Chua et al. 2025 build their
accounting; Feldman & Shenfeld 2025 reduce random allocation of adaptive
steps to the same pair. With
L_j = exp(y_j / s^2 - 1 / (2 s^2)), the likelihood ratio is
P / Q (y) = (1/k) sum_j L_j, and under Q the L_j are independent with
E[L_j^b] = exp(b (b - 1) / (2 s^2)) for every real b.

Remove (D_a(P || Q), integer a >= 2): expanding (sum_j L_j)^a by the
multinomial theorem, E_Q[(P/Q)^a] = k^-a sum_{a_1+..+a_k=a}
a! / prod(a_j!) prod_j exp(a_j (a_j - 1) / (2 s^2))
= k^-a a! [z^a] (sum_m c_m z^m)^k with c_m = exp(m (m - 1) / (2 s^2)) / m!.
This is exact (Feldman & Shenfeld 2025 give the same sum over the
partitions of a); it is evaluated in log space, and the RDP at a fractional
order is taken at the next integer (D_a is non-decreasing in a, van Erven &
Harremoes 2014, Thm. 3), an upper bound.

Add (D_a(Q || P), real a > 1; derived). With b = a - 1, D_a(Q || P) =
(1/b) log M, M = E_Q[R^-b], R = (1/k) sum_j L_j, E_Q[R] = 1,
Var_Q[R] = (e^(1/s^2) - 1) / k. Two bounds on M, the smaller is used:
(i) AM-GM: R >= G = prod_j L_j^(1/k), so M <= E[G^-b] = prod_j
E[L_j^(-b/k)] = exp(b (b/k + 1) / (2 s^2)), i.e. D_a(Q || P) <=
a / (2 k s^2) + (1 - 1/k) / (2 s^2) (a Gaussian of noise s sqrt(k) plus a
constant). (ii) For each a0 in (0, 1) on a fixed grid: for R >= a0,
Taylor's theorem with the Lagrange remainder gives R^-b <= p(R) =
1 - b (R - 1) + (b (b + 1) / 2) a0^(-b-2) (R - 1)^2, and for R < a0, p(R)
>= 1 > 0; so R^-b <= p(R) + R^-b 1{R < a0} everywhere, and by
Cauchy-Schwarz M <= 1 + (b (b + 1) / 2) a0^(-b-2) Var_Q[R]
+ E[G^-2b]^(1/2) P[R < a0]^(1/2), with E[G^-2b] = exp(b (2b/k + 1) / s^2)
as in (i). The lower tail, by Chernoff: for u >= 0,
P[R < a0] <= e^(u k a0) E[e^(-u L)]^k, and e^-x <= 1 - x + x^2/2 and
e^-x <= 1 - x + x^2/2 - x^3/6 + x^4/24 for x >= 0 (Taylor, the remainder
-e^-y x^n / n! <= 0 for odd n), with E[L^n] = e^(n (n - 1) / (2 s^2)), bound
E[e^(-u L)]; the first with the best u gives exp(-k (1 - a0)^2 /
(2 E[L^2])) (Maurer 2003, "A bound on the deviation probability for sums
of non-negative random variables", Thm. 1), the second is minimized over a
fixed grid of u. Bound (ii) is the tighter one at large k.

The epoch's RDP is the larger of the two at each order; epochs compose by
adding RDP (Mironov 2017, Prop. 1). A rounding margin of 1e-9 relative plus
1e-12 absolute is added.
"""

import math

import attr
import dp_accounting
import numpy as np
from scipy import special

from dpjax import _validate

# The largest number of steps per epoch: the sampler draws a uniform step
# from two 32-bit words with 32-bit arithmetic, exact below 2^16.
BALLS_IN_BINS_MAX_STEPS = 2**16 - 1


@attr.s(frozen=True, slots=True, auto_attribs=True)
class BallsInBinsDpEvent(dp_accounting.DpEvent):
  """One epoch: each example in exactly one of ``num_steps`` Gaussian steps.

  Add/remove-one neighbours; the noise multiplier is relative to the
  clipped-sum sensitivity C. The RDP accountant composes it with
  ``balls_in_bins_rdp``; the PLD accountant does not take it.

  Attributes:
    noise_multiplier: s >= 0 of every step.
    num_steps: k, the steps of the epoch (1 <= k <= 65535).
    truncation_probability: tv in [0, 1], a bound on the chance, over the
      epoch, that the sampler's batches differ from untruncated uniform
      balls-in-bins (a full batch, or the draw's non-uniform tail);
      ``dpjax.accounting.epsilon`` adds it to delta as for truncated
      Poisson (``_truncation.untruncate``).
  """
  noise_multiplier: float
  num_steps: int
  truncation_probability: float = 0.0


def _validate_event(noise_multiplier, num_steps):
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.positive_int(num_steps=num_steps)
  if num_steps > BALLS_IN_BINS_MAX_STEPS:
    raise ValueError(f'Expected num_steps={num_steps} <= '
                     f'{BALLS_IN_BINS_MAX_STEPS}.')


def balls_in_bins_event(noise_multiplier: float, num_steps: int, *,
                        truncation_probability: float = 0.0
                        ) -> BallsInBinsDpEvent:
  """A validated ``BallsInBinsDpEvent`` (one epoch).

  Example:
    >>> balls_in_bins_event(1.0, 100).num_steps
    100
  """
  _validate_event(noise_multiplier, num_steps)
  if not 0 <= truncation_probability <= 1:
    raise ValueError('Expected truncation_probability in [0, 1], got '
                     f'{truncation_probability}.')
  return BallsInBinsDpEvent(float(noise_multiplier), int(num_steps),
                            float(truncation_probability))


def _log_poly_mul(a, b, degree):
  """Log-coefficients of the product of two log-coefficient polynomials."""
  n = np.arange(degree + 1)
  j = n[:, None] - n[None, :]  # row n, column i: a_i b_(n - i)
  terms = np.where(j >= 0, a[None, :] + b[np.maximum(j, 0)], -np.inf)
  with np.errstate(invalid='ignore'):
    return special.logsumexp(terms, axis=1)


def _log_power(log_c, k, degree):
  """Log-coefficients of (sum_m c_m z^m)^k up to ``degree``."""
  result = np.full(degree + 1, -np.inf)
  result[0] = 0.0
  base = log_c.copy()
  while k:
    if k & 1:
      result = _log_poly_mul(result, base, degree)
    k >>= 1
    if k:
      base = _log_poly_mul(base, base, degree)
  return result


def _log_lower_tail(s2, k, a0):
  """log of the Chernoff bound on P[R < a0] (module docstring), [1, n]."""
  maurer = -k * (1 - a0)**2 / (2 * math.exp(1 / s2))
  if 6 / s2 > 700:  # E[L^4] overflows: Maurer's alone
    return maurer
  m2, m3, m4 = (math.exp(n * (n - 1) / (2 * s2)) for n in (2, 3, 4))
  u = np.geomspace(1e-4, 10.0, 400)
  terms = np.stack([np.ones_like(u), -u, u**2 * m2 / 2, -u**3 * m3 / 6,
                    u**4 * m4 / 24])
  # poly >= E[e^(-u L)] > 0; rounded up by a bound on the summation's
  # rounding error, so the result stays an upper bound.
  poly = terms.sum(axis=0) + 1e-14 * np.abs(terms).sum(axis=0)
  log_mgf = np.log(poly)
  quartic = (k * (u[None, :] * a0.T + log_mgf[None, :])).min(axis=1)
  return np.minimum(maurer, quartic[None, :])


def _add_rdp(s2, k, orders):
  """min of bounds (i) and (ii) on D_a(Q || P) (module docstring)."""
  amgm = orders / (2 * k * s2) + (1 - 1 / k) / (2 * s2)
  if k == 1 or not 0 < 1 / s2 <= 700:  # (ii) needs 0 < e^(1/s^2) - 1 < inf
    return amgm
  b = (orders - 1)[:, None]
  a0 = np.linspace(0.02, 0.98, 49)[None, :]
  log_m2 = 1 / s2
  taylor = (np.log(b * (b + 1) / 2) - (b + 2) * np.log(a0)
            + math.log(math.expm1(log_m2)) - math.log(k))
  tail = b * (2 * b / k + 1) / (2 * s2) + _log_lower_tail(s2, k, a0) / 2
  log_m = np.logaddexp(0.0, np.logaddexp(taylor, tail))
  return np.minimum(amgm, (log_m / b).min(axis=1))


def balls_in_bins_rdp(noise_multiplier: float, num_steps: int,
                      orders) -> np.ndarray:
  """Upper bound on one epoch's RDP at each order (both directions).

  See the module docstring for the derivation.

  Example:
    >>> r = balls_in_bins_rdp(1.0, 1, [2.0, 8.0])  # one step: the Gaussian
    >>> [round(float(x), 6) for x in r]
    [1.0, 4.0]
  """
  _validate_event(noise_multiplier, num_steps)
  orders = np.asarray(orders, np.float64)
  if orders.ndim != 1 or not (orders > 1).all():
    raise ValueError('Expected a 1-D sequence of orders > 1.')
  if noise_multiplier == 0:
    return np.full(orders.shape, np.inf)
  s2, k = float(noise_multiplier)**2, int(num_steps)
  add = _add_rdp(s2, k, orders)
  ints = np.ceil(orders).astype(int)
  degree = int(ints.max())
  m = np.arange(degree + 1)
  log_c = m * (m - 1) / (2 * s2) - special.gammaln(m + 1)
  log_coef = _log_power(log_c, k, degree)
  a = ints.astype(np.float64)
  remove = (special.gammaln(a + 1) + log_coef[ints] - a * math.log(k)) / (
      a - 1)
  rdp = np.maximum(np.maximum(add, remove), 0.0)
  return rdp * (1 + 1e-9) + 1e-12
