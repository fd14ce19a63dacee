"""Deadline minibatches of agents with random speeds (Ding et al., Remark 1).

Agent i computes per-example gradients at a random speed V_{i,t} (examples
per second) until the deadline T_d, so its batch holds |S_{i,t}| =
floor(V_{i,t} T_d) examples: the first |S| of a fresh uniform permutation of
its shard of m examples. Speeds are i.i.d. across agents and rounds, drawn
from an explicit key and independent of the data, so batch sizes are public
randomness: a run may draw them in advance (e.g. to calibrate noise) without
leaking anything. Batches have a fixed shape [num_agents, cap], padded and
masked (cap = min(m, floor(max speed * T_d))).

Amplification by subsampling is not claimed by default: the decentralized
accounting takes each round as the unsampled mechanism on the examples it
used (``dpjax.distributed.qdpsgd_event``), which holds for any batch.
A batch of this sampler is, given its size, a uniform subset of the shard
drawn from the key, so while the key is kept secret a run may opt in with
``DecentralizedPrivacy(..., amplified=True)`` (sampling without
replacement, Wang, Balle and Kasiviswanathan, AISTATS 2019).
"""

import dataclasses
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from dpjax import _keys
from dpjax import _validate
from dpjax.sampling._poisson import PaddedBatch

_STREAM = _keys.register('deadline_sampler', __name__)


class Speed(NamedTuple):
  """A speed distribution: ``sample(key, shape) -> speeds``, its mean and max.

  Attributes:
    sample: ``(key, shape) -> float32 speeds`` (examples per second, >= 0).
    mean: E[V] (> 0), which sets the default deadline B / E[V].
    high: the largest speed it draws; larger draws are clipped to it.
  """
  sample: Callable[[jax.Array, tuple[int, ...]], jax.Array]
  mean: float
  high: float


def uniform_speed(low: float = 10.0, high: float = 90.0) -> Speed:
  """V ~ Uniform(low, high), the paper's default Uniform(10, 90).

  Example:
    >>> uniform_speed().mean
    50.0
  """
  _validate.non_negative(low=low)
  _validate.finite(high=high)
  if not float(high) > float(low):
    raise ValueError(f'Expected high={high} > low={low}.')
  lo, hi = float(low), float(high)

  def sample(key, shape):
    return jax.random.uniform(key, shape, jnp.float32, lo, hi)

  return Speed(sample, (lo + hi) / 2, hi)


@dataclasses.dataclass(frozen=True)
class DeadlineSampler:
  """Per round, every agent's deadline batch from its shard of m examples.

  Attributes:
    num_examples: m, examples in each agent's shard.
    expected_batch_size: B; the deadline defaults to T_d = B / E[V].
    speed: the speed distribution (default ``uniform_speed(10, 90)``).
    deadline: T_d (> 0); None for B / E[V].

  Example:
    >>> s = DeadlineSampler(1000, 20)
    >>> s.time, s.max_batch_size
    (0.4, 36)
    >>> b = s.sample(jax.random.key(0), 3)
    >>> b.indices.shape, bool((b.mask.sum(1) == b.num_sampled).all())
    ((3, 36), True)
  """
  num_examples: int
  expected_batch_size: float
  speed: Speed = uniform_speed()
  deadline: float | None = None

  unit = 'example'  # the record dp_event protects

  def __post_init__(self):
    _validate.positive_int(num_examples=self.num_examples)
    _validate.positive(expected_batch_size=self.expected_batch_size)
    _validate.finite(expected_batch_size=self.expected_batch_size)
    if not isinstance(self.speed, Speed):
      raise ValueError(f'Expected speed to be a Speed (e.g. uniform_speed()), '
                       f'got {self.speed!r}.')
    _validate.positive(mean_speed=self.speed.mean)
    if self.deadline is not None:
      _validate.positive(deadline=self.deadline)
      _validate.finite(deadline=self.deadline)

  @property
  def time(self) -> float:
    """The deadline T_d in seconds."""
    if self.deadline is not None:
      return float(self.deadline)
    return float(self.expected_batch_size) / float(self.speed.mean)

  @property
  def max_batch_size(self) -> int:
    """cap = min(m, floor(max speed * T_d)), at least 1."""
    return max(1, min(self.num_examples,
                      math.floor(float(self.speed.high) * self.time)))

  def speeds(self, key: jax.Array, num_agents: int) -> jax.Array:
    """The agents' speeds V [n] of the round with key ``key``."""
    _validate.positive_int(num_agents=num_agents)
    k = jax.random.split(_keys.stream(_validate.key(key), _STREAM))[0]
    v = self.speed.sample(k, (num_agents,)).astype(jnp.float32)
    return jnp.clip(v, 0.0, float(self.speed.high))

  def batch_sizes(self, key: jax.Array, num_agents: int) -> jax.Array:
    """|S_i| = min(floor(V_i T_d), cap), int32 [n] (the sizes ``sample`` uses)."""
    v = self.speeds(key, num_agents)
    sizes = jnp.floor(v * jnp.float32(self.time)).astype(jnp.int32)
    return jnp.clip(sizes, 0, self.max_batch_size)

  def sample(self, key: jax.Array, num_agents: int) -> PaddedBatch:
    """Indices into each agent's shard, [n, cap], with mask and sizes [n].

    Agent i's batch is the first |S_i| entries of a uniform permutation of
    0..m-1 drawn from ``fold_in(split(s)[1], i)``, s the sampler's stream
    of ``key`` (``split(s)[0]`` draws the speeds): a uniform subset of size
    |S_i|, independent across agents and of the sizes.
    """
    key = _validate.key(key)
    sizes = self.batch_sizes(key, num_agents)
    root = jax.random.split(_keys.stream(key, _STREAM))[1]
    cap, m = self.max_batch_size, self.num_examples

    def one(i, size):
      perm = jax.random.permutation(jax.random.fold_in(root, i), m)
      return perm[:cap].astype(jnp.int32), jnp.arange(cap) < size

    ids = jnp.arange(num_agents, dtype=jnp.uint32)
    indices, mask = jax.vmap(one)(ids, sizes)
    return PaddedBatch(jnp.where(mask, indices, 0), mask, sizes)
