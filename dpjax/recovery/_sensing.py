"""Gaussian sensing matrices and their L1 sensitivity over sparse bounded inputs (Farokhi)."""

import math

import jax
import jax.numpy as jnp

from dpjax import _validate
from dpjax.recovery import _cosamp


def gaussian_sensing_matrix(key: jax.Array, num_measurements: int,
                            dimension: int) -> jax.Array:
  """Psi in R^{p x n} with sqrt(p) Psi i.i.d. N(0, 1) (Alg. 2, line 2).

  Example:
    >>> gaussian_sensing_matrix(jax.random.key(0), 20, 100).shape
    (20, 100)
  """
  _validate.positive_int(num_measurements=num_measurements,
                         dimension=dimension)
  return jax.random.normal(_validate.key(key), (num_measurements, dimension)
                           ) / math.sqrt(num_measurements)


def sensing_l1_sensitivity(sensing_matrix: jax.typing.ArrayLike,
                           kappa: int) -> jax.Array:
  """Delta(Psi): the L1 sensitivity of Psi x over the mechanism's inputs.

  (1 / kappa) times the sum of the kappa largest column L1 norms of Psi (see
  the module docstring for the proof). Equals max_j ||Psi_j||_1 when
  kappa = 1 and never exceeds it.

  Example:
    >>> float(sensing_l1_sensitivity(jnp.array([[1., -3.], [2., 0.]]), 1))
    3.0
  """
  psi = jnp.asarray(sensing_matrix)
  _cosamp.validate_sparsity(kappa, psi.shape[1], 'kappa')
  top, _ = jax.lax.top_k(jnp.abs(psi).sum(axis=0), kappa)
  return top.sum() / kappa
