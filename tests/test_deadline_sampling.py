"""Deadline minibatches: |S| = floor(V T_d), padded and masked."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import sampling


def test_deadline_defaults_follow_the_paper():
  s = sampling.DeadlineSampler(1000, 20)
  assert s.time == pytest.approx(20 / 50)  # T_d = B / E[V], V ~ U(10, 90)
  assert s.max_batch_size == math.floor(90 * 0.4)


def test_batch_sizes_follow_the_speed_distribution():
  s = sampling.DeadlineSampler(1000, 20)
  sizes = np.concatenate([
      np.asarray(s.batch_sizes(jax.random.key(i), 500)) for i in range(20)])
  # floor(V * 0.4), V ~ U(10, 90): P[size = k] = |[k, k+1) / 0.4 & [10, 90)|
  # / 80 for k = 4..35.
  ks = np.arange(4, 36)
  lo = np.clip(ks / 0.4, 10, 90)
  hi = np.clip((ks + 1) / 0.4, 10, 90)
  expected = (hi - lo) / 80 * sizes.size
  observed = np.array([(sizes == k).sum() for k in ks])
  assert observed.sum() == sizes.size
  chi2 = float(((observed - expected)**2 / expected).sum())
  assert stats.chi2.sf(chi2, len(ks) - 1) > 1e-3, chi2
  # A wrong deadline (T_d = 0.5) is rejected by the same test.
  wrong = np.floor(np.asarray(s.speeds(jax.random.key(99), 10000)) * 0.5)
  obs_wrong = np.array([(wrong == k).sum() for k in ks])
  exp_wrong = expected / sizes.size * wrong.size
  chi2_wrong = float(((obs_wrong - exp_wrong)**2 / exp_wrong).sum())
  assert stats.chi2.sf(chi2_wrong, len(ks) - 1) < 1e-6


def test_batches_are_uniform_subsets_padded_and_masked():
  s = sampling.DeadlineSampler(50, 20)
  b = s.sample(jax.random.key(0), 6)
  assert b.indices.shape == b.mask.shape == (6, s.max_batch_size)
  assert b.mask.dtype == jnp.bool_
  np.testing.assert_array_equal(b.mask.sum(axis=1), b.num_sampled)
  np.testing.assert_array_equal(
      b.num_sampled, s.batch_sizes(jax.random.key(0), 6))
  for row, mask in zip(np.asarray(b.indices), np.asarray(b.mask)):
    real = row[mask]
    assert len(set(real.tolist())) == len(real)  # without replacement
    assert ((0 <= real) & (real < 50)).all()
    assert (row[~mask] == 0).all()
  # Every example equally likely: inclusion counts over many rounds.
  counts = np.zeros(50)
  total = 0
  for i in range(200):
    b = s.sample(jax.random.key(i), 1)
    counts[np.asarray(b.indices[0])[np.asarray(b.mask[0])]] += 1
    total += int(b.num_sampled[0])
  chi2 = float(((counts - total / 50)**2 / (total / 50)).sum())
  assert stats.chi2.sf(chi2, 49) > 1e-3


def test_pure_and_jittable():
  s = sampling.DeadlineSampler(30, 5)
  a = s.sample(jax.random.key(1), 3)
  b = jax.jit(lambda k: s.sample(k, 3))(jax.random.key(1))
  np.testing.assert_array_equal(a.indices, b.indices)
  np.testing.assert_array_equal(a.mask, b.mask)


def test_custom_speed_and_cap():
  speed = sampling.Speed(
      lambda k, shape: jnp.full(shape, 1000.0), mean=100.0, high=1000.0)
  s = sampling.DeadlineSampler(30, 10, speed)
  assert s.time == pytest.approx(0.1)
  assert s.max_batch_size == 30  # capped at the shard
  np.testing.assert_array_equal(s.batch_sizes(jax.random.key(0), 2), [30, 30])


@pytest.mark.parametrize('kwargs, match', [
    (dict(num_examples=0, expected_batch_size=5), 'num_examples=0'),
    (dict(num_examples=10, expected_batch_size=0), 'expected_batch_size=0'),
    (dict(num_examples=10, expected_batch_size=5, deadline=0.0),
     'deadline=0.0'),
    (dict(num_examples=10, expected_batch_size=5, deadline=-1.0),
     'deadline=-1.0'),
    (dict(num_examples=10, expected_batch_size=5, speed=(1, 2)),
     'Expected speed'),
])
def test_bad_input_names_the_value(kwargs, match):
  with pytest.raises(ValueError, match=match):
    sampling.DeadlineSampler(**kwargs)
  with pytest.raises(ValueError, match='high=5.0 > low=10.0'):
    sampling.uniform_speed(10.0, 5.0)
