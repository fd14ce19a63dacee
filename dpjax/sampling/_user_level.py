"""Poisson sampling of users, each with a capped block of its examples.

User-level DP-SGD (``dpjax.clipping.clipped_user_grad_sum``) samples users,
not examples: each user joins a step independently with probability q, and
brings at most ``max_examples_per_user`` of its examples (the first ones in
dataset order; a user's own choice of which examples to use is a function of
its own data, so the cap costs no privacy, but examples past it are never
used). The batch is ``indices [max_users, max_examples_per_user]`` with a
mask of the same shape. The accounting is ``PoissonSampler``'s with users as
the unit: ``dp_event`` holds for add/remove-one-USER neighbours.
"""

import dataclasses
from typing import NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _keys
from dpjax import _validate
from dpjax.sampling import _poisson

_STREAM = _keys.register('user_poisson_sampler', __name__)


class UserBatch(NamedTuple):
  """Indices of one user-level batch, padded to fixed shapes.

  ``dpjax.clipping.clipped_user_grad_sum`` takes the whole ``UserBatch``
  (not its mask alone), so the padding it reads is the one made here.

  Attributes:
    indices: int32 ``[max_users, max_examples_per_user]`` example indices;
      padded slots hold 0 (safe to gather).
    mask: bool, same shape; True for a real example of a sampled user.
    num_sampled: int32, users drawn before truncation to ``max_users``.
    key: the sampler key of the batch.
    step: int32, its step (``PrivacyLedger.record(..., batch=batch)``
      refuses a (key, step) it has recorded).
  """
  indices: jax.Array
  mask: jax.Array
  num_sampled: jax.Array
  key: jax.Array | None = None
  step: jax.Array | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class UserPoissonSampler:
  """Poisson sampling over users; each user's examples capped.

  Attributes:
    user_ids: int ``[N]``, the user of each example (concrete; any labels).
    sampling_rate: q in (0, 1], each user's chance to join a step.
    max_examples_per_user: K >= 1, the cap on one user's examples per step.
    max_users: cap on the users of a batch; default
      ``poisson_batch_cap(num_users, q)`` (overflow 1e-12 per step,
      accounted as for ``PoissonSampler``).

  Example:
    >>> s = UserPoissonSampler(np.array([0, 0, 1, 2, 2, 2]), 0.5,
    ...                        max_examples_per_user=2)
    >>> s.num_users, s.table.tolist()
    (3, [[0, 1], [2, 0], [3, 4]])
    >>> b = s.sample(jax.random.key(0), 0)
    >>> b.indices.shape == b.mask.shape == (s.max_users, 2)
    True
  """
  user_ids: np.ndarray
  sampling_rate: float
  max_examples_per_user: int
  max_users: int | None = None

  unit = 'user'

  def __post_init__(self):
    ids = np.asarray(self.user_ids)
    if ids.ndim != 1 or ids.size == 0 or not (
        np.issubdtype(ids.dtype, np.integer)):
      raise ValueError('Expected user_ids to be a non-empty 1-D integer array '
                       f'(one user per example), got dtype {ids.dtype} and '
                       f'shape {ids.shape}.')
    _validate.half_open_unit(sampling_rate=self.sampling_rate)
    _validate.positive_int(max_examples_per_user=self.max_examples_per_user)
    _, user_of = np.unique(ids, return_inverse=True)
    num_users = int(user_of.max()) + 1
    k = self.max_examples_per_user
    table = np.zeros((num_users, k), np.int32)
    counts = np.zeros(num_users, np.int32)
    for example, user in enumerate(user_of):
      if counts[user] < k:
        table[user, counts[user]] = example
        counts[user] += 1
    object.__setattr__(self, 'table', table)
    object.__setattr__(self, 'counts', counts)
    users = _poisson.PoissonSampler(num_users, self.sampling_rate,
                                    self.max_users)
    object.__setattr__(self, 'max_users', users.max_batch_size)
    object.__setattr__(self, '_users', users)

  @property
  def num_users(self) -> int:
    return len(self.counts)

  @property
  def expected_batch_size(self) -> float:
    """Expected number of USERS a step (the unit ``normalize`` divides by)."""
    return self._users.expected_batch_size

  def sample(self, key: jax.Array, step: jax.Array | int) -> UserBatch:
    """Batch ``step`` of the stream ``key`` (jittable)."""
    users = self._users.sample(_keys.stream(key, _STREAM), step)
    table, counts = jnp.asarray(self.table), jnp.asarray(self.counts)
    indices = table[users.indices]
    mask = users.mask[:, None] & (
        jnp.arange(self.max_examples_per_user)[None, :]
        < counts[users.indices][:, None])
    return UserBatch(jnp.where(mask, indices, 0), mask, users.num_sampled,
                     key, users.step)

  def dp_event(self, noise_multiplier: float) -> dp_accounting.DpEvent:
    """One step's event; neighbours differ in one USER's examples."""
    return self._users.dp_event(noise_multiplier)
