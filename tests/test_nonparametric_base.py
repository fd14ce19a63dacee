"""Exponential mechanism and public-bounds helpers (dpjax.nonparametric)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import accounting
from dpjax import audit
from dpjax import nonparametric as npm


def _frequencies(utilities, epsilon, sensitivity, draws=20000, seed=0):
  keys = jax.random.split(jax.random.key(seed), draws)
  draw = jax.jit(jax.vmap(lambda k: npm.exponential_mechanism(
      k, utilities, epsilon=epsilon, sensitivity=sensitivity)))
  return np.bincount(np.asarray(draw(keys)), minlength=len(utilities))


def _expected(utilities, epsilon, sensitivity):
  logits = epsilon * np.asarray(utilities, np.float64) / (2 * sensitivity)
  p = np.exp(logits - logits.max())
  return p / p.sum()


def test_exponential_frequencies_match_and_reject_doubled_epsilon():
  u = jnp.array([0.0, -1.0, -2.0, -3.0, -0.5])
  counts = _frequencies(u, 2.0, 0.5)
  ok = stats.chisquare(counts, counts.sum() * _expected(u, 2.0, 0.5))
  wrong = stats.chisquare(counts, counts.sum() * _expected(u, 4.0, 0.5))
  assert ok.pvalue > 1e-3
  assert wrong.pvalue < 1e-6


def test_exponential_is_pure_and_jit_invariant():
  u = jnp.arange(7.0)
  key = jax.random.key(3)
  eager = npm.exponential_mechanism(key, u, epsilon=0.3, sensitivity=1.0)
  jitted = jax.jit(lambda k, e: npm.exponential_mechanism(
      k, u, epsilon=e, sensitivity=1.0))(key, 0.3)
  assert int(eager) == int(jitted)


def test_exponential_mask_and_huge_utilities_are_stable():
  u = jnp.array([1e30, 0.0, 1e30])
  mask = jnp.array([False, True, True])
  counts = _frequencies(u, 1.0, 1.0, draws=200)
  assert counts[1] == 0 and counts[0] + counts[2] == 200
  idx = npm.exponential_mechanism(jax.random.key(0), u, epsilon=1.0,
                                  sensitivity=1.0, mask=mask)
  assert int(idx) == 2


@pytest.mark.parametrize('kwargs,match', [
    (dict(epsilon=0.0, sensitivity=1.0), 'epsilon=0.0'),
    (dict(epsilon=1.0, sensitivity=-1.0), 'sensitivity=-1.0'),
])
def test_exponential_bad_input(kwargs, match):
  with pytest.raises(ValueError, match=match):
    npm.exponential_mechanism(jax.random.key(0), jnp.zeros(3), **kwargs)
  with pytest.raises(ValueError, match='finite'):
    npm.exponential_mechanism(jax.random.key(0), jnp.array([0.0, jnp.nan]),
                              epsilon=1.0, sensitivity=1.0)


def test_bounds_clip_and_refuse():
  x = jnp.array([[-5.0, 0.5], [3.0, 0.25]])
  z = npm.to_unit_cube(x, ([0.0, 0.0], [2.0, 1.0]))
  np.testing.assert_allclose(z, [[0.0, 0.5], [1.0, 0.25]])
  with pytest.raises(ValueError, match='public input'):
    npm.to_unit_cube(x, None)
  with pytest.raises(ValueError, match='low=1.0 >= high=1.0'):
    npm.check_bounds((1.0, 1.0), 2)
  with pytest.raises(ValueError, match='x without NaN'):
    npm.to_unit_cube(jnp.array([[0.0, jnp.nan]]), (0.0, 1.0))
  with pytest.raises(ValueError, match='integer labels'):
    npm.check_labels(jnp.array([0, 3]), 2, 3)
  with pytest.raises(ValueError, match='shape'):
    npm.check_labels(jnp.array([0, 1, 1]), 2, 3)


def test_private_bounds_cover_the_data_and_refuse_without_domain():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(5.0, 1.0, (2000, 3)), jnp.float32)
  (low, high), event = npm.dp_bounds(jax.random.key(0), x, epsilon=3.0,
                                     domain=(-100.0, 100.0))
  assert event.epsilon == 3.0
  assert np.all(low < high)
  assert np.all(np.abs(low - 5.0 + 1.645) < 0.5)
  assert np.all(np.abs(high - 5.0 - 1.645) < 0.5)
  with pytest.raises(ValueError, match='public domain'):
    npm.dp_bounds(jax.random.key(0), x, epsilon=1.0, domain=None)


def test_private_bounds_rank_utility_has_sensitivity_one():
  # Replace-one changes #{x <= r} by at most 1 for every candidate r.
  rng = np.random.default_rng(1)
  x = rng.uniform(0, 1, 50)
  grid = np.linspace(-1, 2, 301)
  for _ in range(200):
    x2 = x.copy()
    x2[rng.integers(50)] = rng.uniform(-1, 2)
    r1 = (x[:, None] <= grid).sum(0)
    r2 = (x2[:, None] <= grid).sum(0)
    assert np.max(np.abs(r1 - r2)) <= 1


def test_exponential_event_states_the_delta_of_the_float_noise():
  """Float Gumbel noise has bounded support: the event is (eps, delta) with
  delta = (1 + e^eps) m 2^-63, and the releases built on it carry it (spe:
  test_private_trees)."""
  event = accounting.EpsilonDeltaDpEvent(
      1.0, npm.exponential_mechanism_delta(1.0, 50))
  assert event.epsilon == 1.0
  assert event.delta == pytest.approx((1 + np.e) * 50 * 2.0 ** -63, rel=1e-12)
  assert npm.exponential_mechanism_delta(100.0, 2) == 1.0  # vacuous, said so
  case = audit.audit_case('exponential')
  assert (case.epsilon, case.delta) == (1.0, event.delta)
  x = jnp.linspace(0.0, 1.0, 20)[:, None]
  _, bounds_event = npm.dp_bounds(jax.random.key(0), x, epsilon=1.0,
                                  domain=(-1, 2), num_candidates=8)
  assert bounds_event.delta == pytest.approx(
      2 * npm.exponential_mechanism_delta(0.5, 8))


def test_exponential_huge_equal_utilities_are_a_fair_draw():
  """Logits are shifted by the top utility, so 1e30 + noise does not round
  the noise away (which always drew the first candidate)."""
  counts = _frequencies(jnp.array([1e30, 1e30]), 1.0, 1.0, draws=400)
  assert 150 < counts[0] < 250
