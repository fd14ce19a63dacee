"""Unbiased randomized rounding to the integers, decided without floats.

``randomized_round`` rounds each x to floor(x) or ceil(x), up with probability
exactly x - floor(x), so E[round(x)] = x. It is the input step of the exact
Laplace mechanisms (``dpjax.add_laplace_noise``, the compressive privatizer):
rounding at random instead of to the nearest integer keeps their epsilon free
of the dimension (see ``randomized_round``).

Example:
  >>> r = randomized_round(jax.random.key(0), jnp.full(4000, 2.25))
  >>> sorted(set(r.tolist())), abs(float(r.mean()) - 2.25) < 0.03
  ([2, 3], True)
"""

import jax
import jax.numpy as jnp

_CHUNKS = 10  # 16-bit words: 160 bits cover every float32 in [0, 1)
MAX_ROUNDING_BOUND = 2.0**30


def _bernoulli(key: jax.Array, f: jax.Array) -> jax.Array:
  """Bernoulli(f) for float32 f in [0, 1), exactly: U < f for U uniform.

  f has at most 24 significant bits, all at or above 2^-149, so its binary
  expansion ends within 160 bits: f = sum_i F_i 2^(-16 i), 16-bit digits F_i
  read off exactly (scaling by 2^16, floor and subtraction are exact on
  non-negative floats). U's digits W_i are 16-bit halves of random words,
  and U < f iff (W_1, W_2, ...) < (F_1, F_2, ...) lexicographically.
  """
  words = jax.random.bits(key, (_CHUNKS // 2,) + f.shape, jnp.uint32)
  rest = f
  below = jnp.zeros(f.shape, bool)
  tied = jnp.ones(f.shape, bool)
  for i in range(_CHUNKS):
    rest = rest * 65536.0
    digit = jnp.floor(rest)
    rest = rest - digit
    w = words[i // 2]
    w = (w >> 16) if i % 2 == 0 else (w & 0xFFFF)
    w = w.astype(jnp.int32)
    digit = digit.astype(jnp.int32)
    below = below | (tied & (w < digit))
    tied = tied & (w == digit)
  return below


def randomized_round(key: jax.Array, x: jax.typing.ArrayLike, *,
                     bound: float = MAX_ROUNDING_BOUND) -> jax.Array:
  """Rounds each x_i to an integer at random, unbiased: an int32 array.

  x is clipped to [-bound, bound] (a contraction: no two inputs move apart),
  then |x| = j + f (j integer, f in [0, 1)) becomes j + 1 with probability f
  and j otherwise, with x's sign. The coin is an exact comparison of random
  bits with the digits of f (``_bernoulli``), so P[round up] is f itself.

  Why it matters for privacy: with Z integer noise of pmf p (p(z + 1) / p(z)
  in [e^-c, e^c], e.g. a discrete Laplace of scale b, c = 1 / b), the pmf of
  round(x) + Z at any integer is, as a function of x, the linear interpolation
  of p between integers, whose log is (e^c - 1)-Lipschitz. Two inputs then
  give output pmfs within exp((e^c - 1) ||x - x'||_1) of each other, whatever
  the number of coordinates; rounding to the nearest integer instead can move
  every coordinate by one grid step.

  Args:
    key: PRNG key.
    x: float array (cast to float32; NaN is not allowed, +-inf clips).
    bound: clip bound, at most 2^30 so that codes plus noise below 2^30 fit
      int32.

  Returns:
    int32 array of x's shape.

  Example:
    >>> randomized_round(jax.random.key(1), jnp.array([-3.0, 0.0, 7.0]))
    Array([-3,  0,  7], dtype=int32)
  """
  if not 0 < bound <= MAX_ROUNDING_BOUND:
    raise ValueError(f'Expected bound={bound} in (0, 2^30].')
  x = jnp.clip(jnp.asarray(x).astype(jnp.float32), -bound, bound)
  a = jnp.abs(x)
  whole = jnp.floor(a)
  up = _bernoulli(key, a - whole)  # a - floor(a) is exact for a >= 0
  code = whole.astype(jnp.int32) + up.astype(jnp.int32)
  return jnp.where(x < 0, -code, code)
