"""Cyclic Poisson sampling: the participation schedule of amplified BandMF.

The examples are split into ``num_partitions`` fixed, data-independent
partitions (example i in partition i mod b); step t Poisson-samples
partition t mod b at rate q. Every example then participates at most once
in any b consecutive steps (b-min-separation) and each participation is
Poisson-subsampled (Choquette-Choo et al. 2023, "(Amplified) banded matrix
factorization", Alg. 2). A b-banded strategy on this schedule is as private
as DP-SGD with the same noise multiplier and rate q for ceil(T / b) steps
(ibid., Thm. 4). At rate 1 every step takes its whole partition: the
fixed b-min-separated schedule without amplification.
``dpjax.accounting.step_event`` accounts a BandMF state under this sampler's
pattern only, and ``PrivacyLedger.record_step`` requires the batch of the
run's own step t (partition t mod b, never a count restarted each epoch).
"""

import dataclasses
import math

import dp_accounting
import jax
import jax.numpy as jnp

from dpjax import _validate
from dpjax.sampling._poisson import PaddedBatch
from dpjax.sampling._poisson import PoissonSampler


@dataclasses.dataclass(frozen=True)
class CyclicPoissonSampler:
  """Poisson sampling of partition t mod b at step t.

  Attributes:
    num_examples: dataset size N.
    sampling_rate: q in (0, 1], the rate within a partition; the expected
      batch size is q N / b.
    num_partitions: b >= 1, the cycle length (the min-separation).
    max_batch_size: cap on the batch array; default ``poisson_batch_cap``
      of one partition (ceil(N / b) examples).

  Example:
    >>> s = CyclicPoissonSampler(100, 0.5, 4)
    >>> b = s.sample(jax.random.key(0), 1)
    >>> bool(jnp.all(jnp.where(b.mask, b.indices % 4 == 1, True)))
    True
  """
  num_examples: int
  sampling_rate: float
  num_partitions: int
  max_batch_size: int | None = None

  unit = 'example'  # the record dp_event protects

  def __post_init__(self):
    _validate.positive_int(num_examples=self.num_examples,
                           num_partitions=self.num_partitions)
    if self.num_partitions > self.num_examples:
      raise ValueError(f'Expected num_partitions={self.num_partitions} <= '
                       'num_examples (every partition non-empty).')
    inner = PoissonSampler(self.partition_size, self.sampling_rate,
                           self.max_batch_size)
    object.__setattr__(self, 'max_batch_size', inner.max_batch_size)

  @property
  def partition_size(self) -> int:
    """ceil(N / b): the largest partition."""
    return math.ceil(self.num_examples / self.num_partitions)

  @property
  def _inner(self) -> PoissonSampler:
    return PoissonSampler(self.partition_size, self.sampling_rate,
                          self.max_batch_size)

  @property
  def expected_batch_size(self) -> float:
    """q N / b (the mean over the cycle; ``normalize`` divides by it)."""
    return self.sampling_rate * self.num_examples / self.num_partitions

  def sample(self, key: jax.Array, step: jax.Array | int) -> PaddedBatch:
    """Batch ``step``: partition ``step mod b`` Poisson-sampled at rate q.

    Jittable; draws from the ``PoissonSampler`` stream of ``key`` at
    ``step``, so the same (key, step) is refused twice by a ledger.
    """
    step = jnp.asarray(step, jnp.int32)
    inner = self._inner.sample(key, step)
    b = self.num_partitions
    indices = inner.indices * b + step % b
    mask = inner.mask & (indices < self.num_examples)
    return PaddedBatch(jnp.where(mask, indices, 0), mask, inner.num_sampled,
                       key, step)

  def dp_event(self, noise_multiplier: float) -> dp_accounting.DpEvent:
    """One participation's event: the partition's Poisson-sampled Gaussian.

    Add/remove-one; composed once per cycle of b steps (every example is in
    one partition), see ``dpjax.accounting.step_event`` on a ``bandmf`` state.
    """
    return self._inner.dp_event(noise_multiplier)
