"""Exact discrete Laplace noise on the non-parametric releases' counts.

Each release minus the same release at epsilon = inf (same key) is its
noise: int32, exactly discrete Laplace with the sampled scale b', and the
event states Delta / b'.
"""

import fractions
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import audit
from dpjax import noise
from dpjax import nonparametric as npm
from dpjax.nonparametric import _count_noise
from dpjax.nonparametric import _trees

INF = float('inf')


def _dlap_pvalue(z, b, min_expected=40.0):
  """Chi-square of integers z against pmf proportional to exp(-|x| / b),
  neighbouring values merged until each bin expects ``min_expected``."""
  radius = int(60 * b + 20)
  support = np.arange(-radius, radius + 1)
  pmf = np.exp(-np.abs(support) / b)
  expected = pmf / pmf.sum() * len(z)
  groups, g, acc = np.zeros(len(support), int), 0, 0.0
  for i, e in enumerate(expected):
    groups[i], acc = g, acc + e
    if acc >= min_expected:
      g, acc = g + 1, 0.0
  if acc < min_expected and g > 0:
    groups[groups == g] = g - 1
  idx = np.clip(np.asarray(z) + radius, 0, len(support) - 1)
  observed = np.bincount(groups[idx], minlength=groups.max() + 1)
  want = np.bincount(groups, weights=expected)
  chi2 = float(((observed - want) ** 2 / want).sum())
  return float(stats.chi2.sf(chi2, len(want) - 1))


def _assert_exact_dlap(z, scale):
  """z is int32 and exactly DLap(b'), b' the sampled scale; 2 b' is not."""
  z = np.asarray(z)
  assert z.dtype == np.int32
  b = float(noise.discrete_laplace_scale(scale))
  assert _dlap_pvalue(z.ravel(), b) > 1e-3
  assert _dlap_pvalue(z.ravel(), 2 * b) < 1e-6


def test_private_histogram_counts_are_int32_plus_exact_dlap():
  x, y = np.zeros((10, 2)), np.zeros(10, int)
  kw = dict(bounds=(0.0, 1.0), num_classes=2, bins=40)
  exact, _ = npm.dp_histogram(jax.random.key(1), x, y, epsilon=INF, **kw)
  rel, event = npm.dp_histogram(jax.random.key(1), x, y, epsilon=0.5,
                                **kw)
  assert exact.counts.dtype == rel.counts.dtype == jnp.int32
  assert int(exact.counts.sum()) == 10
  _assert_exact_dlap(rel.counts - exact.counts, 2.0)
  assert event.epsilon == 0.5


@pytest.mark.parametrize('num_classes', [2, 3])
def test_noisy_reg_scores_are_noisy_integers_over_n_j(num_classes):
  x = np.repeat((np.arange(600) + 0.5) / 600, 5)[:, None]
  y = np.resize(np.array([0, 1, 1, 2, 0]) % num_classes, 3000)
  kw = dict(bounds=(0.0, 1.0), num_classes=num_classes, bins=600)
  exact = npm.histogram(x, y, **kw)
  rel, event = npm.noisy_reg(jax.random.key(0), x, y, epsilon=0.5, **kw)
  cols = [1] if num_classes == 2 else list(range(num_classes))
  scores = np.asarray(rel.scores[:600])[:, cols]
  noisy = np.round(scores.astype(np.float64) * 5).astype(np.int32)
  np.testing.assert_allclose(scores * 5, noisy, atol=1e-4)
  # The release is a function of the noisy integer (and n_j = 5) alone: one
  # float per integer, so no low bit carries more.
  for v in np.unique(noisy):
    assert len(np.unique(scores[noisy == v])) == 1
  counts = np.round(np.asarray(exact.scores[:600])[:, cols] * 5)
  sensitivity = 1 if num_classes == 2 else 2
  _assert_exact_dlap(noisy - counts.astype(np.int32), sensitivity / 0.5)
  assert event.epsilon == 0.5


def test_dp_knn_counts_are_int32_plus_exact_dlap_of_scale_2n_over_eps():
  rng = np.random.default_rng(2)
  x, y = rng.uniform(0, 1, (300, 3)), rng.integers(0, 3, 300)
  xt = rng.uniform(0, 1, (400, 3))
  kw = dict(bounds=(0.0, 1.0), num_classes=3)
  exact, _ = npm.dp_knn(jax.random.key(1), x, y, xt, epsilon=INF, **kw)
  rel, event = npm.dp_knn(jax.random.key(1), x, y, xt, epsilon=400.0, **kw)
  assert rel.counts.dtype == jnp.int32
  _assert_exact_dlap(rel.counts - exact.counts, 2.0)
  assert event.epsilon == 400.0


def test_rdt_leaf_counts_are_int32_plus_exact_dlap_of_scale_t_over_eps():
  rng = np.random.default_rng(0)
  x = rng.uniform(-1, 1, (200, 4)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  kw = dict(bounds=(-1.0, 1.0), num_classes=2, num_trees=8, depth=6)
  exact, _ = npm.random_decision_trees(jax.random.key(0), x, y, epsilon=INF,
                                       **kw)
  rel, event = npm.random_decision_trees(jax.random.key(0), x, y,
                                         epsilon=2.0, **kw)
  assert rel.leaf_counts.dtype == jnp.int32
  _assert_exact_dlap(rel.leaf_counts - exact.leaf_counts, 4.0)
  assert event.epsilon == 2.0


def test_tree_leaf_noise_is_exact_dlap_per_tree_key():
  keys = jax.random.split(jax.random.key(3), 4)
  counts = jnp.zeros((4, 128, 2), jnp.int32)
  z = _trees.noisy_counts(keys, counts, fractions.Fraction(3))
  _assert_exact_dlap(z, 3.0)
  one = _trees.noisy_counts(keys[2:3], counts[:1], fractions.Fraction(3))
  np.testing.assert_array_equal(one[0], z[2])  # tree t's noise: keys[t]


def test_ensemble_counts_are_int32_and_events_use_the_sampled_scale():
  x = jax.random.uniform(jax.random.key(1), (80, 2))
  y = (x[:, 0] > 0.5).astype(jnp.int32)
  kw = dict(bounds=(0.0, 1.0), num_classes=2, num_trees=2, depth=2)
  rel, event = npm.spe(jax.random.key(0), x, y, epsilon=0.6,
                       num_candidates=4, **kw)
  assert rel.counts.dtype == jnp.int32
  # eps_s = 0.3 for the splits, plus 1 / b' for the leaves (b' >= 1 / 0.3)
  b = noise.discrete_laplace_scale(fractions.Fraction(1) / fractions.Fraction(
      0.6 - 0.6 * 0.5))
  want = fractions.Fraction(0.6 * 0.5) + 1 / b
  assert fractions.Fraction(event.epsilon) >= want
  assert event.epsilon == _count_noise.float_up(want) <= 0.6
  rel2, event2 = npm.sspe(jax.random.key(0), x[:40], y[:40], x[40:],
                          epsilon=0.3, setting=2, **kw)
  rel3, event3 = npm.pte(jax.random.key(0), x[:40], y[:40], x[40:],
                         epsilon=0.3, **kw)
  b = noise.discrete_laplace_scale(1 / fractions.Fraction(0.3))
  assert event2.epsilon == event3.epsilon == _count_noise.float_up(1 / b)
  assert event2.epsilon < 0.3  # 0.3 has more than 30 significant bits
  assert rel2.counts.dtype == rel3.counts.dtype == jnp.int32


@pytest.mark.parametrize('epsilon', [0.3, 1.0, 2.0 / 3, 7.0, 1e-3, 1e4])
@pytest.mark.parametrize('sensitivity', [1, 2, 3, 800])
def test_count_epsilon_is_delta_over_the_sampled_scale(epsilon, sensitivity):
  scale = _count_noise.count_noise_scale(epsilon, sensitivity)
  b = noise.discrete_laplace_scale(scale)
  assert b >= fractions.Fraction(sensitivity) / fractions.Fraction(epsilon)
  got = _count_noise.count_epsilon(epsilon, sensitivity)
  exact = fractions.Fraction(sensitivity) / b
  assert fractions.Fraction(got) >= exact  # rounded up, never down
  assert got == _count_noise.float_up(exact) <= epsilon
  if epsilon / sensitivity <= 1024:
    assert got >= epsilon * (1 - 2.0**-28)
  else:  # the smallest scale, 2^-10: epsilon 1024 Delta
    assert got == 1024 * sensitivity


def test_count_noise_scale_refuses_too_small_epsilon_and_allows_inf():
  assert _count_noise.count_noise_scale(INF, 5) == 0
  assert _count_noise.count_epsilon(INF, 5) == INF
  with pytest.raises(ValueError, match='epsilon=1e-07'):
    _count_noise.count_noise_scale(1e-7, 1)
  with pytest.raises(ValueError, match='epsilon=0'):
    _count_noise.count_noise_scale(0, 1)
  with pytest.raises(ValueError, match='epsilon=1e-07'):
    npm.dp_histogram(jax.random.key(0), np.zeros((2, 1)), [0, 1],
                     epsilon=1e-7, bounds=(0.0, 1.0), num_classes=2,
                     bins=2)
  with pytest.raises(ValueError, match='concrete'):
    jax.jit(lambda e: _count_noise.count_noise_scale(e, 1))(1.0)


def test_float_laplace_counts_trip_the_low_bit_score_and_integers_do_not():
  keys = jax.random.split(jax.random.key(0), 4000)
  score = jax.jit(jax.vmap(lambda k, c: audit.low_bit_score(
      c + noise.laplace(k, (), scale=1.0)), in_axes=(0, None)))
  zero = np.asarray(score(keys, jnp.float32(0.0)))
  assert zero.mean() > 0.15  # a count of 0 keeps fine low bits
  for c in (1.0, -1.0, 2.0, 5.0):
    assert np.all(np.asarray(score(keys, jnp.float32(c))) == 0)
  rel, _ = npm.dp_histogram(jax.random.key(1), np.zeros((3, 1)),
                            [0, 1, 1], epsilon=1.0, bounds=(0.0, 1.0),
                            num_classes=2, bins=64)
  assert float(audit.low_bit_score(rel.counts)) == 0.0
  assert float(audit.low_bit_score(rel.counts.astype(jnp.float32)
                                   + 2.0**-30)) > 0
  assert math.isclose(float(audit.low_bit_score(
      {'a': jnp.array([0.25 + 2.0**-25, 0.75]), 'b': jnp.float32(3.1)})), 1.0)
  with pytest.raises(ValueError, match='grid=0.3'):
    audit.low_bit_score(jnp.zeros(2), grid=0.3)
  with pytest.raises(ValueError, match='radius=2.0'):
    audit.low_bit_score(jnp.zeros(2), radius=2.0)
