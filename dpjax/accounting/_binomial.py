"""cpSGD accounting: the Binomial mechanism, its sensitivities, composition.

The Binomial mechanism releases M(D) = f(D) + s (Z - N p), Z ~ Bin(N, p)^d,
for a query whose values on neighbouring datasets differ by a vector of the
lattice s Z^d. Its guarantee (Theorem 1 of cpSGD) has no dp_accounting event,
so its event is ``EpsilonDeltaDpEvent(binomial_epsilon(...), delta)``, which
dpjax's PLD accountant composes optimally for generic (epsilon, delta)
mechanisms. ``binomial_min_trials`` is the smallest N the theorem covers; the
smallest N meeting a target epsilon is ``calibrate`` on that event, started
at ``binomial_min_trials`` (an integer start searches integers). The exact
privacy of the scalar mechanism is in ``_binomial_exact``.
"""

import math

from dpjax import _validate


def binomial_epsilon(trials: int, p: float, scale: float, delta: float,
                     dimension: int, l1_sensitivity: float,
                     l2_sensitivity: float, linf_sensitivity: float) -> float:
  """Epsilon of one release of the Binomial mechanism (cpSGD Theorem 1).

  With v = N p (1 - p),

    eps = D2 sqrt(2 ln(1.25/delta)) / (s sqrt(v))
        + (D2 c_p sqrt(ln(10/delta)) + D1 b_p) / (s v (1 - delta/10))
        + ((2/3) Dinf ln(1.25/delta) + Dinf d_p ln(20 d/delta) ln(10/delta))
          / (s v),

  c_p = sqrt(2) (3p^3 + 3(1-p)^3 + 2p^2 + 2(1-p)^2),
  b_p = (2/3)(p^2 + (1-p)^2) + 1 - 2p, d_p = (4/3)(p^2 + (1-p)^2).

  Args:
    trials: N (> 0). In cpSGD, n clients with m trials each give N = n m.
    p: success probability in (0, 1).
    scale: lattice spacing s (> 0); for cpSGD the quantizer's spacing
      2 X_max / (k - 1).
    delta: in (0, 1).
    dimension: d (> 0).
    l1_sensitivity: Delta_1 (>= 0), in the same units as ``scale`` (only
      Delta / s enters); e.g. from ``cpsgd_sensitivities``.
    l2_sensitivity: Delta_2 (>= 0), same units.
    linf_sensitivity: Delta_inf (>= 0), same units.

  Returns:
    epsilon (a float).

  Raises:
    ValueError: on bad input, or if N p (1 - p) < max(23 ln(10 d / delta),
      2 Delta_inf / s), where the theorem does not apply.

  Privacy:
    (epsilon, delta)-DP for neighbours D, D' with f(D) - f(D') in s Z^d and
    ||f(D) - f(D')||_q <= Delta_q (q = 1, 2, inf). In cpSGD the theorem is
    applied to the sum of the clients' lattice-valued messages (the server
    sees only the sum, e.g. under secure aggregation), replace-one
    neighbours.

  References:
    Agarwal, Suresh, Yu, Kumar, McMahan, "cpSGD: Communication-efficient and
    differentially-private distributed SGD", NeurIPS 2018, Theorem 1.

  Example:
    >>> round(binomial_epsilon(2000, 0.5, 1.0, 1e-6, 1, 1.0, 1.0, 1.0), 6)
    0.637513
  """
  _validate.positive_int(trials=trials, dimension=dimension)
  _validate.open_unit(p=p, delta=delta)
  _validate.positive(scale=scale)
  _validate.non_negative(l1_sensitivity=l1_sensitivity,
                         l2_sensitivity=l2_sensitivity,
                         linf_sensitivity=linf_sensitivity)
  p, s, delta = float(p), float(scale), float(delta)
  q = 1 - p
  v = trials * p * q
  need = _theorem1_need(s, delta, dimension, linf_sensitivity)
  if v < need:
    raise ValueError(
        f'Theorem 1 needs trials * p * (1 - p) >= max(23 ln(10 d / delta),'
        f' 2 linf_sensitivity / scale) = {need:.6g}; got trials='
        f'{trials}, p={p} (N p (1-p) = {v:.6g}), dimension={dimension}, '
        f'delta={delta}, linf_sensitivity={linf_sensitivity}, scale={scale}.')
  c_p = math.sqrt(2) * (3 * p**3 + 3 * q**3 + 2 * p**2 + 2 * q**2)
  b_p = 2 / 3 * (p**2 + q**2) + 1 - 2 * p
  d_p = 4 / 3 * (p**2 + q**2)
  d1, d2, dinf = (float(x) for x in (l1_sensitivity, l2_sensitivity,
                                     linf_sensitivity))
  ln10 = math.log(10 / delta)
  ln125 = math.log(1.25 / delta)
  return (d2 * math.sqrt(2 * ln125) / (s * math.sqrt(v))
          + (d2 * c_p * math.sqrt(ln10) + d1 * b_p) / (s * v * (1 - delta / 10))
          + (2 / 3 * dinf * ln125
             + dinf * d_p * math.log(20 * dimension / delta) * ln10) / (s * v))


def _theorem1_need(scale: float, delta: float, dimension: int,
                   linf_sensitivity: float) -> float:
  """max(23 ln(10 d / delta), 2 Delta_inf / s): Theorem 1 needs N p q >= it."""
  return max(23 * math.log(10 * dimension / delta),
             2 * float(linf_sensitivity) / scale)


def advanced_composition(epsilon: float, delta: float, rounds: int,
                         delta_slack: float) -> tuple[float, float]:
  """k-fold composition of an (epsilon, delta)-DP mechanism.

  Advanced composition gives (eps', k delta + delta') with
  eps' = sqrt(2 k ln(1/delta')) epsilon + k epsilon (e^epsilon - 1). Basic
  composition gives (k epsilon, k delta). If k epsilon <= eps', basic
  composition is better in both coordinates and is returned instead;
  otherwise the advanced pair is returned (the two are never mixed, so the
  result is always one valid guarantee). For tighter numbers compose
  ``EpsilonDeltaDpEvent``s with ``epsilon(..., accountant="pld")``.

  Args:
    epsilon: per-round epsilon (>= 0).
    delta: per-round delta in [0, 1).
    rounds: k (> 0).
    delta_slack: delta' in (0, 1).

  Returns:
    (total epsilon, total delta), the delta capped at 1.

  References:
    Dwork, Rothblum, Vadhan, "Boosting and differential privacy", FOCS 2010;
    Dwork & Roth 2014, Thm. 3.20 (advanced) and Thm. 3.16 (basic).

  Example:
    >>> eps, delta = advanced_composition(0.1, 1e-6, 100, 1e-5)
    >>> round(eps, 4), round(delta, 10)
    (5.8502, 0.00011)
  """
  _validate.non_negative(epsilon=epsilon, delta=delta)
  if not float(delta) < 1:
    raise ValueError(f'Expected delta={delta} in [0, 1).')
  _validate.positive_int(rounds=rounds)
  _validate.open_unit(delta_slack=delta_slack)
  eps, k = float(epsilon), rounds
  eps_adv = (math.sqrt(2 * k * math.log(1 / float(delta_slack))) * eps
             + k * eps * math.expm1(eps))
  if k * eps <= eps_adv:
    return k * eps, min(1.0, k * float(delta))
  return eps_adv, min(1.0, k * float(delta) + float(delta_slack))


def cpsgd_sensitivities(dimension: int, levels: int, linf_clip: float,
                        l2_norm_clip: float) -> tuple[float, float, float]:
  """Replace-one (L1, L2, L_inf) sensitivities of cpSGD's quantized sum.

  With X_max = ``linf_clip`` (the quantizer's per-coordinate clamp),
  s = 2 X_max / (k - 1) and D = ``l2_norm_clip``:
  Delta_inf = 2 X_max; Delta_2 = min(s (k-1) sqrt(d), 2 D + 2 s sqrt(d));
  Delta_1 = min(s (k-1) d, 2 sqrt(d) D + 2 s d). All are in real units; the
  difference of two quantized vectors lies in s Z^d, so pass ``scale=s`` with
  them to ``binomial_epsilon``.

  Proof. Replacing client i changes the sum by Q(X) - Q(X'), the difference
  of two quantized vectors (the other clients' messages and the Binomial
  noise do not depend on the replaced data, so fix them). (i) Each quantized
  vector lies in [-X_max, X_max]^d, so two differ by at most 2 X_max = s (k-1)
  per coordinate: Delta_inf <= 2 X_max, and hence Delta_2 <= s (k-1) sqrt(d),
  Delta_1 <= s (k-1) d. (ii) Clamping to [-X_max, X_max] is 1-Lipschitz per
  coordinate and stochastic rounding moves each clamped coordinate by at most
  s, so ||Q(X) - x|| <= s sqrt(d) in L2 and <= s d in L1 for the clamped x.
  By the triangle inequality ||Q(X) - Q(X')||_2 <= ||X - X'||_2 + 2 s sqrt(d)
  <= 2 D + 2 s sqrt(d), and ||Q(X) - Q(X')||_1 <= ||X - X'||_1 + 2 s d
  <= sqrt(d) ||X - X'||_2 + 2 s d <= 2 sqrt(d) D + 2 s d. The bounds hold for
  every outcome of the rounding (they are deterministic) and for any
  rotation applied before quantizing (rotations preserve ||X - X'||_2).

  Args:
    dimension: d (> 0).
    levels: k (>= 2).
    linf_clip: X_max (> 0), the quantizer's range [-X_max, X_max].
    l2_norm_clip: D (>= 0), the clients' L2 clip norm.

  Returns:
    (l1, l2, linf).

  References:
    Agarwal et al. 2018, Sec. 3 and eq. (10) (whose values we did not
    recover; these bounds are derived in this docstring).

  Example:
    >>> cpsgd_sensitivities(dimension=4, levels=9, linf_clip=1.0,
    ...                     l2_norm_clip=0.5)
    (4.0, 2.0, 2.0)
  """
  _validate.positive_int(dimension=dimension)
  _validate.integer_at_least(2, levels=levels)
  _validate.positive(linf_clip=linf_clip)
  _validate.non_negative(l2_norm_clip=l2_norm_clip)
  d, span, big_d = dimension, 2 * float(linf_clip), float(l2_norm_clip)
  s = span / (levels - 1)
  root_d = math.sqrt(d)
  l2 = min(span * root_d, 2 * big_d + 2 * s * root_d)
  l1 = min(span * d, 2 * root_d * big_d + 2 * s * d)
  return l1, l2, span


def binomial_min_trials(p: float, scale: float, delta: float, dimension: int,
                        linf_sensitivity: float) -> int:
  """Smallest N for which Theorem 1 applies (``binomial_epsilon`` is finite).

  Theorem 1 needs N p (1 - p) >= max(23 ln(10 d / delta), 2 Delta_inf / s).

  Args:
    p: success probability in (0, 1).
    scale: lattice spacing s (> 0).
    delta: in (0, 1).
    dimension: d (> 0).
    linf_sensitivity: Delta_inf (>= 0), in the units of ``scale``.

  Returns:
    the smallest N (> 0) meeting the condition, as ``binomial_epsilon``
    checks it.

  References:
    Agarwal et al. 2018, Theorem 1.

  Example:
    >>> binomial_min_trials(0.5, 1.0, 1e-6, 1, 1.0)  # 23 ln(1e7) / 0.25
    1483
  """
  _validate.positive_int(dimension=dimension)
  _validate.open_unit(p=p, delta=delta)
  _validate.positive(scale=scale)
  _validate.non_negative(linf_sensitivity=linf_sensitivity)
  p, q = float(p), 1 - float(p)
  need = _theorem1_need(float(scale), float(delta), dimension,
                        linf_sensitivity)
  trials = max(1, math.floor(need / (p * q)))
  while trials * p * q < need:
    trials += 1
  return trials
