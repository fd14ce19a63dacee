"""Sparse messages on the wire: kept values plus positions, and their bit cost.

A sparsified update travels as its kept values and their flat positions
(``SparseMessage``); ``sparse_message_bits`` counts what that costs (Zhu &
Blaschko, Sec. 5).
"""

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate


def sparse_message_bits(dimension: int, num_kept: int,
                        value_bits: int = 32, send_indices: bool = True) -> int:
  """Bits of one sparse message: kept values, plus where they are.

  The positions cost the cheaper of a bitmask (d = ``dimension`` bits) and a
  list of indices (num_kept * ceil(log2 d) bits), nothing for a dense
  message; with per-epoch masks they are sent only at a refresh
  (``send_indices=False`` otherwise). A dense message is ``d * value_bits``
  (Zhu & Blaschko, Sec. 5).

  Example:
    >>> sparse_message_bits(1000, 100)  # 100 * 32 + min(1000, 100 * 10)
    4200
  """
  _validate.positive_int(dimension=dimension, value_bits=value_bits)
  _validate.non_negative_int(num_kept=num_kept)
  positions = 0 if num_kept == dimension else min(
      dimension,
      num_kept * max(1, math.ceil(math.log2(dimension))))
  return num_kept * value_bits + (positions if send_indices else 0)


class SparseMessage(NamedTuple):
  """A sparsified update as kept values plus their flat positions.

  Attributes:
    values: the kept coordinates, in flat order.
    indices: int32 flat positions of ``values`` (send once per mask refresh).
    dimension: d, the length of the flattened update (the number of kept
      coordinates is ``values.size``).
  """
  values: jax.Array
  indices: jax.Array
  dimension: int

  def bits(self, value_bits: int = 32, send_indices: bool = True) -> int:
    """Size on the wire (``sparse_message_bits``)."""
    return sparse_message_bits(self.dimension, int(self.values.size),
                               value_bits, send_indices)


def encode_sparse(update: Any, mask: Any) -> SparseMessage:
  """Packs the coordinates of ``update`` where ``mask`` is nonzero (not jittable:
  the message length is the number of kept coordinates).

  Example:
    >>> msg = encode_sparse(jnp.array([0., 2., 0., 5.]), jnp.array([0, 1, 0, 1]))
    >>> msg.values.tolist(), msg.indices.tolist(), msg.bits()
    ([2.0, 5.0], [1, 3], 68)
  """
  flat = jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(update)])
  keep = np.flatnonzero(np.concatenate(
      [np.ravel(np.asarray(m)) for m in jax.tree.leaves(mask)]))
  return SparseMessage(flat[keep], jnp.asarray(keep, jnp.int32), flat.size)


def decode_sparse(message: SparseMessage, like: Any) -> Any:
  """The dense update (zeros where nothing was sent), shaped like ``like``."""
  flat = jnp.zeros(message.dimension, message.values.dtype)
  flat = flat.at[message.indices].set(message.values)
  leaves, treedef = jax.tree.flatten(like)
  sizes = [int(np.prod(x.shape)) for x in leaves]
  parts = jnp.split(flat, np.cumsum(sizes)[:-1])
  return treedef.unflatten([p.reshape(x.shape) for p, x in zip(parts, leaves)])
