"""Uniform batch samplers (fixed size, shuffling), each with its DpEvent.

This module holds the samplers that draw batches of a fixed size, both under
replace-one neighbours. ``FixedSizeSampler`` takes a uniform subset of exactly
``batch_size`` examples each step, independently across steps
(``SampledWithoutReplacementDpEvent``). ``ShuffleSampler`` draws one random
permutation per epoch and cuts it into batches; no amplification is claimed:
the event is one Gaussian mechanism per epoch (each example is in exactly one
batch). Both return ``PaddedBatch`` (``_poisson.py``); all draws come from an
explicit key and ``sample`` / ``epoch`` are jittable.
"""

import dataclasses

import dp_accounting
import jax
import jax.numpy as jnp

from dpjax import _keys
from dpjax import _validate
from dpjax.sampling._poisson import PaddedBatch

_FIXED = _keys.register('fixed_size_sampler', __name__)
_SHUFFLE = _keys.register('shuffle_sampler', __name__)


@dataclasses.dataclass(frozen=True)
class FixedSizeSampler:
  """Uniform subsets of exactly ``batch_size`` examples, fresh each step.

  Example:
    >>> FixedSizeSampler(100, 10).sample(jax.random.key(0), 0).indices.shape
    (10,)
  """
  num_examples: int
  batch_size: int

  unit = 'example'  # the record dp_event protects

  def __post_init__(self):
    _validate.positive_int(num_examples=self.num_examples,
                           batch_size=self.batch_size)
    if self.batch_size > self.num_examples:
      raise ValueError(f'Expected batch_size={self.batch_size} <= '
                       f'num_examples={self.num_examples}.')

  @property
  def expected_batch_size(self) -> float:
    return float(self.batch_size)

  def sample(self, key: jax.Array, step: jax.Array | int) -> PaddedBatch:
    """Batch ``step`` of the stream ``key``, from ``fold_in(stream(key), step)``
    (the sampler's own stream of ``key``, ``dpjax._keys``).

    The batch carries (key, step) for ``PrivacyLedger.record(...,
    batch=batch)``.
    """
    step = jnp.asarray(step, jnp.int32)
    idx = jax.random.choice(jax.random.fold_in(_keys.stream(key, _FIXED), step),
                            self.num_examples,
                            (self.batch_size,), replace=False
                            ).astype(jnp.int32)
    return PaddedBatch(idx, jnp.ones((self.batch_size,), bool),
                       jnp.int32(self.batch_size), key, step)

  def dp_event(self, noise_multiplier: float) -> dp_accounting.DpEvent:
    """One step's event (replace-one neighbours).

    dp_accounting's sampled-without-replacement Gaussian takes the noise
    multiplier relative to the replace-one sensitivity, which for a clipped
    sum is 2C; with noise stddev sigma C the event carries sigma / 2.
    """
    _validate.non_negative(noise_multiplier=noise_multiplier)
    return dp_accounting.SampledWithoutReplacementDpEvent(
        self.num_examples, self.batch_size,
        dp_accounting.GaussianDpEvent(noise_multiplier / 2))


@dataclasses.dataclass(frozen=True)
class ShuffleSampler:
  """Shuffle once per epoch and partition into batches (last one padded).

  Example:
    >>> b = ShuffleSampler(10, 4).epoch(jax.random.key(0))
    >>> b.indices.shape, int(b.mask.sum())
    ((3, 4), 10)
  """
  num_examples: int
  batch_size: int

  unit = 'example'  # the record dp_event protects

  def __post_init__(self):
    _validate.positive_int(num_examples=self.num_examples,
                           batch_size=self.batch_size)

  @property
  def expected_batch_size(self) -> float:
    return float(self.batch_size)

  @property
  def steps_per_epoch(self) -> int:
    return -(-self.num_examples // self.batch_size)

  def epoch(self, key: jax.Array) -> PaddedBatch:
    """All batches of one epoch: indices and mask of shape [steps, batch]."""
    total = self.steps_per_epoch * self.batch_size
    perm = jax.random.permutation(_keys.stream(key, _SHUFFLE),
                                  self.num_examples).astype(jnp.int32)
    indices = jnp.zeros((total,), jnp.int32).at[:self.num_examples].set(perm)
    mask = jnp.arange(total) < self.num_examples
    shape = (self.steps_per_epoch, self.batch_size)
    return PaddedBatch(indices.reshape(shape), mask.reshape(shape),
                       jnp.int32(self.num_examples))

  def dp_event(self, noise_multiplier: float) -> dp_accounting.DpEvent:
    """One EPOCH's event (record it once per epoch begun), replace-one.

    Each example lands in exactly one batch, whose clipped sum moves by at
    most 2C when it is replaced; the other steps are post-processing. No
    shuffling amplification is claimed.
    """
    _validate.non_negative(noise_multiplier=noise_multiplier)
    return dp_accounting.GaussianDpEvent(noise_multiplier / 2)
