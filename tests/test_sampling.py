"""Samplers: statistical tests of the sampling law, truncation, events."""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import sampling

DRAWS = 3000


def _poisson_draws(sampler, draws=DRAWS):
  return jax.jit(jax.vmap(sampler.sample, in_axes=(None, 0)))(
      jax.random.key(0), jnp.arange(draws))


def _chi2_pvalue(observed, expected_probs):
  expected = expected_probs * observed.sum()
  return stats.chisquare(observed, expected).pvalue


def test_poisson_batch_size_is_binomial_and_a_wrong_rate_is_rejected():
  n, q = 200, 0.1
  sampler = dpjax.PoissonSampler(n, q, max_batch_size=n)
  sizes = np.asarray(_poisson_draws(sampler).num_sampled)
  bins = np.arange(0, n + 2)
  observed = np.bincount(sizes, minlength=n + 1)

  def pvalue(rate):
    probs = stats.binom.pmf(bins[:-1], n, rate)
    # Pool the tails so every expected count is >= 5.
    lo, hi = np.searchsorted(np.cumsum(probs), [0.01, 0.99])
    obs = np.concatenate([[observed[:lo].sum()], observed[lo:hi],
                          [observed[hi:].sum()]])
    exp = np.concatenate([[probs[:lo].sum()], probs[lo:hi],
                          [probs[hi:].sum()]])
    return _chi2_pvalue(obs, exp / exp.sum())

  assert pvalue(q) > 1e-3
  assert pvalue(0.11) < 1e-6 and pvalue(0.09) < 1e-6


def test_poisson_inclusions_are_uniform_over_examples_and_pairwise_independent():
  n, q = 50, 0.2
  batches = _poisson_draws(dpjax.PoissonSampler(n, q, max_batch_size=n))
  member = np.zeros((DRAWS, n), bool)
  for row, (idx, mask) in enumerate(zip(np.asarray(batches.indices),
                                        np.asarray(batches.mask))):
    member[row, idx[mask]] = True
  counts = member.sum(0)
  # Each example's inclusion count is Bin(DRAWS, q).
  z = (counts - DRAWS * q) / np.sqrt(DRAWS * q * (1 - q))
  assert stats.kstest(z, 'norm').pvalue > 1e-3
  both = (member[:, 0] & member[:, 1]).mean()
  assert abs(both - q * q) < 4 * np.sqrt(q * q / DRAWS)


def test_poisson_without_overflow_returns_exactly_the_selected_set():
  sampler = dpjax.PoissonSampler(1000, 0.05)
  batch = jax.jit(sampler.sample)(jax.random.key(7), 0)
  size = int(batch.num_sampled)
  assert int(batch.mask.sum()) == size <= sampler.max_batch_size
  idx = np.asarray(batch.indices)[np.asarray(batch.mask)]
  assert len(set(idx)) == size
  assert np.all(np.asarray(batch.indices)[~np.asarray(batch.mask)] == 0)


def test_truncation_keeps_a_uniform_subset_of_the_selected_examples():
  n, q, cap = 40, 0.5, 10  # overflow almost always
  batches = _poisson_draws(dpjax.PoissonSampler(n, q, max_batch_size=cap))
  sizes = np.asarray(batches.num_sampled)
  assert np.all(np.asarray(batches.mask).sum(1) == np.minimum(sizes, cap))
  # Each example is kept with probability E[min(K, cap)/K | selected] q, the
  # same for all examples.
  kept = np.bincount(np.asarray(batches.indices)[np.asarray(batches.mask)],
                     minlength=n)
  assert _chi2_pvalue(kept, np.full(n, 1 / n)) > 1e-3
  for idx, mask in zip(np.asarray(batches.indices), np.asarray(batches.mask)):
    assert len(set(idx[mask])) == mask.sum()


@pytest.mark.parametrize('q,cap', [(1.0, None), (0.5, 150)])
def test_a_cap_above_n_returns_every_selected_example(q, cap):
  sampler = dpjax.PoissonSampler(100, q, max_batch_size=cap)
  assert sampler.max_batch_size > 100
  batch = jax.jit(sampler.sample)(jax.random.key(5), 0)
  assert batch.indices.shape == (sampler.max_batch_size,)
  assert int(batch.mask.sum()) == int(batch.num_sampled)
  if q == 1.0:
    assert sorted(np.asarray(batch.indices)[np.asarray(batch.mask)]) == list(
        range(100))


def test_sampling_is_a_pure_function_of_the_key():
  sampler = dpjax.PoissonSampler(500, 0.1)
  a = sampler.sample(jax.random.key(3), 5)
  b = jax.jit(sampler.sample)(jax.random.key(3), 5)
  for x, y in zip(a[:3], b[:3]):
    np.testing.assert_array_equal(x, y)


def test_default_cap_meets_the_overflow_target_and_is_minimal():
  n, q = 60000, 256 / 60000
  cap = sampling.poisson_batch_cap(n, q)
  tail = dpjax.accounting.poisson_truncation_probability
  assert tail(n, q, cap) <= sampling.DEFAULT_OVERFLOW_PROBABILITY
  assert tail(n, q, cap - 1) > sampling.DEFAULT_OVERFLOW_PROBABILITY
  assert dpjax.PoissonSampler(n, q).overflow_probability == tail(n, q, cap)


def test_poisson_events_name_the_mechanism_that_ran():
  capped = dpjax.PoissonSampler(1000, 0.01, max_batch_size=40)
  assert capped.dp_event(1.2) == dp_accounting.TruncatedSubsampledGaussianDpEvent(
      1000, 0.01, 40, 1.2)
  uncapped = dpjax.PoissonSampler(1000, 0.01, max_batch_size=1000)
  # A cap of N can still be exceeded on an add-one neighbour (N + 1 rows).
  assert isinstance(uncapped.dp_event(1.2),
                    dp_accounting.TruncatedSubsampledGaussianDpEvent)
  full = dpjax.PoissonSampler(1000, 1.0)
  assert full.max_batch_size == 1001
  assert full.dp_event(1.2) == dp_accounting.GaussianDpEvent(1.2)
  roomy = dpjax.PoissonSampler(1000, 0.01, max_batch_size=1001)
  assert roomy.dp_event(1.2) == dp_accounting.PoissonSampledDpEvent(
      0.01, dp_accounting.GaussianDpEvent(1.2))


def test_fixed_size_sampler_draws_distinct_uniform_examples():
  n, b = 30, 7
  sampler = dpjax.sampling.FixedSizeSampler(n, b)
  idx = np.asarray(jax.vmap(sampler.sample, in_axes=(None, 0))(
      jax.random.key(1), jnp.arange(DRAWS)).indices)
  assert all(len(set(row)) == b for row in idx)
  assert _chi2_pvalue(np.bincount(idx.ravel(), minlength=n),
                      np.full(n, 1 / n)) > 1e-3
  event = sampler.dp_event(2.0)
  assert event == dp_accounting.SampledWithoutReplacementDpEvent(
      n, b, dp_accounting.GaussianDpEvent(1.0))  # replace-one: sigma / 2


def test_shuffle_sampler_covers_every_example_once_per_epoch():
  sampler = dpjax.sampling.ShuffleSampler(10, 4)
  epoch = sampler.epoch(jax.random.key(0))
  assert epoch.indices.shape == (3, 4)
  seen = np.asarray(epoch.indices)[np.asarray(epoch.mask)]
  assert sorted(seen.tolist()) == list(range(10))
  assert sampler.dp_event(3.0) == dp_accounting.GaussianDpEvent(1.5)


@pytest.mark.parametrize('factory,match', [
    (lambda: dpjax.PoissonSampler(100, 0.0), 'sampling_rate=0.0'),
    (lambda: dpjax.PoissonSampler(100, 1.5), 'sampling_rate=1.5'),
    (lambda: dpjax.PoissonSampler(0, 0.1), 'num_examples=0'),
    (lambda: dpjax.PoissonSampler(100, 0.1, max_batch_size=0),
     'max_batch_size=0'),
    (lambda: dpjax.sampling.FixedSizeSampler(10, 0), 'batch_size=0'),
    (lambda: dpjax.sampling.FixedSizeSampler(10, 11), 'batch_size=11'),
    (lambda: dpjax.sampling.ShuffleSampler(10, -1), 'batch_size=-1'),
    (lambda: dpjax.PoissonSampler(100, 0.1).dp_event(-1.0),
     'noise_multiplier=-1.0'),
])
def test_bad_sampler_arguments_raise_naming_the_value(factory, match):
  with pytest.raises(ValueError, match=match):
    factory()
