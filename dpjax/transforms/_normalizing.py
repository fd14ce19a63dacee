"""Normalization by the expected batch size (never the padded array size)."""

import jax
import jax.numpy as jnp
import optax

from dpjax import _validate


def normalize(expected_batch_size: float) -> optax.GradientTransformation:
  """Divides the update by the expected batch size (never the padded size).

  Under Poisson sampling the batch size is random; dividing by its
  expectation keeps the step a fixed linear map of the noisy sum.

  Example:
    >>> normalize(4).update(jnp.ones(2), optax.EmptyState())[0]
    Array([0.25, 0.25], dtype=float32)
  """
  _validate.positive(expected_batch_size=expected_batch_size)

  def update_fn(updates, state, params=None):
    del params
    return jax.tree.map(
        lambda g: g / jnp.asarray(expected_batch_size, g.dtype), updates), state

  return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)
