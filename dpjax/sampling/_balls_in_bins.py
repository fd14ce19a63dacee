"""Balls-in-bins batching into fixed-shape padded batches, with its DpEvent.

This module holds ``BallsInBinsSampler``: at the start of each epoch every
example is put in one of the epoch's ``steps_per_epoch`` steps, uniformly at
random and independently of the others (Chua et al. 2025, "Balls-and-Bins
Sampling for DP-SGD"; Feldman & Shenfeld 2025's random allocation with one
step per example). Each example is used exactly once per epoch, as under
shuffling, yet the epoch is amplified (``dpjax.accounting.BallsInBinsDpEvent``).
Batch sizes are Binomial(N, 1/k); a batch above ``max_batch_size`` keeps its
first ``max_batch_size`` examples, and the event adds the chance of that
(and of the draw's non-uniform tail) to delta. All draws come from an
explicit key; ``sample`` is jittable.
"""

import dataclasses

import dp_accounting
import jax
import jax.numpy as jnp
from scipy import stats

from dpjax import _keys
from dpjax import _validate
from dpjax import accounting
from dpjax.sampling._poisson import DEFAULT_OVERFLOW_PROBABILITY
from dpjax.sampling._poisson import PaddedBatch

_STREAM = _keys.register('balls_in_bins_sampler', __name__)
# Upper bound on one example's chance to land in a given step, over the
# uniform 1/k: the 64-bit draw's residues are uniform within 2^-64.
_RATE_MARGIN = 1 + 1e-12


def _full_bin_probability(num_examples: int, steps: int, cap: int) -> float:
  """Union bound on P[some step's examples number at least ``cap``]."""
  if cap > num_examples:
    return 0.0
  q = min(1.0, _RATE_MARGIN / steps)
  return min(1.0, steps * float(stats.binom.sf(cap - 1, num_examples, q)))


@dataclasses.dataclass(frozen=True)
class BallsInBinsSampler:
  """Each example in one uniformly random step of each epoch.

  Attributes:
    num_examples: dataset size N.
    steps_per_epoch: k in [1, 65535]; expected batch size N / k.
    max_batch_size: cap on the batch array; default: the smallest cap with
      ``truncation_probability`` at most ``DEFAULT_OVERFLOW_PROBABILITY``
      from full batches.

  Step s of key ``key`` is position s mod k of epoch s // k; an epoch's
  steps all come from that epoch's one draw.

  Example:
    >>> s = BallsInBinsSampler(1000, 10)
    >>> b = s.sample(jax.random.key(0), 3)
    >>> b.indices.shape == (s.max_batch_size,), int(b.step)
    (True, 3)
  """
  num_examples: int
  steps_per_epoch: int
  max_batch_size: int | None = None

  unit = 'example'  # the record dp_event protects

  def __post_init__(self):
    _validate.positive_int(num_examples=self.num_examples,
                           steps_per_epoch=self.steps_per_epoch)
    if self.steps_per_epoch > accounting.BALLS_IN_BINS_MAX_STEPS:
      raise ValueError(f'Expected steps_per_epoch={self.steps_per_epoch} <= '
                       f'{accounting.BALLS_IN_BINS_MAX_STEPS}.')
    if self.max_batch_size is None:
      n, k = self.num_examples, self.steps_per_epoch
      cap = max(int(stats.binom.isf(DEFAULT_OVERFLOW_PROBABILITY / k, n,
                                    1 / k)) - 2, 1)
      while _full_bin_probability(n, k, cap) > DEFAULT_OVERFLOW_PROBABILITY:
        cap += 1
      object.__setattr__(self, 'max_batch_size', cap)
    _validate.positive_int(max_batch_size=self.max_batch_size)

  @property
  def expected_batch_size(self) -> float:
    return self.num_examples / self.steps_per_epoch

  @property
  def truncation_probability(self) -> float:
    """tv of one epoch: its batches may differ from untruncated uniform
    balls-in-bins only if some step's other examples fill the cap (union
    bound over the k steps) or the protected example's draw falls in the
    non-uniform tail of the 64-bit word ((2^64 mod k) / 2^64)."""
    k = self.steps_per_epoch
    tail = (2**64 % k) / 2**64
    return min(1.0, _full_bin_probability(self.num_examples, k,
                                          self.max_batch_size) + tail)

  def assignment(self, key: jax.Array, epoch: jax.Array | int) -> jax.Array:
    """int32 [N]: the step (in [0, k)) of each example in ``epoch``.

    w mod k for a 64-bit word w = hi 2^32 + lo, as
    ((hi mod k) (2^32 mod k) + lo mod k) mod k in 32-bit arithmetic (exact
    for k < 2^16).
    """
    k = self.steps_per_epoch
    epoch = jnp.asarray(epoch, jnp.int32)
    words = jax.random.bits(jax.random.fold_in(_keys.stream(key, _STREAM),
                                               epoch),
                            (2, self.num_examples), jnp.uint32)
    kk = jnp.uint32(k)
    mixed = (words[0] % kk) * jnp.uint32(2**32 % k) + words[1] % kk
    return (mixed % kk).astype(jnp.int32)

  def sample(self, key: jax.Array, step: jax.Array | int) -> PaddedBatch:
    """Batch ``step`` of the stream ``key``: the examples of epoch
    step // k assigned to position step mod k.

    Jittable; the batch carries (key, step) for ``PrivacyLedger.record(...,
    batch=batch)``.
    """
    k, cap = self.steps_per_epoch, self.max_batch_size
    step = jnp.asarray(step, jnp.int32)
    selected = self.assignment(key, step // k) == step % k
    num_sampled = jnp.sum(selected, dtype=jnp.int32)
    indices = jnp.nonzero(selected, size=cap, fill_value=0)[0].astype(
        jnp.int32)
    mask = jnp.arange(cap) < jnp.minimum(num_sampled, cap)
    indices = jnp.where(mask, indices, 0)
    return PaddedBatch(indices, mask, num_sampled, key, step)

  def dp_event(self, noise_multiplier: float) -> dp_accounting.DpEvent:
    """One EPOCH's event (record it once per epoch begun), add/remove-one.

    Noise multiplier relative to the clipped-sum sensitivity C; the epoch's
    ``truncation_probability`` goes to delta.
    """
    return accounting.balls_in_bins_event(
        noise_multiplier, self.steps_per_epoch,
        truncation_probability=self.truncation_probability)
