"""The randomized Hadamard rotation as optax transformations (cpSGD, Thm. 4).

The array primitives (``fwht``, ``randomized_hadamard``, ``rotate_tree``, ...)
live in ``dpjax.compression``; these transformations draw the step's signs from
their own key stream and apply them to the update pytree.
"""

from typing import Any

import jax
import optax

from dpjax import _keys
from dpjax import compression
from dpjax.transforms._state import keyed_transformation

_STREAM = _keys.register('hadamard_rotation', __name__)


def rotate_hadamard(*, key: jax.Array) -> optax.GradientTransformation:
  """Sender side: maps the update pytree to R x = H D x / sqrt(d) (1-D).

  All leaves are flattened into one vector (leaf order), zero-padded to the
  next power of two d and rotated by the randomized Hadamard transform with
  Rademacher signs D from ``fold_in(key, t)`` at step t. The output is a
  flat vector of length d (norm preserved), e.g. to be quantized coordinate
  by coordinate with a smaller range; ``unrotate_hadamard`` with the same key
  maps it back.

  Args:
    key: PRNG key shared with the receiver (required).

  Returns:
    An optax transformation with ``KeyStepState``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 4 (R = H D / sqrt(d)).

  Example:
    >>> tx = rotate_hadamard(key=jax.random.key(0))
    >>> y, _ = tx.update({'w': jnp.ones((2, 3))}, tx.init(None))
    >>> y.shape
    (8,)
  """
  return keyed_transformation(
      key, lambda updates, step_key, params: compression.rotate_tree(updates, key=step_key),
      stream=_STREAM)


def unrotate_hadamard(*, key: jax.Array,
                      like: Any = None) -> optax.GradientTransformation:
  """Receiver side: inverts ``rotate_hadamard`` back to the update pytree.

  Step t applies R^-1 = D H / sqrt(d) with the signs of ``fold_in(key, t)``
  (the same key and step count as the sender's ``rotate_hadamard``), drops
  the padding and unflattens.

  Args:
    key: the sender's key (required).
    like: pytree of arrays or ``jax.ShapeDtypeStruct`` giving the target
      structure; if None, ``params`` passed to ``update`` is used (as in an
      ``optax.chain`` called with params).

  Returns:
    An optax transformation with ``KeyStepState``.

  Example:
    >>> k = jax.random.key(0)
    >>> tx = optax.chain(rotate_hadamard(key=k), unrotate_hadamard(key=k))
    >>> g = {'w': jnp.arange(6.0).reshape(2, 3)}
    >>> out, _ = tx.update(g, tx.init(g), g)
    >>> bool(jnp.allclose(out['w'], g['w'], atol=1e-5))
    True
  """
  def step(updates, step_key, params):
    target = like if like is not None else params
    if target is None:
      raise ValueError(
          'unrotate_hadamard needs the target pytree: pass like=... to the '
          'factory or params to update().')
    return compression.unrotate_tree(updates, target, key=step_key)

  return keyed_transformation(key, step, stream=_STREAM)
