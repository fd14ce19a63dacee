"""Batch samplers with fixed shapes, each naming the DpEvent its use justifies.

Example:
  >>> sampler = dpjax.sampling.PoissonSampler(1000, 0.05)
  >>> batch = sampler.sample(jax.random.key(0))
  >>> batch.indices.shape == batch.mask.shape == (sampler.max_batch_size,)
  True
"""

from dpjax.sampling._samplers import DEFAULT_OVERFLOW_PROBABILITY
from dpjax.sampling._samplers import FixedSizeSampler
from dpjax.sampling._samplers import PaddedBatch
from dpjax.sampling._samplers import poisson_batch_cap
from dpjax.sampling._samplers import PoissonSampler
from dpjax.sampling._samplers import ShuffleSampler

__all__ = [
    'DEFAULT_OVERFLOW_PROBABILITY',
    'FixedSizeSampler',
    'PaddedBatch',
    'poisson_batch_cap',
    'PoissonSampler',
    'ShuffleSampler',
]
