"""Fast Walsh-Hadamard transform and the randomized Hadamard rotation.

``fwht`` is the Sylvester-ordered Walsh-Hadamard transform normalized to be
orthogonal (H / sqrt(d), symmetric, its own inverse), computed in O(d log d)
by log2(d) radix-2 butterfly passes. The
randomized Hadamard rotation of cpSGD (Agarwal et al. 2018, Thm. 4) is
R = (1 / sqrt(d)) H D with D a diagonal of Rademacher signs drawn from an
explicit key; R^-1 = D H / sqrt(d). On pytrees, all leaves are flattened into
one vector, zero-padded to the next power of two d, rotated, and, on the
inverse, truncated and unflattened. The optax transformations built on these
are ``dpjax.transforms.rotate_hadamard`` / ``unrotate_hadamard``.
"""

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate

PyTree = Any


def next_power_of_two(n: int) -> int:
  """Smallest power of two >= n (1 for n <= 1).

  Example:
    >>> next_power_of_two(5), next_power_of_two(8)
    (8, 8)
  """
  return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def fwht(x: jax.typing.ArrayLike) -> jax.Array:
  """Orthonormal fast Walsh-Hadamard transform along the last axis.

  Computes H_d x / sqrt(d), H_d the Sylvester Hadamard matrix
  (H_1 = [1], H_2d = [[H_d, H_d], [H_d, -H_d]]), with log2(d) radix-2
  butterfly passes: O(d log d) work, no d x d matrix. The map is symmetric and
  orthogonal, hence its own inverse (up to float rounding).

  Args:
    x: array whose last axis has a power-of-two length d.

  Returns:
    The transform, same shape (floating dtype).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4 (randomized rotation).

  Example:
    >>> fwht(jnp.array([1., 0., 0., 0.]))
    Array([0.5, 0.5, 0.5, 0.5], dtype=float32)
  """
  x = jnp.asarray(x)
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.float32)
  _check_power_of_two(x.shape[-1])
  return _fwht(x)


def _check_power_of_two(d: int) -> None:
  if d < 1 or d & (d - 1):
    raise ValueError(
        f'Expected the last axis length d={d} to be a power of two.')


@jax.jit
def _fwht(x: jax.Array) -> jax.Array:
  d = x.shape[-1]
  batch = x.shape[:-1]
  h = 1
  while h < d:
    y = x.reshape(batch + (d // (2 * h), 2, h))
    a, b = y[..., 0, :], y[..., 1, :]
    x = jnp.stack([a + b, a - b], axis=-2).reshape(batch + (d,))
    h *= 2
  return x * jnp.asarray(1 / np.sqrt(d), x.dtype)


def rademacher_signs(key: jax.Array, dimension: int,
                     dtype=jnp.float32) -> jax.Array:
  """``dimension`` i.i.d. Rademacher signs (+1 / -1) from ``key``.

  Example:
    >>> s = rademacher_signs(jax.random.key(0), 4)
    >>> bool(jnp.all(jnp.abs(s) == 1))
    True
  """
  key = _validate.key(key)
  return jax.random.rademacher(key, (dimension,), jnp.int32).astype(dtype)


def randomized_hadamard(x: jax.typing.ArrayLike, *,
                        key: jax.Array) -> jax.Array:
  """R x = H D x / sqrt(d) along the last axis (d a power of two).

  Args:
    x: array, last axis of power-of-two length d.
    key: PRNG key for the signs D (required; the receiver needs the same key).

  Returns:
    R x, same shape.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 4 (random rotation R = H D).

  Example:
    >>> x = jnp.arange(8.0)
    >>> y = randomized_hadamard(x, key=jax.random.key(1))
    >>> bool(jnp.allclose(inverse_randomized_hadamard(y, key=jax.random.key(1)),
    ...                   x, atol=1e-5))
    True
  """
  x = jnp.asarray(x)
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.float32)
  _check_power_of_two(x.shape[-1])
  return _rotate(x, _validate.key(key))


@jax.jit
def _rotate(x: jax.Array, key: jax.Array) -> jax.Array:
  return _fwht(x * rademacher_signs(key, x.shape[-1], x.dtype))


@jax.jit
def _unrotate(y: jax.Array, key: jax.Array) -> jax.Array:
  y = _fwht(y)
  return y * rademacher_signs(key, y.shape[-1], y.dtype)


def inverse_randomized_hadamard(y: jax.typing.ArrayLike, *,
                                key: jax.Array) -> jax.Array:
  """R^-1 y = D H y / sqrt(d): the exact inverse of ``randomized_hadamard``.

  Example:
    >>> inverse_randomized_hadamard(jnp.ones(4), key=jax.random.key(0)).shape
    (4,)
  """
  y = jnp.asarray(y)
  if not jnp.issubdtype(y.dtype, jnp.floating):
    y = y.astype(jnp.float32)
  _check_power_of_two(y.shape[-1])
  return _unrotate(y, _validate.key(key))


def _flat_dtype(leaves) -> Any:
  dtypes = {jnp.result_type(x) for x in leaves}
  if len(dtypes) == 1:
    (dtype,) = dtypes
    if jnp.issubdtype(dtype, jnp.floating):
      return dtype
  return jnp.float32


def rotated_size(tree: PyTree) -> int:
  """Length of the rotated message: next power of two >= number of entries.

  Example:
    >>> rotated_size({'w': jnp.zeros((3, 2)), 'b': jnp.zeros(3)})
    16
  """
  return next_power_of_two(sum(int(np.size(x)) for x in jax.tree.leaves(tree)))


def rotate_tree(tree: PyTree, *, key: jax.Array) -> jax.Array:
  """Flattens all leaves, zero-pads to a power of two d, returns R x (1-D).

  Args:
    tree: pytree of arrays (the entries are concatenated in leaf order).
    key: PRNG key for the Rademacher signs (required).

  Returns:
    1-D array of length ``rotated_size(tree)``; its norm equals the tree's
    global L2 norm (up to float rounding).

  Example:
    >>> t = {'w': jnp.ones((2, 2)), 'b': jnp.ones(3)}
    >>> y = rotate_tree(t, key=jax.random.key(0))
    >>> y.shape
    (8,)
  """
  leaves = jax.tree.leaves(tree)
  if not leaves:
    raise ValueError('Expected a pytree with at least one array leaf.')
  return _rotate_leaves([jnp.asarray(x) for x in leaves], _validate.key(key))


@jax.jit
def _rotate_leaves(leaves: list[jax.Array], key: jax.Array) -> jax.Array:
  dtype = _flat_dtype(leaves)
  flat = jnp.concatenate([jnp.ravel(x).astype(dtype) for x in leaves])
  d = next_power_of_two(flat.shape[0])
  return _rotate(jnp.pad(flat, (0, d - flat.shape[0])), key)


def unrotate_tree(y: jax.typing.ArrayLike, like: PyTree, *,
                  key: jax.Array) -> PyTree:
  """Inverse of ``rotate_tree``: R^-1 y, truncated and unflattened like ``like``.

  Args:
    y: 1-D rotated message of length ``rotated_size(like)``.
    like: pytree of arrays or ``jax.ShapeDtypeStruct`` giving shapes and dtypes.
    key: the key used by ``rotate_tree``.

  Returns:
    A pytree with the structure, shapes and dtypes of ``like``.

  Example:
    >>> t = {'w': jnp.arange(4.0).reshape(2, 2), 'b': jnp.ones(3)}
    >>> k = jax.random.key(2)
    >>> back = unrotate_tree(rotate_tree(t, key=k), t, key=k)
    >>> bool(jnp.allclose(back['w'], t['w'], atol=1e-5))
    True
  """
  leaves, treedef = jax.tree.flatten(like)
  sizes = [int(np.size(x)) for x in leaves]
  d = next_power_of_two(sum(sizes))
  y = jnp.asarray(y)
  if y.shape != (d,):
    raise ValueError(
        f'Expected a rotated vector of shape ({d},) for this pytree, got '
        f'shape {y.shape}.')
  if not jnp.issubdtype(y.dtype, jnp.floating):
    y = y.astype(jnp.float32)
  specs = tuple((tuple(np.shape(x)), np.dtype(x.dtype)) for x in leaves)
  return jax.tree.unflatten(treedef,
                            _unrotate_leaves(y, _validate.key(key), specs))


@functools.partial(jax.jit, static_argnums=2)
def _unrotate_leaves(y: jax.Array, key: jax.Array,
                     specs: tuple[tuple[tuple[int, ...], Any], ...]):
  x = _unrotate(y, key)
  out, start = [], 0
  for shape, dtype in specs:
    size = math.prod(shape)
    out.append(x[start:start + size].reshape(shape).astype(dtype))
    start += size
  return out
