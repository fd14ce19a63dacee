"""The one state shape of a randomized transform: a step counter and a key.

Step t of a transform built with ``key`` draws its randomness from
``fold_in(key, t)``, so a run is a pure function of the key and the step, and
a checkpoint of (count, key) resumes it exactly.

Example:
  >>> s = KeyStepState.create(jax.random.key(0))
  >>> int(s.count), int(s.advance().count)
  (0, 1)
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax import _validate


class KeyStepState(NamedTuple):
  """State of every transform whose step t uses ``fold_in(key, t)``.

  Attributes:
    count: int32 scalar, the number of steps taken.
    key: the base PRNG key given to the factory.
  """
  count: jax.Array
  key: jax.Array

  @classmethod
  def create(cls, key: jax.Array) -> 'KeyStepState':
    """Step 0 of ``key`` (validated: a required, typed or raw PRNG key)."""
    return cls(jnp.zeros([], jnp.int32), _validate.key(key))

  def step_key(self) -> jax.Array:
    """The key of the current step, ``fold_in(key, count)``."""
    return jax.random.fold_in(self.key, self.count)

  def advance(self) -> 'KeyStepState':
    """The state after this step."""
    return KeyStepState(optax.safe_increment(self.count), self.key)


def keyed_transformation(
    key: jax.Array,
    step: Callable[[Any, jax.Array, Any], Any]) -> optax.GradientTransformation:
  """A transform whose step t maps ``updates`` with ``fold_in(key, t)``.

  Args:
    key: the base PRNG key (required).
    step: ``step(updates, step_key, params) -> updates``.

  Returns:
    An optax transformation with ``KeyStepState``.

  Example:
    >>> tx = keyed_transformation(jax.random.key(0),
    ...                           lambda u, k, p: u + jax.random.normal(k))
    >>> _, state = tx.update(jnp.zeros(2), tx.init(None))
    >>> int(state.count)
    1
  """
  state0 = KeyStepState.create(key)

  def init_fn(params):
    del params
    return state0

  def update_fn(updates, state, params=None):
    return step(updates, state.step_key(), params), state.advance()

  return optax.GradientTransformation(init_fn, update_fn)
