"""Poisson sampling into fixed-shape padded batches, with its DpEvent.

This module holds ``PoissonSampler``: each example joins a step's batch
independently with probability q (Abadi et al. 2016, "Deep Learning with
Differential Privacy"). The batch is returned as a fixed-size index array of
length ``max_batch_size`` plus a mask (``PaddedBatch``, the batch type every
sampler returns). If more than ``max_batch_size`` examples are drawn, a
uniformly random subset of that size is kept; this truncation is part of the
accounted mechanism (``TruncatedSubsampledGaussianDpEvent``, exact under PLD;
RDP adds the overflow probability to delta, see ``dpjax.accounting.epsilon``).
The default cap (``poisson_batch_cap``) makes the overflow probability at most
``DEFAULT_OVERFLOW_PROBABILITY`` = 1e-12 per step. All draws come from an
explicit key; ``sample`` is jittable.
"""

import dataclasses
import math
from typing import NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
from scipy import stats

from dpjax import _keys
from dpjax import _validate
from dpjax import accounting
from dpjax import compression

# Default probability that a Poisson batch exceeds its padded size.
DEFAULT_OVERFLOW_PROBABILITY = 1e-12
_STREAM = _keys.register('poisson_sampler', __name__)


class PaddedBatch(NamedTuple):
  """Indices of one batch padded to a fixed size.

  Attributes:
    indices: int32 [cap]; padded slots hold index 0 (safe to gather).
    mask: bool [cap]; True for real examples.
    num_sampled: int32 scalar; examples drawn before truncation (> cap means
      the batch was truncated to a uniform subset).
    key: the sampler key the batch was drawn from (None if the sampler
      draws no per-step stream).
    step: int32 scalar, the step of ``key`` it was drawn at: the batch is a
      function of the sampler's stream of ``key`` folded with ``step``
      (``dpjax._keys``). ``PrivacyLedger.record(..., batch=batch)``
      refuses a (key, step) it has recorded.
  """
  indices: jax.Array
  mask: jax.Array
  num_sampled: jax.Array
  key: jax.Array | None = None
  step: jax.Array | None = None


def poisson_batch_cap(num_examples: int, sampling_rate: float,
                      overflow_probability: float = DEFAULT_OVERFLOW_PROBABILITY
                      ) -> int:
  """Smallest cap with P[Bin(num_examples + 1, q) > cap] <= overflow_probability.

  Example:
    >>> poisson_batch_cap(60000, 256 / 60000) > 256
    True
  """
  _validate.positive_int(num_examples=num_examples)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  _validate.open_unit(overflow_probability=overflow_probability)
  n = num_examples + 1
  cap = int(stats.binom.isf(overflow_probability, n, sampling_rate))
  cap = max(cap - 2, 0)
  while accounting.poisson_truncation_probability(
      num_examples, sampling_rate, cap) > overflow_probability:
    cap += 1
  return cap


@dataclasses.dataclass(frozen=True)
class PoissonSampler:
  """Poisson sampling into fixed-shape padded batches.

  Attributes:
    num_examples: dataset size N.
    sampling_rate: q in (0, 1]; expected batch size q N.
    max_batch_size: cap on the batch array; default ``poisson_batch_cap``.

  Example:
    >>> s = PoissonSampler(1000, 0.05)
    >>> b = s.sample(jax.random.key(0), 7)  # step 7 of the sampler key
    >>> b.indices.shape == (s.max_batch_size,), int(b.step)
    (True, 7)
  """
  num_examples: int
  sampling_rate: float
  max_batch_size: int | None = None

  unit = 'example'  # the record dp_event protects

  def __post_init__(self):
    _validate.positive_int(num_examples=self.num_examples)
    _validate.half_open_unit(sampling_rate=self.sampling_rate)
    if self.max_batch_size is None:
      object.__setattr__(self, 'max_batch_size', poisson_batch_cap(
          self.num_examples, self.sampling_rate))
    # The cap is a fixed number, never clamped to N: the accounting compares
    # it with the N + 1 rows of an add-one neighbour.
    _validate.positive_int(max_batch_size=self.max_batch_size)

  @property
  def expected_batch_size(self) -> float:
    return self.sampling_rate * self.num_examples

  @property
  def overflow_probability(self) -> float:
    """Chance that one step's draw exceeds ``max_batch_size``."""
    return accounting.poisson_truncation_probability(
        self.num_examples, self.sampling_rate, self.max_batch_size)

  def sample(self, key: jax.Array, step: jax.Array | int) -> PaddedBatch:
    """Batch ``step`` of the stream ``key``: ``fold_in(stream(key), step)``.

    Jittable; the same (key, step) gives the same batch, so each step needs
    its own: the batch carries both, for ``PrivacyLedger.record(...,
    batch=batch)``. Selection uses integer thresholds on 32-bit random
    words, so the realized rate is floor(q 2^32) / 2^32 <= q: accounting at
    q is conservative. The sampler's stream of ``key`` is separated from
    every other consumer's (``dpjax._keys``), so one user key may serve the
    sampler and the noise.
    """
    n, cap = self.num_examples, self.max_batch_size
    step = jnp.asarray(step, jnp.int32)
    select_key, truncate_key = jax.random.split(
        jax.random.fold_in(_keys.stream(key, _STREAM), step))
    if self.sampling_rate == 1:
      selected = jnp.ones((n,), bool)
    else:
      threshold = jnp.uint32(math.floor(self.sampling_rate * 2**32))
      selected = jax.random.bits(select_key, (n,), jnp.uint32) < threshold
    num_sampled = jnp.sum(selected, dtype=jnp.int32)

    def first_selected():
      return jnp.nonzero(selected, size=cap, fill_value=0)[0].astype(jnp.int32)

    def uniform_subset():  # the cap selected with the smallest random keys
      words = jax.random.bits(truncate_key, (2, n), jnp.uint32)
      kept = compression.smallest_k((words[0], words[1]), cap, selected)
      return jnp.nonzero(kept, size=cap, fill_value=0)[0].astype(jnp.int32)

    if cap >= n:  # nothing to truncate; the truncation branch would not fit
      indices = first_selected()
    else:
      indices = jax.lax.cond(num_sampled > cap, uniform_subset, first_selected)
    mask = jnp.arange(cap) < jnp.minimum(num_sampled, cap)
    indices = jnp.where(mask, indices, 0)
    return PaddedBatch(indices, mask, num_sampled, key, step)

  def dp_event(self, noise_multiplier: float) -> dp_accounting.DpEvent:
    """One step's event for a Gaussian sum with this noise multiplier.

    Add/remove-one neighbours; noise multiplier relative to the clipped-sum
    sensitivity C. A truncated Poisson event unless the cap exceeds N (then
    not even an add-one neighbour can overflow it).
    """
    _validate.non_negative(noise_multiplier=noise_multiplier)
    if self.max_batch_size > self.num_examples:  # never truncates
      return accounting.gaussian_event(noise_multiplier,
                                       sampling_rate=self.sampling_rate)
    return dp_accounting.TruncatedSubsampledGaussianDpEvent(
        dataset_size=self.num_examples,
        sampling_probability=float(self.sampling_rate),
        truncated_batch_size=self.max_batch_size,
        noise_multiplier=float(noise_multiplier))
