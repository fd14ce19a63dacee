"""Distinguishing audits: the statistics, the attack, and audits that fail on
deliberately broken mechanisms (so an audit can fail)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import accounting
from dpjax import audit
from dpjax import noise

DELTA = 1e-5


@pytest.mark.parametrize('k, n', [(0, 10), (3, 10), (10, 10), (17, 1000),
                                  (500, 1000)])
def test_clopper_pearson_matches_scipys_exact_interval(k, n):
  ref = stats.binomtest(k, n).proportion_ci(0.95, method='exact')
  low, high = audit.clopper_pearson(k, n, 0.95)
  assert low == pytest.approx(ref.low, abs=1e-12)
  assert high == pytest.approx(ref.high, abs=1e-12)
  assert high == pytest.approx(stats.beta.ppf(0.975, k + 1, n - k)
                               if k < n else 1.0)


def test_lower_bound_formula_and_no_evidence():
  a = audit.clopper_pearson(10, 10000, 0.9)[1]
  b = audit.clopper_pearson(9000, 10000, 0.9)[1]
  assert audit.epsilon_lower_bound(10, 9000, 10000, DELTA, 0.95) == (
      pytest.approx(math.log((1 - DELTA - b) / a)))
  assert audit.epsilon_lower_bound(5000, 5000, 10000, DELTA) == 0.0


def _gaussian(stddev):
  return lambda key, x: x + stddev * jax.random.normal(key)


def _laplace(scale):
  return lambda key, x: x + noise.laplace(key, (), scale=scale)


def test_gaussian_mechanism_audit_stays_below_its_claim_and_catches_half_noise():
  eps = 1.0
  stddev = accounting.calibrate_gaussian_stddev(eps, DELTA, 1.0)
  claim = accounting.gaussian_epsilon(stddev, 1.0, DELTA)
  assert claim <= eps + 1e-6
  d, d_prime = jnp.float32(0.0), jnp.float32(1.0)
  honest = audit.distinguishing_audit(jax.random.key(0), _gaussian(stddev), d,
                                      d_prime, trials=200_000, delta=DELTA)
  assert 0 < honest.epsilon_lower_bound <= claim
  broken = audit.distinguishing_audit(jax.random.key(0),
                                      _gaussian(stddev / 2), d, d_prime,
                                      trials=200_000, delta=DELTA)
  assert broken.epsilon_lower_bound > claim


def test_laplace_audit_is_tight_and_catches_a_halved_scale():
  d, d_prime = jnp.float32(0.0), jnp.float32(1.0)
  honest = audit.distinguishing_audit(jax.random.key(2), _laplace(1.0), d,
                                      d_prime, trials=200_000, delta=0.0)
  assert 0.6 < honest.epsilon_lower_bound <= 1.0  # Laplace(1): eps = 1
  broken = audit.distinguishing_audit(jax.random.key(2), _laplace(0.5), d,
                                      d_prime, trials=200_000, delta=0.0)
  assert broken.epsilon_lower_bound > 1.0


def _dpsgd_step(clip, sigma, skip_clipping=False):
  """One DP-SGD step on per-example gradients; the output is the update."""

  def mechanism(key, data):
    grads, mask = data
    if skip_clipping:  # deliberately broken: noise for C, no clipping
      total = jnp.sum(jnp.where(mask[:, None], grads, 0.0), axis=0)
      return total + sigma * clip * jax.random.normal(key, total.shape)
    tx = dpjax.dpsgd(learning_rate=1.0, l2_norm_clip=clip,
                     noise_multiplier=sigma, expected_batch_size=1.0, key=key)
    params = jnp.zeros(grads.shape[1])
    updates, _ = tx.update(grads, tx.init(params), params, mask=mask)
    return -updates

  return mechanism


def test_dpsgd_step_audit_with_a_gradient_canary():
  # Add/remove-one: the canary row is present in D' and masked out in D. Its
  # gradient has norm 100 C along e_0; the score is the update's e_0 part.
  clip, sigma = 1.0, 2.0
  rng = np.random.default_rng(0)
  grads = jnp.asarray(rng.normal(size=(8, 5)) * 0.3, jnp.float32)
  grads = grads.at[0].set(jnp.array([100.0, 0, 0, 0, 0]))
  d = (grads, jnp.arange(8) > 0)
  d_prime = (grads, jnp.ones(8, bool))
  claim = accounting.epsilon(accounting.gaussian_step_event(sigma), DELTA)
  score = lambda update: update[0]
  honest = audit.distinguishing_audit(
      jax.random.key(3), _dpsgd_step(clip, sigma), d, d_prime,
      trials=100_000, delta=DELTA, score=score)
  assert honest.epsilon_lower_bound <= claim
  assert honest.epsilon_lower_bound > 0.25 * claim  # the attack has teeth
  broken = audit.distinguishing_audit(
      jax.random.key(3), _dpsgd_step(clip, sigma, skip_clipping=True), d,
      d_prime, trials=10_000, delta=DELTA, score=score)
  assert broken.epsilon_lower_bound > claim


def test_audits_are_reproducible_from_their_key():
  args = (_laplace(1.0), jnp.float32(0.0), jnp.float32(1.0))
  a = audit.distinguishing_audit(jax.random.key(5), *args, trials=2000,
                                 delta=0.0)
  b = audit.distinguishing_audit(jax.random.key(5), *args, trials=2000,
                                 delta=0.0)
  c = audit.distinguishing_audit(jax.random.key(6), *args, trials=2000,
                                 delta=0.0)
  assert a == b and a != c


@pytest.mark.parametrize('kwargs, match', [
    (dict(trials=99), 'trials=99'),
    (dict(delta=1.0), 'delta=1.0'),
    (dict(delta=-0.1), 'delta=-0.1'),
    (dict(d_prime=jnp.zeros(3)), 'same structure and shapes'),
])
def test_audit_bad_input(kwargs, match):
  base = dict(d=jnp.float32(0.0), d_prime=jnp.float32(1.0), trials=1000,
              delta=DELTA)
  base.update(kwargs)
  with pytest.raises(ValueError, match=match):
    audit.distinguishing_audit(jax.random.key(0), _laplace(1.0), **base)
  with pytest.raises(ValueError, match='successes=11'):
    audit.clopper_pearson(11, 10)


def _knn_mechanism(epsilon):
  def mechanism(key, data):
    x, y = data
    release, _ = dpjax.nonparametric.dp_knn(
        key, x, y, jnp.array([[0.5]]), epsilon=epsilon, bounds=(0.0, 1.0),
        num_classes=2, k=3)
    return release.counts[0]
  return mechanism


def test_dp_knn_audit_holds_at_2n_over_eps_and_refutes_the_thesis_scale():
  # Replace-one: a far class-0 point becomes a class-1 point at the query,
  # which swaps one of the 3 neighbours: counts (3, 0) -> (2, 1).
  x = jnp.array([[0.49], [0.52], [0.47], [0.9], [0.1], [0.95]])
  y = jnp.array([0, 0, 0, 0, 1, 1])
  d = (x, y)
  d_prime = (x.at[3].set(0.5), y.at[3].set(1))
  base = jnp.array([3.0, 0.0])
  # Both coordinates moved towards D': the region where the privacy loss of
  # two Laplace coordinates reaches its maximum.
  score = lambda counts: jnp.minimum(base[0] - counts[0], counts[1] - base[1])
  honest = audit.distinguishing_audit(jax.random.key(7), _knn_mechanism(1.0),
                                      d, d_prime, trials=100_000, delta=0.0,
                                      score=score)
  assert 0.5 < honest.epsilon_lower_bound <= 1.0
  # The thesis's Lap(N/eps) is dp_knn at twice the epsilon; it claims eps = 1.
  thesis = audit.distinguishing_audit(jax.random.key(7), _knn_mechanism(2.0),
                                      d, d_prime, trials=100_000, delta=0.0,
                                      score=score)
  assert thesis.epsilon_lower_bound > 1.0


def test_exponential_mechanism_audit():
  # A neighbour raises candidate 0's utility by the sensitivity and lowers
  # the 49 others': the worst case, where the privacy loss nears eps.
  u = jnp.zeros(50)
  u_prime = jnp.full(50, -1.0).at[0].set(1.0)
  mech = lambda key, util: dpjax.nonparametric.exponential_mechanism(
      key, util, epsilon=1.0, sensitivity=1.0).astype(jnp.float32)
  result = audit.distinguishing_audit(
      jax.random.key(8), mech, u, u_prime, trials=100_000, delta=0.0,
      score=lambda index: (index == 0).astype(jnp.float32))
  assert 0.7 < result.epsilon_lower_bound <= 1.0
