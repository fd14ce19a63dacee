"""Threefry random bits that XLA can fuse: the same bits, no loop on CPU.

``jax.random`` lowers the Threefry-2x32 hash on CPU as a ``fori_loop`` over
its five key injections (to keep compile times short). XLA cannot fuse a
loop, so every draw of n values keeps two n-word counter buffers alive and
makes a memory round trip per loop step: drawing the Gaussian noise of a
DP-SGD step costs about as much as the gradients of a small model, and
about 2.5 times the parameter bytes of temporary memory.

``normal`` here draws with a PRNG implementation that is Threefry in every
respect (seed, split, fold_in are those of ``jax.random``) except that its
32-bit ``random_bits`` spells out the twenty rounds with plain ``lax`` ops
(the form ``jax.random`` itself uses on GPU). XLA fuses them with the
uniform-to-normal transform into one elementwise loop. The bits, and hence
the samples, are identical to ``jax.random.normal`` with the same key, so
statistics, reproducibility and privacy are unchanged; the draw is simply
cheaper. Keys of other implementations (``'rbg'``, ``'unsafe_rbg'``, ...),
non-32-bit widths, the non-partitionable Threefry mode and arrays of 2^32
values or more go through ``jax.random`` unchanged.

Example:
  >>> key = jax.random.key(0)
  >>> bool(jnp.array_equal(normal(key, (2, 3)),
  ...                      jax.random.normal(key, (2, 3))))
  True
"""

import math

import jax
import jax.extend.random as jex_random
from jax import lax
import jax.numpy as jnp
import numpy as np

_THREEFRY = jex_random.threefry_prng_impl
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotate_left(x, d: int):
  return lax.shift_left(x, np.uint32(d)) | lax.shift_right_logical(
      x, np.uint32(32 - d))


def threefry2x32(k1, k2, x1, x2):
  """The Threefry-2x32 hash (20 rounds), unrolled; as ``jax.random``'s."""
  ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
  x = [x1 + ks[0], x2 + ks[1]]
  for i in range(5):
    for r in _ROTATIONS[i % 2]:
      x[0] = x[0] + x[1]
      x[1] = x[0] ^ _rotate_left(x[1], r)
    x[0] = x[0] + ks[(i + 1) % 3]
    x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
  return x[0], x[1]


def _random_bits(key, bit_width, shape):
  """``jax.random``'s partitionable Threefry bits, fusible for 32 bits."""
  size = math.prod(shape)
  if (bit_width != 32 or size >= 2**32
      or not jax.config.jax_threefry_partitionable):
    return _THREEFRY.random_bits(key, bit_width, shape)
  # The counter of element j (row-major) is the 64-bit j: (hi, lo) = (0, j).
  lo = lax.iota(np.uint32, size).reshape(shape)
  bits1, bits2 = threefry2x32(key[0], key[1], jnp.zeros(shape, np.uint32),
                              lo)
  return bits1 ^ bits2


_FUSED = jex_random.define_prng_impl(
    key_shape=_THREEFRY.key_shape, seed=_THREEFRY.seed,
    split=_THREEFRY.split, random_bits=_random_bits,
    fold_in=_THREEFRY.fold_in, name='threefry2x32_fusible')


def _is_threefry(key) -> bool:
  try:
    return str(jax.random.key_impl(key)) == 'threefry2x32'
  except (TypeError, ValueError):
    return False


def normal(key: jax.Array, shape=(), dtype=jnp.float32) -> jax.Array:
  """``jax.random.normal(key, shape, dtype)``, bit for bit; fusible bits for
  a Threefry key (see module doc), ``jax.random`` for any other key."""
  if not _is_threefry(key):
    return jax.random.normal(key, shape, dtype)
  if not jax.dtypes.issubdtype(jnp.result_type(key), jax.dtypes.prng_key):
    key = jax.random.wrap_key_data(jnp.asarray(key))  # a raw uint32 key
  fused = jax.random.wrap_key_data(jax.random.key_data(key), impl=_FUSED)
  return jax.random.normal(fused, shape, dtype)
