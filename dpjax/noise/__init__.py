"""Pure samplers ``key -> array``: float Gaussian/Laplace, exact integer noise.

Every sampler has the signature ``sampler(key, shape=(), *, <parameters>,
dtype=...)`` and is a pure function of its key; ``tree_noise`` draws one for
every leaf of a pytree. Floating point: ``gaussian``, ``laplace``. Exact
(integer arithmetic only, exact in distribution up to the PRNG):
``discrete_gaussian``, ``discrete_laplace``, their versions on the grid
eta Z, and ``binomial``; ``skellam`` draws Poisson(mu) - Poisson(mu) from
``jax.random.poisson`` (not exact); ``discrete_gaussian_sigma_squared``,
``discrete_laplace_scale`` and ``binomial_p`` give the exact parameter each
one samples.

Example:
  >>> key = jax.random.key(0)
  >>> dpjax.noise.discrete_gaussian(key, (3,), sigma=2.0).dtype
  dtype('int32')
  >>> dpjax.noise.gaussian(key, (3,), stddev=1.0).dtype
  dtype('float32')
"""

from dpjax.noise._binomial import binomial
from dpjax.noise._binomial import binomial_p
from dpjax.noise._discrete import discrete_gaussian
from dpjax.noise._discrete import discrete_gaussian_grid
from dpjax.noise._discrete import discrete_gaussian_sigma_squared
from dpjax.noise._discrete import discrete_laplace
from dpjax.noise._discrete import discrete_laplace_grid
from dpjax.noise._discrete import discrete_laplace_scale
from dpjax.noise._discrete import MAX_DISCRETE_SCALE
from dpjax.noise._discrete import MAX_DISCRETE_SIGMA
from dpjax.noise._float import gaussian
from dpjax.noise._float import laplace
from dpjax.noise._float import tree_noise
from dpjax.noise._rounding import randomized_round
from dpjax.noise._skellam import MAX_SKELLAM_MU
from dpjax.noise._skellam import skellam

__all__ = [
    'binomial',
    'binomial_p',
    'discrete_gaussian',
    'discrete_gaussian_grid',
    'discrete_gaussian_sigma_squared',
    'discrete_laplace',
    'discrete_laplace_grid',
    'discrete_laplace_scale',
    'gaussian',
    'laplace',
    'MAX_DISCRETE_SCALE',
    'MAX_DISCRETE_SIGMA',
    'MAX_SKELLAM_MU',
    'randomized_round',
    'skellam',
    'tree_noise',
]
