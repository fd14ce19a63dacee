"""Floating-point noise: Gaussian and Laplace, and noise for a whole pytree.

``gaussian`` and ``laplace`` scale a unit draw of ``jax.random`` behind
optimization barriers, so the same key gives bit-identical noise with and
without ``jit``. The Gaussian unit draw is ``jax.random.normal``'s, bit for
bit, computed with Threefry bits that XLA fuses into their use (no loop and
no counter buffers on CPU; ``_threefry.py``). ``tree_noise`` draws any
sampler of ``dpjax.noise`` for every leaf of a pytree.

Example:
  >>> x = gaussian(jax.random.key(0), (2, 3), stddev=0.5)
  >>> x.shape, x.dtype
  ((2, 3), dtype('float32'))
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp

from dpjax import _validate
from dpjax.noise import _threefry

PyTree = Any


def _scale(scale: jax.typing.ArrayLike, unit: jax.Array) -> jax.Array:
  """scale * unit, fenced so XLA cannot fuse it into neighbouring arithmetic.

  Without the barriers, jit contracts ``g + scale * z`` into an FMA and folds
  constants into the sampler, so jitted and eager noise differ in the last
  bit. With them, the same key gives bit-identical noise either way.
  """
  barrier = jax.lax.optimization_barrier
  return barrier(jnp.asarray(scale, unit.dtype) * barrier(unit))


def gaussian(key: jax.Array, shape=(), *, stddev: jax.typing.ArrayLike,
             dtype=jnp.float32) -> jax.Array:
  """Draws i.i.d. N(0, stddev^2) noise.

  Args:
    key: PRNG key.
    shape: output shape.
    stddev: standard deviation (>= 0); may be traced.
    dtype: floating dtype of the output.

  Returns:
    An array of ``shape`` and ``dtype``.

  Privacy:
    Added to a query with L2 sensitivity S, the Gaussian mechanism with noise
    multiplier stddev / S (``dp_accounting.GaussianDpEvent``).

  Example:
    >>> x = gaussian(jax.random.key(0), (3,), stddev=2.0)
    >>> x.shape
    (3,)
  """
  _validate.non_negative(stddev=stddev)
  return _scale(stddev, _threefry.normal(key, shape, dtype))


def laplace(key: jax.Array, shape=(), *, scale: jax.typing.ArrayLike,
            dtype=jnp.float32) -> jax.Array:
  """Draws i.i.d. Laplace(0, scale) noise (density exp(-|x|/scale)/(2 scale)).

  Args:
    key: PRNG key.
    shape: output shape.
    scale: Laplace scale b (>= 0; may be traced); the variance is 2 b^2.
    dtype: floating dtype of the output.

  Returns:
    An array of ``shape`` and ``dtype``.

  Privacy:
    Added to a query with L1 sensitivity S, (S / scale)-DP
    (``dp_accounting.LaplaceDpEvent``).

  Example:
    >>> laplace(jax.random.key(0), (2, 2), scale=1.0).shape
    (2, 2)
  """
  _validate.non_negative(scale=scale)
  return _scale(scale, jax.random.laplace(key, shape, dtype))


def tree_noise(sampler: Callable[..., jax.Array], key: jax.Array,
               like: PyTree, **params: Any) -> PyTree:
  """Draws independent noise for every leaf of ``like`` (one subkey a leaf).

  Leaf i gets ``sampler(keys[i], leaf.shape, **params, dtype=leaf.dtype)``
  with ``keys = jax.random.split(key, num_leaves)`` in flattening order.

  Args:
    sampler: any sampler ``sampler(key, shape, *, <parameters>, dtype)`` of
      ``dpjax.noise``, e.g. ``gaussian``, ``laplace``, ``discrete_gaussian``
      or ``discrete_gaussian_grid`` (which also serves integer leaves).
    key: PRNG key.
    like: pytree whose leaf shapes and dtypes the noise takes.
    **params: the sampler's keyword parameters, e.g. ``stddev=1.0``.

  Returns:
    A pytree of noise with the structure of ``like``.

  Example:
    >>> n = tree_noise(gaussian, jax.random.key(0), {'w': jnp.zeros(2)},
    ...                stddev=1.0)
    >>> n['w'].shape
    (2,)
  """
  leaves, treedef = jax.tree.flatten(like)
  keys = jax.random.split(key, len(leaves))
  noise = [sampler(k, jnp.shape(x), dtype=jnp.result_type(x), **params)
           for k, x in zip(keys, leaves)]
  return jax.tree.unflatten(treedef, noise)
