"""Exact discrete Gaussian and discrete Laplace noise on Z and on eta Z.

The public samplers validate their scale on the host, turn it into the exact
constants of a rejection sampler (``_gaussian_params``, ``_laplace_params``)
and run it with ``_exact.exact_sample``. ``discrete_gaussian_sigma_squared``
and ``discrete_laplace_scale`` give the exact parameter that is sampled.

Example:
  >>> x = discrete_gaussian(jax.random.key(0), (1000,), sigma=2.0)
  >>> x.dtype, bool(jnp.all(x == jnp.round(x)))
  (dtype('int32'), True)
"""

import fractions
import functools
import math
import numbers

import jax
import jax.numpy as jnp

from dpjax import _numerics
from dpjax.noise import _exact

_Fraction = fractions.Fraction

# Largest scales the samplers accept (the exponent's fraction must fit in 64
# bits with >= 21 significant bits, and |output| < 2^31).
MAX_DISCRETE_SIGMA = 2.0**21
MAX_DISCRETE_SCALE = 2.0**21
_MIN_DISCRETE_SCALE = 2.0**-10
_PRECISION_BITS = 30  # significant bits of beta = 1/(2 sigma'^2), lambda = 1/b'
_MIN_PRECISION_BITS = 21


def _floor_log2(x: _Fraction) -> int:
  """floor(log2(x)) for a positive Fraction, exactly."""
  e = x.numerator.bit_length() - x.denominator.bit_length()
  if _Fraction(2)**e > x:
    e -= 1
  elif _Fraction(2)**(e + 1) <= x:
    e += 1
  return e


def _dyadic_floor(x: _Fraction, what: str) -> tuple[int, int]:
  """(c, k) with c / 2^k <= x, c = floor(x 2^k), about 30 significant bits."""
  k = _PRECISION_BITS - 1 - _floor_log2(x)
  k = min(k, 64)
  if k < 0:
    raise ValueError(f'{what} is too large to sample exactly.')
  c = math.floor(x * 2**k)
  if c < 2**(_MIN_PRECISION_BITS - 1):
    raise ValueError(f'{what} is too small to sample exactly.')
  return c, k


as_fraction = _numerics.as_fraction


def shape_tuple(shape) -> tuple[int, ...]:
  """A shape (an int or a sequence of ints) as a tuple of Python ints."""
  if isinstance(shape, numbers.Integral):
    return (int(shape),)
  return tuple(int(d) for d in shape)


def numeric_dtype(dtype) -> jnp.dtype:
  """``dtype`` as a NumPy dtype; raises unless it is integer or floating."""
  d = jnp.dtype(dtype)
  if not (jnp.issubdtype(d, jnp.integer) or jnp.issubdtype(d, jnp.floating)):
    raise ValueError(f'Expected dtype={d} to be an integer or floating dtype.')
  return d


def _lattice_scale(name: str, value, upper: float, eta=1.0) -> _Fraction:
  """value / eta as an exact Fraction: 0, or in [2^-10, upper] (validated)."""
  s = as_fraction(value, name)
  e = as_fraction(eta, 'eta')
  if not e > 0:
    raise ValueError(f'Expected eta={eta} > 0.')
  if not s >= 0:
    raise ValueError(f'Expected {name}={value} >= 0.')
  s = s / e
  if s != 0 and not _MIN_DISCRETE_SCALE <= s <= upper:
    what = f'{name}={value}' if e == 1 else f'{name}/eta={value}/{eta}'
    raise ValueError(
        f'Expected {what} to be 0 or in [{_MIN_DISCRETE_SCALE:g}, {upper:g}] '
        'for exact sampling.')
  return s


@functools.lru_cache(maxsize=256)
def _gaussian_params(sigma: _Fraction) -> _exact.ExpParams:
  """Rejection-sampler constants for the discrete Gaussian N_Z(0, sigma'^2)."""
  beta, k = _dyadic_floor(1 / (2 * sigma * sigma),
                          f'sigma={float(sigma)}')  # beta' <= beta
  tau = max(0, round(math.log2(sigma)))
  t = 2**tau
  # kappa >= max_z (z / t - beta' z^2) = 1 / (4 beta' t^2), dyadic with k bits.
  c0 = -((-(2**(2 * k))) // (4 * beta * t * t))
  # floor(E) < 2^30 on the proposals kept: beta' z^2 + kappa < 2^30.
  z_cap = min(2**31 - 1, math.isqrt(((2**30 - 2) * 2**k - c0) // beta))
  v_max = (z_cap + 1) // t - 1
  return _exact.ExpParams(tau, v_max, k, beta, 0, c0)


@functools.lru_cache(maxsize=256)
def _laplace_params(scale: _Fraction) -> _exact.ExpParams:
  """Rejection-sampler constants for the discrete Laplace with scale b'."""
  lam, k = _dyadic_floor(1 / scale, f'scale={float(scale)}')  # lambda'
  tau = 0
  while lam * 2**tau < 2**k:  # t lambda' >= 1
    tau += 1
  t = 2**tau
  z_cap = min(2**31 - 1, ((2**30 - 1) * 2**k) // lam)
  v_max = (z_cap + 1) // t - 1
  return _exact.ExpParams(tau, v_max, k, 0, lam, 0)


def discrete_gaussian_sigma_squared(sigma: float, eta: float = 1.0
                                    ) -> _Fraction:
  """The exact variance parameter that ``discrete_gaussian`` samples.

  ``discrete_gaussian(key, shape, sigma=sigma)`` draws exactly from the discrete
  Gaussian with pmf proportional to exp(-x^2 / (2 sigma'^2)) on the integers,
  where 1 / (2 sigma'^2) is 1 / (2 sigma^2) rounded *down* to 30 significant
  bits (21 bits above sigma = 2^17), so sigma <= sigma' < sigma (1 + 2^-29)
  for sigma <= 2^17 and sigma' < sigma (1 + 2^-20) up to ``MAX_DISCRETE_SIGMA``:
  more noise, never less.

  Args:
    sigma: the requested scale (>= 0).
    eta: grid spacing; the lattice scale is sigma / eta (as in
      ``discrete_gaussian_grid``).

  Returns:
    sigma'^2 in lattice units as an exact ``fractions.Fraction`` (0 for 0).

  Example:
    >>> float(discrete_gaussian_sigma_squared(3.0))
    9.000000008381903
  """
  s = _lattice_scale('sigma', sigma, MAX_DISCRETE_SIGMA, eta)
  if s == 0:
    return _Fraction(0)
  p = _gaussian_params(s)
  return _Fraction(2**p.k, 2 * p.c2)


def discrete_laplace_scale(scale: float, eta: float = 1.0) -> _Fraction:
  """The exact scale b' (in lattice units) that ``discrete_laplace`` samples.

  1 / b' is 1 / scale rounded *down* to 30 significant bits, so
  scale <= b' < scale (1 + 2^-29).

  Args:
    scale: the requested scale (>= 0).
    eta: grid spacing; the lattice scale is scale / eta (as in
      ``discrete_laplace_grid``).

  Returns:
    b' in lattice units as an exact ``fractions.Fraction`` (0 for 0).

  Example:
    >>> float(discrete_laplace_scale(2.0))
    2.0
  """
  s = _lattice_scale('scale', scale, MAX_DISCRETE_SCALE, eta)
  if s == 0:
    return _Fraction(0)
  p = _laplace_params(s)
  return _Fraction(2**p.k, p.c1)


def discrete_gaussian(key: jax.Array, shape=(), *, sigma: float,
                      dtype=jnp.int32) -> jax.Array:
  """Draws i.i.d. discrete Gaussians N_Z(0, sigma^2), exactly.

  P[X = x] is proportional to exp(-x^2 / (2 sigma'^2)) for integers x, with
  sigma' the parameter of ``discrete_gaussian_sigma_squared`` (sigma rounded
  *up* by less than 2^-29 relative for sigma <= 2^17). Vectorized,
  fixed-shape and jittable; ``sigma`` must be a concrete number (the exact
  rational constants are precomputed on the host, once per sigma).

  Why the distribution is exact (up to the PRNG): it is the rejection sampler
  of Canonne, Kamath and Steinke (2020, Alg. 3 with the discrete Laplace of
  Alg. 2 folded into the acceptance step). A proposal is V ~ Geometric with
  P(V = v) = (1 - e^-1) e^-v, U uniform on {0, ..., t - 1} (t = 2^tau near
  sigma), a fair sign s, and z = t V + U (s = -1 with z = 0 is rejected); it
  is accepted with probability exp(-E), E = z^2 / (2 sigma'^2) - V + kappa,
  kappa >= sigma'^2 / (2 t^2) dyadic. Then P(accept and z, s) is proportional
  to e^-V exp(-E) = exp(-z^2 / (2 sigma'^2) - kappa), the target. Every
  random decision is exact:

  * Bernoulli(exp(-1)) (for V and for the integer part of E) is the loop of
    Canonne et al. Alg. 1, stopping at K with P(K > m) = 1/m!, evaluated by
    inversion of one uniform 32-bit word against the integers
    floor(2^32 / m!); the 11 words where that is not decisive are finished
    with further words by exact rational Bernoullis.
  * E is a dyadic rational (1 / (2 sigma'^2) has 30 significant bits, t is a
    power of two), evaluated exactly in 96-bit integer arithmetic on uint32
    words; its integer part n gives n Bernoulli(exp(-1)) trials and its
    fraction f (64 bits) runs Alg. 1's loop of Bernoulli(f / K), each a
    comparison of a uniform word w with floor(fhi / K) (equality, chance
    2^-32, is finished exactly with further words).

  No float enters any decision. The only departures from the ideal
  N_Z(0, sigma^2) are sigma' >= sigma (above) and, because the draw is
  int32, the conditioning on |X| <= z_max (proposals beyond it are rejected),
  z_max >= min(2^15 sigma', 2^31 - 1 - t) >= 1000 sigma': it moves less than
  exp(-5 * 10^5) of probability mass. The work runs in a ``lax.while_loop``
  over a fixed-width queue of lanes that redraws only the rejected ones
  (acceptance 0.35-0.48 per proposal, about 6 steps per sample).

  Args:
    key: PRNG key.
    shape: output shape.
    sigma: scale in integer units, 0 or in [2^-10, ``MAX_DISCRETE_SIGMA``].
    dtype: integer or floating output dtype; the exact int32 draw is cast to
      it (a narrower integer dtype wraps, a float one rounds).

  Returns:
    An array of ``shape`` and ``dtype``.

  Privacy:
    Adding it to an integer-valued query with L2 sensitivity Delta (under
    independent coordinates) is rho-zCDP with rho = Delta^2 / (2 sigma^2)
    (Canonne et al. 2020, Thm. 14); see
    ``dpjax.accounting.discrete_gaussian_event``.

  References:
    Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020, Alg. 1-3; Mironov 2012 on floating-point leaks.

  Example:
    >>> x = discrete_gaussian(jax.random.key(0), (4,), sigma=3.0)
    >>> x.dtype, x.shape
    (dtype('int32'), (4,))
  """
  s = _lattice_scale('sigma', sigma, MAX_DISCRETE_SIGMA)
  return _draw(_gaussian_params, s, key, shape, dtype)


def discrete_laplace(key: jax.Array, shape=(), *, scale: float,
                     dtype=jnp.int32) -> jax.Array:
  """Draws i.i.d. discrete Laplace noise, exactly.

  P[X = x] is proportional to exp(-|x| / b') for integers x, with
  b' = ``discrete_laplace_scale(scale)`` (scale rounded *up* by less than
  2^-29 relative). Same exact machinery as ``discrete_gaussian``: proposal
  z = t V + U with t = 2^tau >= b', acceptance exp(-(z / b' - V)), which
  is exact dyadic arithmetic. Output conditioned on |X| <= z_max with
  z_max >= min(2^30 b', 2^31 - 1) - t (less than exp(-1000) of mass moved).

  Args:
    key: PRNG key.
    shape: output shape.
    scale: b in integer units, 0 or in [2^-10, ``MAX_DISCRETE_SCALE``].
    dtype: integer or floating output dtype; the exact int32 draw is cast to
      it (a narrower integer dtype wraps, a float one rounds).

  Returns:
    An array of ``shape`` and ``dtype``.

  Privacy:
    Adding it to an integer-valued query with L1 sensitivity Delta is
    (Delta / scale)-DP (the geometric mechanism; Ghosh, Roughgarden,
    Sundararajan 2009).

  References:
    Canonne, Kamath, Steinke 2020, Alg. 2.

  Example:
    >>> discrete_laplace(jax.random.key(0), (3,), scale=2.0).dtype
    dtype('int32')
  """
  s = _lattice_scale('scale', scale, MAX_DISCRETE_SCALE)
  return _draw(_laplace_params, s, key, shape, dtype)


def discrete_gaussian_grid(key: jax.Array, shape=(), *, sigma: float,
                           eta: float, dtype=jnp.float32) -> jax.Array:
  """Discrete Gaussian on the grid eta Z: eta * N_Z(0, (sigma / eta)^2).

  P[X = eta k] is proportional to exp(-(eta k)^2 / (2 sigma^2)) (sigma / eta
  rounded up as in ``discrete_gaussian_sigma_squared(sigma, eta)``). The
  integer k is exact; for a floating ``dtype`` the product eta * k is rounded
  to it. An integer ``dtype`` needs eta = 1 and gets k itself, so this one
  sampler serves both float leaves and integer leaves (quantizer codes) of a
  pytree under ``tree_noise``.

  Args:
    key: PRNG key.
    shape: output shape.
    sigma: scale in the units of eta Z (0 allowed; sigma / eta in
      [2^-10, ``MAX_DISCRETE_SIGMA``] otherwise).
    eta: grid spacing (> 0; exactly 1 for an integer ``dtype``).
    dtype: floating or integer output dtype.

  Returns:
    An array of ``shape`` and ``dtype``.

  Privacy:
    On a query with values in eta Z and L2 sensitivity Delta (same units),
    rho = Delta^2 / (2 sigma^2) zCDP (Ding et al., Q-DPSGD-2, Thm. 4).

  References:
    Canonne, Kamath, Steinke 2020; Ding et al. (Q-DPSGD-2, Alg. 2).

  Example:
    >>> discrete_gaussian_grid(jax.random.key(0), (4,), sigma=0.75,
    ...                        eta=0.25).dtype
    dtype('float32')
  """
  s = _lattice_scale('sigma', sigma, MAX_DISCRETE_SIGMA, eta)
  return _draw_grid(_gaussian_params, s, eta, key, shape, dtype)


def discrete_laplace_grid(key: jax.Array, shape=(), *, scale: float,
                          eta: float, dtype=jnp.float32) -> jax.Array:
  """Discrete Laplace on the grid eta Z: eta * DLap(scale / eta).

  P[X = eta k] is proportional to exp(-|eta k| / scale) (scale / eta rounded
  up as in ``discrete_laplace_scale(scale, eta)``). As in
  ``discrete_gaussian_grid``, a floating ``dtype`` gets eta * k rounded to
  it and an integer ``dtype`` (eta = 1) gets k.

  Args:
    key: PRNG key.
    shape: output shape.
    scale: scale in the units of eta Z (0 allowed; scale / eta in
      [2^-10, ``MAX_DISCRETE_SCALE``] otherwise).
    eta: grid spacing (> 0; exactly 1 for an integer ``dtype``).
    dtype: floating or integer output dtype.

  Returns:
    An array of ``shape`` and ``dtype``.

  Privacy:
    On a query with values in eta Z and L1 sensitivity Delta (same units),
    (Delta / scale)-DP.

  References:
    Canonne, Kamath, Steinke 2020, Alg. 2.

  Example:
    >>> discrete_laplace_grid(jax.random.key(0), (3,), scale=1.0,
    ...                       eta=0.5).shape
    (3,)
  """
  s = _lattice_scale('scale', scale, MAX_DISCRETE_SCALE, eta)
  return _draw_grid(_laplace_params, s, eta, key, shape, dtype)


def _draw(params_fn, s: _Fraction, key: jax.Array, shape,
          dtype) -> jax.Array:
  """Exact draws for lattice scale ``s`` (zeros for 0), cast to ``dtype``."""
  dtype = numeric_dtype(dtype)
  shape = shape_tuple(shape)
  if s == 0:
    return jnp.zeros(shape, dtype)
  return _exact.exact_sample(params_fn(s), key, shape).astype(dtype)


def _draw_grid(params_fn, s: _Fraction, eta, key: jax.Array, shape,
               dtype) -> jax.Array:
  """eta * (exact draws), or the draws themselves for an integer dtype."""
  dtype = numeric_dtype(dtype)
  if jnp.issubdtype(dtype, jnp.integer):
    if as_fraction(eta, 'eta') != 1:
      raise ValueError(
          f'Expected eta=1 for an integer dtype={dtype}, got eta={eta}.')
    return _draw(params_fn, s, key, shape, dtype)
  k = _draw(params_fn, s, key, shape, jnp.int32)
  if s == 0:
    return jnp.zeros(k.shape, dtype)
  return jnp.asarray(eta, dtype) * k.astype(dtype)
