"""Pure samplers ``key -> array``: float Gaussian/Laplace and exact integer noise.

Example:
  >>> dpjax.noise.discrete_gaussian(jax.random.key(0), 2.0, (3,)).dtype
  dtype('int32')
"""

from dpjax.noise._samplers import binomial
from dpjax.noise._samplers import binomial_p
from dpjax.noise._samplers import discrete_gaussian
from dpjax.noise._samplers import discrete_gaussian_grid
from dpjax.noise._samplers import discrete_gaussian_sigma_squared
from dpjax.noise._samplers import discrete_laplace
from dpjax.noise._samplers import discrete_laplace_grid
from dpjax.noise._samplers import discrete_laplace_scale
from dpjax.noise._samplers import gaussian
from dpjax.noise._samplers import laplace
from dpjax.noise._samplers import MAX_DISCRETE_SCALE
from dpjax.noise._samplers import MAX_DISCRETE_SIGMA
from dpjax.noise._samplers import tree_noise

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
    'tree_noise',
]
