"""One-run audits: the p-value against a direct transcription of its sum, the
bound's closed form and monotonicity, its validity by simulation, the driver,
and DP-SGD runs with gradient canaries (honest and deliberately broken)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special
from scipy import stats

from dpjax import accounting
from dpjax import audit

DELTA = 1e-5


def _p_value_loop(v, r, m, eps, delta):
  """P[B >= v] + 2 m delta max_i P[v - i <= B < v] / i, term by term."""
  q = math.exp(eps) / (1 + math.exp(eps))
  tail = sum(stats.binom.pmf(j, r, q) for j in range(v, r + 1))
  best, window = 0.0, 0.0
  for i in range(1, v + 1):
    window += stats.binom.pmf(v - i, r, q)
    best = max(best, window / i)
  return min(tail + 2 * m * delta * best, 1.0)


@pytest.mark.parametrize('v, r, m, eps, delta', [
    (60, 100, 100, 0.3, 1e-3), (95, 100, 1000, 2.0, 1e-5),
    (10, 10, 50, 1.0, 0.01), (0, 5, 5, 0.5, 0.1), (480, 500, 5000, 3.0, 1e-6),
    (30, 40, 40, 0.0, 0.0)])
def test_p_value_matches_the_sum_term_by_term(v, r, m, eps, delta):
  assert audit.one_run_p_value(v, r, m, eps, delta) == pytest.approx(
      _p_value_loop(v, r, m, eps, delta), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize('r', [10, 100, 1000])
def test_pure_bound_with_perfect_guesses_is_the_logit_of_alpha_to_1_over_r(r):
  # delta = 0, v = r: P[B >= r] = q^r = 0.05, so eps = logit(0.05^(1/r)),
  # growing like ln(r / ln 20): perfect guessing proves at most that.
  bound = audit.one_run_epsilon_lower_bound(r, r, r, 0.0)
  assert bound == pytest.approx(special.logit(0.05**(1 / r)), rel=1e-9)
  assert abs(bound - math.log(r / math.log(20))) < math.log(20) / r


@pytest.mark.parametrize('v, r, m, delta', [
    (80, 100, 100, 0.0), (700, 1000, 1000, 0.0), (95, 100, 1000, 1e-5),
    (900, 1000, 10000, 1e-6), (100, 100, 1000, 1e-5)])
def test_bound_is_the_largest_refuted_epsilon(v, r, m, delta):
  bound = audit.one_run_epsilon_lower_bound(v, r, m, delta)
  assert bound > 0
  assert audit.one_run_p_value(v, r, m, bound, delta) <= 0.05
  assert audit.one_run_p_value(v, r, m, bound * (1 + 1e-5), delta) > 0.05
  if delta == 0:  # the exact binomial test
    q = special.expit(bound)
    assert stats.binom.sf(v - 1, r, q) == pytest.approx(0.05, rel=1e-5)


def test_bound_grows_with_correct_guesses_and_shrinks_with_delta():
  r, m = 100, 1000
  bounds = [audit.one_run_epsilon_lower_bound(v, r, m, DELTA)
            for v in range(r + 1)]
  assert all(b0 <= b1 for b0, b1 in zip(bounds, bounds[1:]))
  assert bounds[50] == 0.0 and bounds[-1] > 3  # chance proves nothing
  by_delta = [audit.one_run_epsilon_lower_bound(90, r, m, d)
              for d in (0.0, 1e-6, 1e-5, 1e-4, 1e-3)]
  assert all(b0 > b1 for b0, b1 in zip(by_delta, by_delta[1:]))
  # A stricter level proves less.
  assert (audit.one_run_epsilon_lower_bound(90, r, m, DELTA, 0.99)
          < audit.one_run_epsilon_lower_bound(90, r, m, DELTA, 0.9))


def _rejection_rate(correct_counts, r, m, eps0, delta):
  bound = {v: audit.one_run_epsilon_lower_bound(int(v), r, m, delta)
           for v in np.unique(correct_counts)}
  return np.mean([bound[v] > eps0 for v in correct_counts])


def test_bound_is_valid_for_randomized_response():
  # eps0-DP randomized response guesses right w.p. e^eps0 / (1 + e^eps0):
  # the bound may exceed eps0 in at most 5% of runs, and a tight test
  # comes close to 5%.
  rng = np.random.default_rng(0)
  eps0, r, runs = 1.0, 200, 4000
  v = rng.binomial(r, special.expit(eps0), size=runs)
  rate = _rejection_rate(v, r, r, eps0, 0.0)
  assert 0.025 < rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
  # The same counts judged at a smaller eps are refuted far more often.
  assert _rejection_rate(v, r, r, eps0 / 2, 0.0) > 0.5


def test_bound_is_valid_for_an_approximate_dp_guesser():
  # Each canary: with probability delta0 its bit is revealed, else eps0-RR.
  # That is (eps0, delta0)-DP per canary; the bound with delta0 must stay
  # at most eps0 in ~95% of runs, and delta0 costs evidence.
  rng = np.random.default_rng(1)
  eps0, delta0, m, runs = 1.0, 5e-4, 400, 2000
  q = delta0 + (1 - delta0) * special.expit(eps0)
  v = rng.binomial(m, q, size=runs)
  rate = _rejection_rate(v, m, m, eps0, delta0)
  assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
  assert rate < _rejection_rate(v, m, m, eps0, 0.0)


def _randomized_response_scores(eps0):
  @jax.jit
  def scores_fn(key, included):  # eps0-DP in each canary's bit
    keep = jax.random.bernoulli(key, special.expit(eps0), included.shape)
    return jnp.where(keep, included, ~included).astype(jnp.float32)
  return scores_fn


def test_driver_counts_guesses_and_is_valid_on_randomized_response():
  eps0, m, r = 1.0, 500, 100
  scores_fn = _randomized_response_scores(eps0)
  runs = [audit.one_run_audit(jax.random.key(i), scores_fn, num_canaries=m,
                              num_guesses=r, delta=0.0)
          for i in range(100)]
  assert all(x.num_guesses == r and x.num_positive_guesses == 50
             for x in runs)
  accuracy = np.mean([x.num_correct for x in runs]) / r
  assert accuracy == pytest.approx(special.expit(eps0), abs=0.03)
  assert np.mean([x.epsilon_lower_bound > eps0 for x in runs]) <= 0.1
  assert all(x.epsilon_lower_bound == audit.one_run_epsilon_lower_bound(
      x.num_correct, r, m, 0.0) for x in runs)


def test_driver_with_a_perfect_oracle_and_one_sided_guesses():
  oracle = lambda key, included: included.astype(jnp.float32)
  for k_plus in (0, 30, 100):
    res = audit.one_run_audit(jax.random.key(0), oracle, num_canaries=1000,
                              num_guesses=100, num_positive_guesses=k_plus,
                              delta=DELTA)
    assert res.num_correct == 100 and res.num_positive_guesses == k_plus
    assert res.epsilon_lower_bound == audit.one_run_epsilon_lower_bound(
        100, 100, 1000, DELTA)
  # An anti-oracle (scores backwards) gets every guess wrong.
  res = audit.one_run_audit(jax.random.key(0), lambda k, s: -oracle(k, s),
                            num_canaries=1000, num_guesses=100, delta=DELTA)
  assert res.num_correct == 0 and res.epsilon_lower_bound == 0.0


def test_count_correct_top_and_bottom():
  scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
  included = np.array([True, False, True, False, True, False])
  assert audit.count_correct(scores, included, 2, 0) == 1  # 0 yes, 1 no
  assert audit.count_correct(scores, included, 0, 2) == 1  # 5 yes, 4 no
  assert audit.count_correct(scores, included, 3, 3) == 4  # 2 + 2


def test_audit_is_reproducible_from_its_key():
  f = _randomized_response_scores(1.0)
  kw = dict(num_canaries=300, num_guesses=60, delta=DELTA)
  a = audit.one_run_audit(jax.random.key(3), f, **kw)
  b = audit.one_run_audit(jax.random.key(3), f, **kw)
  c = audit.one_run_audit(jax.random.key(4), f, **kw)
  assert a == b and a != c


@pytest.mark.parametrize('kwargs, match', [
    (dict(num_guesses=11), 'num_guesses=11'),
    (dict(num_guesses=0), 'num_guesses=0'),
    (dict(num_canaries=0), 'num_canaries=0'),
    (dict(delta=1.0), 'delta=1.0'),
    (dict(delta=-0.1), 'delta=-0.1'),
    (dict(confidence=1.0), 'confidence=1.0'),
    (dict(num_positive_guesses=6), 'num_positive_guesses=6'),
    (dict(scores_fn=lambda k, s: jnp.zeros(3)), r'shape \(10,\).*\(3,\)'),
    (dict(scores_fn=lambda k, s: jnp.full(10, jnp.nan)), '10 NaN or inf'),
])
def test_driver_bad_input(kwargs, match):
  base = dict(scores_fn=lambda k, s: s.astype(jnp.float32), num_canaries=10,
              num_guesses=5, delta=DELTA)
  base.update(kwargs)
  with pytest.raises(ValueError, match=match):
    audit.one_run_audit(jax.random.key(0), **base)


@pytest.mark.parametrize('args, match', [
    ((11, 10, 100, DELTA), 'num_correct=11'),
    ((5, 10, 9, DELTA), 'num_guesses=10'),
    ((5, 10, 100, 1.5), 'delta=1.5'),
    ((-1, 10, 100, DELTA), 'num_correct=-1'),
])
def test_bound_bad_input(args, match):
  with pytest.raises(ValueError, match=match):
    audit.one_run_epsilon_lower_bound(*args)
  with pytest.raises(ValueError, match='epsilon=-1'):
    audit.one_run_p_value(5, 10, 100, -1.0, DELTA)


def _dpsgd_audit(m, r, steps, sigma, key=0, **kwargs):
  f = audit.dpsgd_gradient_canaries(m, steps=steps, noise_multiplier=sigma,
                                    **kwargs)
  return audit.one_run_audit(jax.random.key(key), f, num_canaries=m,
                             num_guesses=r, delta=DELTA)


@pytest.mark.slow  # about 8 s: the default stage is near its budget
def test_dpsgd_gradient_canaries_one_run_audit():
  # Full-batch DP-SGD, T steps, calibrated to eps = 2: one run with m = 1000
  # canaries stays below the claim; skipping clipping (canary gradients of
  # norm 10 C with noise for C) is refuted by the same single run.
  m, r, steps, eps = 1000, 100, 10, 2.0
  sigma = accounting.calibrate(lambda s: accounting.gaussian_event(s, sampling_rate=1.0), eps, DELTA, steps=steps)
  claim = accounting.epsilon(accounting.gaussian_event(sigma, sampling_rate=1.0, steps=steps), DELTA)
  assert claim <= eps + 1e-6
  honest = _dpsgd_audit(m, r, steps, sigma)
  assert 0 < honest.epsilon_lower_bound <= claim  # evidence, no refutation
  broken = _dpsgd_audit(m, r, steps, sigma, clip=False)
  assert broken.num_correct == r
  assert broken.epsilon_lower_bound > claim


def test_dpsgd_gradient_canaries_bad_input():
  f = audit.dpsgd_gradient_canaries(4, steps=1, noise_multiplier=1.0)
  with pytest.raises(ValueError, match=r'shape \(4,\)'):
    f(jax.random.key(0), jnp.ones(5, bool))
  with pytest.raises(ValueError, match='sampling_rate=0'):
    audit.dpsgd_gradient_canaries(4, steps=1, noise_multiplier=1.0,
                                  sampling_rate=0)
  with pytest.raises(ValueError, match='steps=0'):
    audit.dpsgd_gradient_canaries(4, steps=0, noise_multiplier=1.0)


@pytest.mark.slow
@pytest.mark.parametrize('eps', [1.0, 2.0, 4.0, 8.0])
def test_dpsgd_one_run_audit_across_epsilons(eps):
  # m = 5000 canaries, r = 1000 guesses: honest runs never refute the claim;
  # unclipped runs with canary gradients of norm 100 C guess perfectly,
  # which proves about 5.7 here, so they refute eps = 1, 2, 4 but not 8
  # (that needs r of order 3 e^8).
  m, r, steps = 5000, 1000, 10
  sigma = accounting.calibrate(lambda s: accounting.gaussian_event(s, sampling_rate=1.0), eps, DELTA, steps=steps)
  claim = accounting.epsilon(accounting.gaussian_event(sigma, sampling_rate=1.0, steps=steps), DELTA)
  kw = dict(key=1, canary_gradient_norm=100.0)
  honest = _dpsgd_audit(m, r, steps, sigma, **kw)
  assert 0 < honest.epsilon_lower_bound <= claim
  broken = _dpsgd_audit(m, r, steps, sigma, clip=False, **kw)
  assert broken.num_correct == r
  ceiling = audit.one_run_epsilon_lower_bound(r, r, m, DELTA)
  assert broken.epsilon_lower_bound == ceiling
  assert (broken.epsilon_lower_bound > claim) == (eps < ceiling)


@pytest.mark.slow
def test_dpsgd_one_run_audit_with_poisson_sampling():
  m, r, steps, q, eps = 2000, 200, 20, 0.5, 2.0
  sigma = accounting.calibrate(lambda s: accounting.gaussian_event(s, sampling_rate=q), eps, DELTA, steps=steps)
  claim = accounting.epsilon(accounting.gaussian_event(sigma, sampling_rate=q, steps=steps), DELTA)
  honest = _dpsgd_audit(m, r, steps, sigma, key=2, sampling_rate=q)
  assert 0 < honest.epsilon_lower_bound <= claim
  broken = _dpsgd_audit(m, r, steps, sigma, key=2, sampling_rate=q,
                        clip=False)
  assert broken.epsilon_lower_bound > claim


def _input_canary_data(n=512, m=256, d=32, classes=4):
  rng = np.random.default_rng(0)
  centers = rng.normal(size=(classes, d)) * 2
  y = rng.integers(0, classes, n)
  x = centers[y] + rng.normal(size=(n, d))
  # Canaries: far-out inputs with random labels, each learnt only if present.
  return x, y, rng.normal(size=(m, d)) * 5, rng.integers(0, classes, m)


def test_input_space_canaries_one_run_audit():
  x, y, cx, cy = _input_canary_data()
  m, r, steps = len(cx), 50, 100
  results = {}
  for sigma in (0.0, 2.0):
    f = audit.dpsgd_input_canaries(x, y, cx, cy, num_classes=4, steps=steps,
                                   noise_multiplier=sigma, learning_rate=2.0)
    results[sigma] = audit.one_run_audit(jax.random.key(0), f,
                                         num_canaries=m, num_guesses=r,
                                         delta=DELTA)
  # Without noise the final model tells members apart (black-box signal) ...
  assert results[0.0].num_correct > 0.65 * r
  # ... and with noise the bound stays below what the accountant states.
  claim = accounting.epsilon(accounting.gaussian_event(2.0, sampling_rate=1.0, steps=steps), DELTA)
  assert results[2.0].epsilon_lower_bound <= claim


def test_input_space_canaries_bad_input():
  x, y, cx, cy = _input_canary_data(n=8, m=4, d=3)
  kw = dict(num_classes=4, steps=1, noise_multiplier=1.0)
  with pytest.raises(ValueError, match='canary_x'):
    audit.dpsgd_input_canaries(x, y, cx[:, :2], cy, **kw)
  with pytest.raises(ValueError, match='canary_y in'):
    audit.dpsgd_input_canaries(x, y, cx, cy + 4, **kw)
  with pytest.raises(ValueError, match='num_classes=1'):
    audit.dpsgd_input_canaries(x, y, cx, cy, **dict(kw, num_classes=1))
  f = audit.dpsgd_input_canaries(x, y, cx, cy, **kw)
  with pytest.raises(ValueError, match=r'shape \(4,\)'):
    f(jax.random.key(0), jnp.ones(3, bool))
