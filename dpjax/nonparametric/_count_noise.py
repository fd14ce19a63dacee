"""Exact discrete Laplace noise on released counts.

Float Laplace noise on a count leaks through its low-order bits: ``0 + L``
and ``1 + L`` land on different float grids, so a released value tells a
count of 0 from a count of 1 (Mironov 2012). Counts are integers, so every
non-parametric release adds exact discrete Laplace noise
(``dpjax.noise.discrete_laplace``) to int32 counts instead. On counts of L1
sensitivity Delta, noise of exact scale b' is (Delta / b')-DP (the
geometric mechanism; Ghosh, Roughgarden, Sundararajan 2009; Canonne, Kamath,
Steinke 2020): the epsilon of continuous Laplace(b'). The stated epsilon is
computed from the b' that is sampled (``discrete_laplace_scale``), never from
the requested one.

Example:
  >>> count_epsilon(1.0, 1), count_epsilon(float('inf'), 3)
  (1.0, inf)
"""

import fractions
import math

import jax
import jax.numpy as jnp

from dpjax import _numerics
from dpjax import _validate
from dpjax import noise

_Fraction = fractions.Fraction
# The sampler's smallest scale: DLap(2^-10) is 0 but with chance < e^-1000.
MIN_COUNT_SCALE = _Fraction(1, 1024)


def count_noise_scale(epsilon: float, sensitivity: int) -> _Fraction:
  """The discrete Laplace scale for counts of L1 ``sensitivity`` at epsilon.

  Delta / epsilon as an exact Fraction (so the sampled b' >= Delta /
  epsilon), at least ``MIN_COUNT_SCALE``; 0 (no noise) for epsilon = inf.

  Args:
    epsilon: the budget, > 0 and concrete (inf: no noise).
    sensitivity: Delta, a positive integer.

  Returns:
    The scale to pass to ``dpjax.noise.discrete_laplace``.

  Raises:
    ValueError: epsilon so small that the scale exceeds the sampler's range.

  Example:
    >>> count_noise_scale(0.5, 3)
    Fraction(6, 1)
  """
  _validate.positive(epsilon=epsilon)
  if _is_inf(epsilon):
    return _Fraction(0)
  eps = _numerics.as_fraction(epsilon, 'epsilon')
  scale = max(_Fraction(int(sensitivity)) / eps, MIN_COUNT_SCALE)
  if scale > noise.MAX_DISCRETE_SCALE:
    raise ValueError(
        f'Expected epsilon={epsilon} large enough that the count noise scale '
        f'(L1 sensitivity {sensitivity} / epsilon) is at most 2^21.')
  return scale


def count_epsilon(epsilon: float, sensitivity: int) -> float:
  """The epsilon of the noise ``count_noise_scale`` gives: Delta / b'.

  b' is the exact scale the sampler draws; Delta / b' is rounded up to a
  float. It is at most ``epsilon`` (equal when epsilon / Delta has at most
  30 significant bits), and Delta 2^10 above that (the smallest scale).

  Example:
    >>> count_epsilon(2.0, 1), count_epsilon(1e6, 1)
    (2.0, 1024.0)
  """
  scale = count_noise_scale(epsilon, sensitivity)
  if scale == 0:
    return math.inf
  return float_up(_Fraction(int(sensitivity))
                   / noise.discrete_laplace_scale(scale))


def add_count_noise(key: jax.Array, counts: jax.Array,
                    scale: _Fraction) -> jax.Array:
  """int32 ``counts`` + exact discrete Laplace noise of ``scale``.

  Example:
    >>> add_count_noise(jax.random.key(0), jnp.zeros(3), 0).tolist()
    [0, 0, 0]
  """
  return counts.astype(jnp.int32) + noise.discrete_laplace(
      key, counts.shape, scale=scale)


def _is_inf(value) -> bool:
  return _validate.concrete(value) and math.isinf(float(value))


def float_up(q: _Fraction) -> float:
  """The smallest float >= q (an exact rational).

  Example:
    >>> float_up(fractions.Fraction(1, 3)) > 1 / 3
    True
  """
  f = float(q)
  return f if _Fraction(f) >= q else math.nextafter(f, math.inf)
