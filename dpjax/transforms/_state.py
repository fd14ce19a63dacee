"""The one state shape of a randomized transform: a step counter and a key.

Step t of a transform built with ``key`` draws its randomness from
``fold_in(stream(key, name), t)``, with ``name`` the transform's own
registered stream (``dpjax._keys``), so a run is a pure function of the key
and the step, one user key given to several consumers (a sampler, a noise
transform) yields independent draws, and a checkpoint of (count, key)
resumes it exactly.

Example:
  >>> s = KeyStepState.create(jax.random.key(0), stream='gaussian_noise')
  >>> int(s.count), int(s.advance().count)
  (0, 1)
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _keys
from dpjax import _validate

KEYED_TRANSFORMATION = _keys.register('keyed_transformation', __name__)


class KeyStepState(NamedTuple):
  """State of every transform whose step t uses ``fold_in(key, t)``, with
  ``key`` the transform's own stream of the user's key.

  Attributes:
    count: int32 scalar, the number of steps taken.
    key: the transform's stream of the key given to the factory,
      ``stream(key, name)``.
  """
  count: jax.Array
  key: jax.Array

  @classmethod
  def create(cls, key: jax.Array, *, stream: str,
             public: tuple[Any, ...] = ()) -> 'KeyStepState':
    """Step 0 of the stream ``stream`` of ``key`` (validated: a required,
    typed or raw PRNG key; ``stream`` a registered name), with the
    transform's ``public`` parameters folded in (``_keys.fold_public``)."""
    return cls(jnp.zeros([], jnp.int32), _keys.fold_public(
        _keys.stream(_validate.key(key), stream), *public))

  def step_key(self) -> jax.Array:
    """The key of the current step, ``fold_in(key, count)``."""
    return jax.random.fold_in(self.key, self.count)

  def last_step(self) -> tuple[jax.Array, int]:
    """``(key, step)`` of the last step taken (a ledger's ``noise=``).

    Raises:
      ValueError: a state with a batch (seed) axis, or from before any step.
    """
    count = np.asarray(self.count)
    if count.shape:
      raise ValueError(f'Expected one run\'s state, got count of shape '
                       f'{count.shape}: index the run (e.g. the seed axis) '
                       'first.')
    if int(count) < 1:
      raise ValueError('The state is from before any step: pass the state '
                       'the step returned.')
    return self.key, int(count) - 1

  def advance(self) -> 'KeyStepState':
    """The state after this step."""
    return KeyStepState(optax.safe_increment(self.count), self.key)


class AdaptiveClipState(NamedTuple):
  """State of ``adaptive_clip_per_example`` (Andrew et al. 2021).

  Attributes:
    stream: the count-noise stream (key and steps taken).
    l2_norm_clip: float32, the bound the NEXT step clips to.
    count_stddev: float32, the count noise of the last step (at init: the
      factory's); read by ``dpjax.accounting.step_event``.
    unclipped_fraction: float32, the last released fraction b~ (private).
    num_dropped: int32, examples dropped so far for a non-finite gradient
      (a diagnostic, not private).
  """
  stream: KeyStepState
  l2_norm_clip: jax.Array
  count_stddev: jax.Array
  unclipped_fraction: jax.Array
  num_dropped: jax.Array

  privacy_role = 'count'


def keyed_transformation(
    key: jax.Array,
    step: Callable[[Any, jax.Array, Any], Any], *,
    stream: str = KEYED_TRANSFORMATION,
    public: tuple[Any, ...] = ()) -> optax.GradientTransformation:
  """A transform whose step t maps ``updates`` with ``fold_in(s, t)``, s the
  stream ``stream`` of ``key`` (``dpjax._keys``).

  Args:
    key: the base PRNG key (required).
    step: ``step(updates, step_key, params) -> updates``.
    stream: the registered stream name the key is separated by (dpjax's
      transforms each pass their own; the default serves user transforms).
    public: a noise transform's public scale parameters, folded into the
      stream (``KeyStepState.create``): two transforms of one key that
      differ in them draw independent noise.

  Returns:
    An optax transformation with ``KeyStepState``.

  Example:
    >>> tx = keyed_transformation(jax.random.key(0),
    ...                           lambda u, k, p: u + jax.random.normal(k))
    >>> _, state = tx.update(jnp.zeros(2), tx.init(None))
    >>> int(state.count)
    1
  """
  state0 = KeyStepState.create(key, stream=stream, public=public)

  def init_fn(params):
    del params
    return state0

  def update_fn(updates, state, params=None):
    return step(updates, state.step_key(), params), state.advance()

  return optax.GradientTransformation(init_fn, update_fn)
