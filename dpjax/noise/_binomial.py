"""Exact Binomial noise (the cpSGD mechanism), with integer arithmetic only.

Example:
  >>> z = binomial(jax.random.key(0), (2, 3), trials=16, p=0.5)
  >>> z.shape, bool(jnp.all((0 <= z) & (z <= 16)))
  ((2, 3), True)
"""

import fractions
import functools
import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate
from dpjax.noise import _discrete

_Fraction = fractions.Fraction
_BINOMIAL_CHUNK_WORDS = 1 << 22  # random words drawn per loop iteration
_ALL_ONES = np.uint32(0xFFFFFFFF)
_ONE = np.uint32(1)


def binomial_p(p: float) -> _Fraction:
  """The exact success probability that ``binomial`` uses for ``p``.

  p is rounded to the nearest multiple of 2^-32 (exact for p = 1/2, 1/4,
  3/8, ...); |p' - p| <= 2^-33.

  Args:
    p: the requested probability in [0, 1] (a concrete number).

  Returns:
    p' as an exact ``fractions.Fraction`` with denominator dividing 2^32.

  Example:
    >>> binomial_p(0.5)
    Fraction(1, 2)
  """
  q = _discrete.as_fraction(p, 'p')
  if not 0 <= q <= 1:
    raise ValueError(f'Expected p={p} in [0, 1].')
  return _Fraction(round(q * 2**32), 2**32)


def binomial(key: jax.Array, shape=(), *, trials: int, p: float,
             dtype=jnp.int32) -> jax.Array:
  """Draws i.i.d. Binomial(trials, p') exactly, for any trials < 2^31.

  Each of the n = ``trials`` trials compares b fresh random bits with the
  binary digits of p' = a / 2^b (``binomial_p``; b = 1 for p = 1/2), 32
  trials per uint32 word at once (bit-sliced), and the successes are counted
  with a population count. The result is exactly Binomial(n, p'): no
  approximation, at a cost of b * ceil(n / 32) random words per sample
  (n = 2^20, p = 1/2: 32768 words, about 0.2 ms on one CPU core), drawn in a
  ``lax.fori_loop`` over chunks of at most 2^22 words.

  Args:
    key: PRNG key.
    shape: output shape.
    trials: number of trials n (Python int, 0 <= n < 2^31).
    p: success probability in [0, 1] (concrete).
    dtype: integer or floating output dtype; the exact int32 count is cast
      to it.

  Returns:
    An array of ``shape`` and ``dtype``.

  Privacy:
    The Binomial mechanism of cpSGD (Agarwal et al. 2018, Thm. 1): adding
    s (Z - n p), Z ~ Bin(n, p), to a lattice-valued query;
    ``dpjax.accounting.EpsilonDeltaDpEvent(binomial_epsilon(...), delta)``.

  References:
    Agarwal, Suresh, Yu, Kumar, McMahan, "cpSGD", NeurIPS 2018.

  Example:
    >>> binomial(jax.random.key(0), (3,), trials=1000, p=0.5).dtype
    dtype('int32')
  """
  if not isinstance(trials, numbers.Integral) or not 0 <= trials < 2**31:
    raise ValueError(
        f'Expected trials={trials} to be an integer in [0, 2^31).')
  n = int(trials)
  q = binomial_p(p)
  dtype = _discrete.numeric_dtype(dtype)
  key = _validate.key(key)
  shape = _discrete.shape_tuple(shape)
  size = math.prod(shape)
  a = q.numerator
  b = q.denominator.bit_length() - 1  # p' = a / 2^b, a odd unless p' in {0,1}
  if size == 0 or n == 0 or a == 0:
    return jnp.zeros(shape, dtype)
  if q == 1:
    return jnp.full(shape, n, dtype)
  return _binomial_bits(key, n, a, b, size).reshape(shape).astype(dtype)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _binomial_bits(key: jax.Array, n: int, a: int, b: int,
                   size: int) -> jax.Array:
  """Counts successes of n Bernoulli(a / 2^b) trials, ``size`` times."""
  words = -(-n // 32)
  per = max(1, min(words, _BINOMIAL_CHUNK_WORDS // (b * size)))
  chunks = -(-words // per)
  digits = [(a >> (b - 1 - i)) & 1 for i in range(b)]  # most significant first

  def body(c, total):
    r = jax.random.bits(jax.random.fold_in(key, c), (b, size, per), jnp.uint32)
    less = jnp.zeros((size, per), jnp.uint32)
    equal = jnp.full((size, per), 0xFFFFFFFF, jnp.uint32)
    for i, d in enumerate(digits):  # U < a, bitwise over 32 trials per word
      if d:
        less = less | (equal & ~r[i])
        equal = equal & r[i]
      else:
        equal = equal & ~r[i]
    j = c * per + jnp.arange(per, dtype=jnp.int32)  # word index
    live = jnp.clip(n - 32 * j, 0, 32).astype(jnp.uint32)
    mask = jnp.where(live >= 32, _ALL_ONES,
                     (_ONE << jnp.minimum(live, np.uint32(31))) - _ONE)
    count = jax.lax.population_count(less & mask).astype(jnp.int32)
    return total + jnp.sum(count, axis=-1)

  return jax.lax.fori_loop(0, chunks, body, jnp.zeros((size,), jnp.int32))
