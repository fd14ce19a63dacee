"""Batch samplers with fixed shapes, each naming the DpEvent its use justifies.

Example:
  >>> sampler = dpjax.sampling.PoissonSampler(1000, 0.05)
  >>> batch = sampler.sample(jax.random.key(0), 0)  # step 0 of key 0
  >>> batch.indices.shape == batch.mask.shape == (sampler.max_batch_size,)
  True
"""

from dpjax.sampling._balls_in_bins import BallsInBinsSampler
from dpjax.sampling._cyclic_poisson import CyclicPoissonSampler
from dpjax.sampling._deadline import DeadlineSampler
from dpjax.sampling._deadline import Speed
from dpjax.sampling._deadline import uniform_speed
from dpjax.sampling._poisson import DEFAULT_OVERFLOW_PROBABILITY
from dpjax.sampling._poisson import PaddedBatch
from dpjax.sampling._poisson import poisson_batch_cap
from dpjax.sampling._poisson import PoissonSampler
from dpjax.sampling._uniform import FixedSizeSampler
from dpjax.sampling._uniform import ShuffleSampler
from dpjax.sampling._user_level import UserBatch
from dpjax.sampling._user_level import UserPoissonSampler

__all__ = [
    'BallsInBinsSampler',
    'CyclicPoissonSampler',
    'DeadlineSampler',
    'DEFAULT_OVERFLOW_PROBABILITY',
    'FixedSizeSampler',
    'PaddedBatch',
    'poisson_batch_cap',
    'PoissonSampler',
    'ShuffleSampler',
    'Speed',
    'uniform_speed',
    'UserBatch',
    'UserPoissonSampler',
]
