"""Noise samplers: fixed-key KS tests of the scale, purity, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import noise

N = 20_000


@pytest.mark.parametrize('sampler,dist', [(noise.gaussian, 'norm'),
                                           (noise.laplace, 'laplace')])
@pytest.mark.parametrize('scale', [0.5, 3.0])
def test_ks_accepts_the_true_scale_and_rejects_wrong_ones(sampler, dist, scale):
  x = np.asarray(sampler(jax.random.key(1), (N,), scale))
  assert stats.kstest(x, dist, args=(0, scale)).pvalue > 1e-3
  for wrong in (2 / 3 * scale, 3 / 2 * scale):
    assert stats.kstest(x, dist, args=(0, wrong)).pvalue < 1e-6


def test_samplers_are_pure_functions_of_the_key():
  k = jax.random.key(3)
  np.testing.assert_array_equal(noise.gaussian(k, (5,), 1.0),
                                noise.gaussian(k, (5,), 1.0))
  assert not np.array_equal(noise.gaussian(k, (5,), 1.0),
                            noise.gaussian(jax.random.key(4), (5,), 1.0))


def test_zero_scale_gives_zeros():
  np.testing.assert_array_equal(noise.gaussian(jax.random.key(0), (4,), 0.0),
                                jnp.zeros(4))
  np.testing.assert_array_equal(noise.laplace(jax.random.key(0), (4,), 0.0),
                                jnp.zeros(4))


def test_tree_noise_draws_independent_leaves_of_matching_shape():
  tree = {'a': jnp.zeros((3, 2)), 'b': jnp.zeros((3, 2))}
  out = noise.tree_noise(noise.gaussian, jax.random.key(0), tree, stddev=1.0)
  assert out['a'].shape == (3, 2) and out['a'].dtype == jnp.float32
  assert not np.array_equal(out['a'], out['b'])


def test_negative_scales_raise_naming_the_value():
  with pytest.raises(ValueError, match='stddev=-1.0'):
    noise.gaussian(jax.random.key(0), (2,), stddev=-1.0)
  with pytest.raises(ValueError, match='scale=-0.5'):
    noise.laplace(jax.random.key(0), (2,), scale=-0.5)
