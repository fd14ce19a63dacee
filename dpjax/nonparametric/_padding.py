"""Padding the example axis to a size bucket, so neighbours share a compile.

Neighbouring datasets differ in size by one; padding ``n`` up to a bucket
(a power of two, at least 256) with zero-weight rows lets every release
reuse one compiled program for all sizes in the bucket. Padded rows carry
weight 0 and never count.
"""

import jax
import jax.numpy as jnp


def bucket(n: int) -> int:
  """The padded size of an example axis of length ``n``.

  Example:
    >>> bucket(3), bucket(256), bucket(257)
    (256, 256, 512)
  """
  return max(256, 1 << max(int(n) - 1, 0).bit_length())


def pad_rows(*arrays: jax.Array) -> tuple[jax.Array, ...]:
  """Pads each array's leading axis to ``bucket(n)``; appends the weights.

  Returns the padded arrays followed by float32 weights ``[bucket(n)]``
  (1 for real rows, 0 for padding).

  Example:
    >>> x, w = pad_rows(jnp.ones((3, 2)))
    >>> x.shape, float(w.sum())
    ((256, 2), 3.0)
  """
  n = arrays[0].shape[0]
  size = bucket(n)
  padded = tuple(
      jnp.pad(a, [(0, size - n)] + [(0, 0)] * (a.ndim - 1)) for a in arrays)
  weights = (jnp.arange(size) < n).astype(jnp.float32)
  return padded + (weights,)
