"""Non-parametric entry points on hostile inputs: refusals that name the
argument and never a private value, and safe behaviour where a value is
traced (under jit) and cannot be checked."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import nonparametric as npm

KW = dict(epsilon=1.0, bounds=(0.0, 1.0), num_classes=2)
X = np.array([[0.1, 0.2], [0.9, 0.8], [0.4, 0.6]], np.float32)
Y = np.array([0, 1, 1])


def _message(call) -> str:
  with pytest.raises(ValueError) as e:
    call()
  return str(e.value)


def test_refusals_name_the_argument_not_the_private_value():
  msg = _message(lambda: npm.check_labels(np.array([0, 7, 1]), 3, 2))
  assert 'y' in msg and '7' not in msg
  msg = _message(lambda: npm.check_labels(np.array([0.0, 0.25]), 2, 2))
  assert 'integer labels' in msg and '0.25' not in msg
  x = np.zeros((6, 2), np.float32)
  x[4, 1] = np.nan
  msg = _message(lambda: npm.check_features(x))
  assert msg == 'Expected x without NaN.'  # no row index


@pytest.mark.parametrize('n', [0, 3])
def test_spe_and_sspe_release_for_every_n(n):
  """Fewer records than trees (even none) is no refusal: a refusal that
  depends on the private n would release it."""
  x, y = X[:n], Y[:n]
  kw = dict(KW, num_trees=5, depth=1, num_candidates=2)
  release, event = npm.spe(jax.random.key(0), x, y, **kw)
  assert release.counts.shape == (5, 2, 2) and event.epsilon == 1.0
  release, _ = npm.sspe(jax.random.key(0), x, y, x, setting=1, **kw)
  assert release.counts.shape == (5, 2, 2)


def test_bounds_that_meet_in_float32_are_refused():
  assert np.float32(1.0) == np.float32(1.0 + 1e-12)
  with pytest.raises(ValueError, match='float32'):
    npm.check_bounds((1.0, 1.0 + 1e-12), 2)
  with pytest.raises(ValueError, match='float32'):
    npm.check_bounds((-3e38, 3e38), 1)  # the width overflows
  with pytest.raises(ValueError, match='bounds'):
    npm.histogram(X, Y, bounds=(0.5, 0.5 + 1e-10), num_classes=2, bins=2)


def test_traced_labels_out_of_range_count_in_no_class():
  labels = jax.jit(lambda y: npm.check_labels(y, 4, 3))(
      jnp.array([0, -1, 3, 2]))
  np.testing.assert_array_equal(labels, [0, 3, 3, 2])  # 3 = no class
  x = jnp.array([[0.1], [0.9]])
  scores = jax.jit(lambda y: npm.histogram(
      x, y, bounds=(0.0, 1.0), num_classes=2, bins=2).scores)(
          jnp.array([0, -1]))
  np.testing.assert_array_equal(scores[:2], [[1.0, 0.0], [0.0, 0.0]])
  trees = jax.jit(lambda y: npm.random_decision_trees(
      jax.random.key(0), x, y, epsilon=1e6, bounds=(0.0, 1.0), num_classes=2,
      num_trees=1, depth=1)[0].leaf_counts)(jnp.array([1, -1]))
  np.testing.assert_allclose(trees.sum(axis=(0, 1)), [0.0, 1.0], atol=1e-3)


def test_traced_nan_features_land_at_the_lower_bound():
  y = jnp.array([0, 1, 1])
  fit = jax.jit(lambda x: npm.histogram(
      x, y, bounds=(0.0, 1.0), num_classes=2, bins=4, key=jax.random.key(0),
      projection_dim=2).cells)
  nan = fit(jnp.asarray(X).at[1, 1].set(jnp.nan))
  low = fit(jnp.asarray(X).at[1, 1].set(0.0))
  np.testing.assert_array_equal(nan, low)


def test_exponential_refuses_empty_and_fully_masked_candidates():
  key = jax.random.key(0)
  kw = dict(epsilon=1.0, sensitivity=1.0)
  with pytest.raises(ValueError, match='utilities'):
    npm.exponential_mechanism(key, jnp.zeros(0), **kw)
  with pytest.raises(ValueError, match='mask'):
    npm.exponential_mechanism(key, jnp.zeros(3), mask=jnp.zeros(3, bool),
                              **kw)
  draw = jax.jit(lambda m: npm.exponential_mechanism(key, jnp.zeros(3),
                                                     mask=m, **kw))
  assert int(draw(jnp.zeros(3, bool))) == -1  # traced: never a masked index
  assert int(draw(jnp.array([False, False, True]))) == 2


def test_dp_knn_without_training_points_releases_noise_alone():
  release, event = npm.dp_knn(jax.random.key(0), np.zeros((0, 2)),
                              np.zeros((0,), int), X, **KW)
  assert release.counts.shape == (3, 2)
  # 2 N / b' for the sampled b' >= 2 N / eps: 1 / 6 has more than 30 bits.
  assert event.delta == 0.0  # pure DP, at the sampled scale's epsilon:
  assert 1.0 - 2.0**-28 < event.epsilon < 1.0
  with pytest.raises(ValueError, match='x_test'):
    npm.dp_knn(jax.random.key(0), X, Y, np.zeros((0, 2)), **KW)


def test_sspe_unlabelled_width_and_predict_dimension_name_the_argument():
  with pytest.raises(ValueError, match='x_unlabelled with 2 features'):
    npm.sspe(jax.random.key(0), X, Y, np.zeros((4, 3)), num_trees=1, **KW)
  release = npm.histogram(X, Y, bounds=(0.0, 1.0), num_classes=2, bins=2)
  with pytest.raises(ValueError, match='x with 2 features'):
    npm.predict(release, np.zeros((1, 3)))
  knn, _ = npm.dp_knn(jax.random.key(0), X, Y, X, **KW)
  with pytest.raises(ValueError, match='x with 2 features'):
    npm.predict(knn, np.zeros((1, 3)))
  trees = npm.TreeEnsemble(jnp.zeros((1, 1), jnp.int32),
                           jnp.zeros((1, 1)), jnp.zeros((1, 2, 2)),
                           jnp.zeros(2), jnp.ones(2))
  with pytest.raises(ValueError, match='x with 2 features'):
    npm.predict(trees, np.zeros((1, 3)))
