"""Bits an update of DP-SGD or of its randomly sparsified variant sends.

The message format and ``sparse_message_bits`` are in ``dpjax.compression``.
"""

import numpy as np

from dpjax import _validate
from dpjax import compression
from dpjax.transforms import _sparsifying


def rs_dpsgd_bits(schedule: _sparsifying.SparsityMaskSchedule,
                  dimension: int, value_bits: int = 32) -> np.ndarray:
  """Bits each step of an ``rs_dpsgd`` run sends, over the whole schedule.

  A step sends its kept values; the positions go only at a mask refresh.

  Example:
    >>> sched = dpjax.transforms.SparsityMaskSchedule.cooling(
    ...     0.5, 2, 2, jnp.zeros(8))
    >>> rs_dpsgd_bits(sched, 8).tolist()  # epoch 1 keeps 4 of 8
    [256, 256, 136, 128]
  """
  _validate.positive_int(dimension=dimension)
  num_zeros = np.asarray(schedule.num_zeros)
  spe, refresh_per_epoch = schedule.steps_per_epoch, schedule.refresh_per_epoch
  bits = []
  for t in range(len(num_zeros) * spe):
    kept = dimension - int(num_zeros[t // spe])
    refresh = t == 0 or (t * refresh_per_epoch // spe !=
                         (t - 1) * refresh_per_epoch // spe)
    bits.append(compression.sparse_message_bits(
        dimension, kept, value_bits, send_indices=refresh))
  return np.asarray(bits, np.int64)


def dpsgd_bits(dimension: int, value_bits: int = 32) -> int:
  """Bits of one dense DP-SGD update of d = ``dimension`` parameters.

  d * ``value_bits``.

  Example:
    >>> dpsgd_bits(8)
    256
  """
  return compression.sparse_message_bits(dimension, dimension, value_bits)
