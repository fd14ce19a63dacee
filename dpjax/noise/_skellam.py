"""The Skellam distribution Sk(mu) = Poisson(mu) - Poisson(mu).

Drawn from ``jax.random.poisson``, which is NOT an exact sampler (float32
arithmetic in its acceptance test, visibly wrong from a rate of about 1e6 on):
each Poisson(mu) is the sum of J = ceil(mu / MAX_POISSON_RATE) i.i.d.
Poisson(mu / J), an exact identity that keeps every rate in the range where
the sampler's law is tested against the Poisson pmf. The distributed Skellam
mechanism (Agarwal, Kairouz, Liu, NeurIPS 2021) adds it to each client's
integer message; its accounting assumes the ideal distribution.
"""

import math

import jax
import jax.numpy as jnp

from dpjax import _validate
from dpjax.noise import _discrete

# Largest rate passed to jax.random.poisson (its law is tested up to here;
# at 1e6 and above its float32 acceptance test visibly distorts the law).
MAX_POISSON_RATE = 2.0**16
# Largest Skellam parameter: 64 parts of 2^16 (the cost grows with
# mu / MAX_POISSON_RATE).
MAX_SKELLAM_MU = 64 * MAX_POISSON_RATE


def skellam(key: jax.Array, shape=(), *, mu: float,
            dtype=jnp.int32) -> jax.Array:
  """Draws i.i.d. Sk(mu) = Poisson(mu) - Poisson(mu): mean 0, variance 2 mu.

  Args:
    key: PRNG key (required).
    shape: output shape.
    mu: the Poisson rate, 0 <= mu <= ``MAX_SKELLAM_MU`` (concrete).
    dtype: an integer dtype.

  Returns:
    Integers of ``shape`` and ``dtype``.

  References:
    Agarwal, Kairouz, Liu, "The Skellam mechanism for differentially private
    federated learning", NeurIPS 2021, Sec. 3.

  Example:
    >>> x = skellam(jax.random.key(0), (4,), mu=10.0)
    >>> x.shape, x.dtype
    ((4,), dtype('int32'))
  """
  key = _validate.key(key)
  if not _validate.concrete(mu):
    raise ValueError('Expected mu to be a concrete number, got a traced '
                     'value.')
  _validate.non_negative(mu=mu)
  _validate.finite(mu=mu)
  if mu > MAX_SKELLAM_MU:
    raise ValueError(f'Expected mu={mu:.6g} <= MAX_SKELLAM_MU='
                     f'{MAX_SKELLAM_MU:g}, the range where the Poisson '
                     'sampler is drawn in tested parts.')
  dtype = _discrete.numeric_dtype(dtype)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f'Expected dtype={dtype} to be an integer dtype.')
  shape = _discrete.shape_tuple(shape)
  parts = max(1, math.ceil(float(mu) / MAX_POISSON_RATE))
  rate = jnp.asarray(float(mu) / parts, jnp.float32)
  draws = jax.random.poisson(key, rate, (2, parts) + shape, dtype=jnp.int32)
  sums = jnp.sum(draws, axis=1)
  return (sums[0] - sums[1]).astype(dtype)
