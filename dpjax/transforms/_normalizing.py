"""Normalization by the expected batch size (never the padded array size)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax import _validate


class NormalizeState(NamedTuple):
  """The divisor of the last step (at init: the factory's), float32.

  ``dpjax.accounting.step_event`` checks it against the sampler's expected
  batch size.
  """
  expected_batch_size: jax.Array

  privacy_role = 'divisor'


def normalize(expected_batch_size: float) -> optax.GradientTransformation:
  """Divides the update by the expected batch size (never the padded size).

  Under Poisson sampling the batch size is random; dividing by its
  expectation keeps the step a fixed linear map of the noisy sum. The state
  keeps the divisor (it may be traced) so a ledger can check it.

  Example:
    >>> tx = normalize(4)
    >>> tx.update(jnp.ones(2), tx.init(None))[0]
    Array([0.25, 0.25], dtype=float32)
  """
  _validate.positive(expected_batch_size=expected_batch_size)

  def state():
    return NormalizeState(jnp.asarray(expected_batch_size, jnp.float32))

  def update_fn(updates, s, params=None):
    del params, s
    return jax.tree.map(
        lambda g: g / jnp.asarray(expected_batch_size, g.dtype),
        updates), state()

  return optax.GradientTransformation(lambda _: state(), update_fn)
