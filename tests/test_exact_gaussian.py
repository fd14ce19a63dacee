"""The exact Gaussian path: grid outputs, exact variance, its event, refusals.

One noise scale (stddev 1 on the default grid, sigma_z = 2^18) and one
length, so the exact sampler compiles once for most tests.
"""

import fractions
import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dpjax
from dpjax import accounting
from dpjax import noise
from dpjax import sampling
from dpjax import transforms

N = 40_000
GAMMA = 2.0**-18  # exact_gaussian_grid(1.0)


def _release(x, key=0, stddev=1.0, gamma=None):
  tx = transforms.add_exact_gaussian_noise(stddev, key=jax.random.key(key),
                                           gamma=gamma)
  return tx.update(x, tx.init(None))[0]


def test_default_grid_and_lattice_sigma():
  assert transforms.exact_gaussian_grid(1.0) == GAMMA
  assert transforms.exact_gaussian_grid(3.0) == 2.0**-17  # 3 / g >= 2^18
  # A bound that would not fit 2^29 codes raises the grid.
  assert transforms.exact_gaussian_grid(1e-6, bound=1.0) == 2.0**-29


def test_release_lies_on_the_grid_and_is_reproducible_with_and_without_jit():
  x = jnp.linspace(-3.0, 3.0, N)
  out = _release(x)
  codes = np.asarray(out, np.float64) / GAMMA
  assert np.all(codes == np.round(codes))
  tx = transforms.add_exact_gaussian_noise(1.0, key=jax.random.key(0))
  jitted = jax.jit(tx.update)(x, tx.init(None))[0]
  np.testing.assert_array_equal(np.asarray(out), np.asarray(jitted))
  assert not np.array_equal(np.asarray(out), np.asarray(_release(x, key=1)))


def test_noise_has_the_exact_sigma_variance():
  # Codes j + 1/4 (a grid-aligned offset): k = j + Bernoulli(1/4) + Z, so
  # the centred k has mean 0 and variance sigma'^2 + 3/16. The sample
  # variance of N draws has relative sd sqrt(2 / N) = 0.0071 (near-normal
  # Z); 5 sd gives a false-failure rate below 1e-6, and a noise scale off
  # by 10 % (variance off by 21 %, 30 sd) is rejected.
  x = jnp.full((N,), 0.25 * GAMMA)
  sigma2 = float(noise.discrete_gaussian_sigma_squared(2.0**18))
  k = np.asarray(_release(x), np.float64) / GAMMA
  assert abs(k.mean() - 0.25) < 5 * math.sqrt(sigma2 / N)
  ratio = np.var(k - 0.25) / (sigma2 + 3 / 16)
  tol = 5 * math.sqrt(2 / N)
  assert abs(ratio - 1) < tol
  assert abs(ratio / 1.1**2 - 1) > tol  # a wrong scale would be rejected


def test_same_key_neighbours_differ_by_their_rounding_only():
  # Same key: the noise cancels, and the rounding (the same uniforms) moves
  # each positive coordinate by less than one grid step beyond x - x'.
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.uniform(0, 2, N), jnp.float32)
  y = x.at[:10].add(0.3)
  diff = (np.asarray(_release(y), np.float64) -
          np.asarray(_release(x), np.float64)) / GAMMA
  shift = (np.asarray(y, np.float64) - np.asarray(x, np.float64)) / GAMMA
  assert np.all(np.abs(diff - shift) < 1)


def test_dpsgd_exact_path_releases_grid_values_and_its_event():
  clip, sigma, n = 1.0, 1.1, 1000
  tx = dpjax.dpsgd(1.0, clip, sigma, dpjax.PoissonSampler(1, 1.0), key=jax.random.key(0),
                   noise='exact')
  params = jnp.zeros(3)
  grads = jnp.ones((4, 3))
  out, state = tx.update(grads, tx.init(params), params,
                         mask=jnp.ones(4, bool))
  gamma = transforms.exact_gaussian_grid(sigma * clip, bound=clip)
  codes = -np.asarray(out, np.float64) / gamma
  assert np.all(codes == np.round(codes))
  # The event, computed independently: rho = Delta^2 / (2 sigma'^2) with
  # Delta = C / gamma + sqrt(d) and sigma' the sampler's exact parameter.
  noise_tx = transforms.add_dpsgd_noise(sigma, key=jax.random.key(0),
                                       noise='exact')
  summed = dpjax.clipping.clip_and_sum(grads, clip, jnp.ones(4, bool))
  _, state = noise_tx.update(summed.grad_sum, noise_tx.init(None))
  full = sampling.PoissonSampler(n, 1.0, max_batch_size=n + 1)
  event = accounting.step_event(state, full)
  assert int(state.stream.count) == 1  # step 0 ran
  assert float(state.l2_sensitivity) == clip  # the bound the sum carried
  # The sampler gets sigma C / gamma rounded up to a float32 (the state
  # holds it exactly), and draws from s2 = sigma'^2 >= its square.
  sigma_z = float(state.grid.grid_sigma)
  assert sigma_z >= sigma * clip / gamma > float(
      np.nextafter(np.float32(sigma_z), np.float32(0)))
  s2 = noise.discrete_gaussian_sigma_squared(sigma_z)
  assert fractions.Fraction(event.sigma)**2 <= s2  # never more than sampled
  assert event.sigma**2 > float(s2) * (1 - 1e-12)
  delta2 = clip / gamma + math.sqrt(3)
  assert delta2 <= event.l2_sensitivity <= delta2 * (1 + 2**-23)
  rho = delta2**2 / (2 * float(s2))
  eps = accounting.epsilon(event, 1e-5)
  want = accounting.epsilon(dp_accounting.ZCDpEvent(rho), 1e-5)
  assert eps == pytest.approx(want, rel=1e-6)
  # Subsampled and truncated: the same inner event, the slack on top.
  sub = sampling.PoissonSampler(n, 0.05)
  ev = accounting.step_event(state, sub)
  assert isinstance(ev, accounting.TruncatedPoissonSampledDpEvent)
  assert ev.event == event and ev.truncated_batch_size == sub.max_batch_size
  untruncated = dp_accounting.PoissonSampledDpEvent(0.05, event)
  assert accounting.epsilon(ev, 1e-5, steps=10) >= accounting.epsilon(
      untruncated, 1e-5, steps=10)
  ledger = accounting.PrivacyLedger()
  ledger.record_step(state, sub, sub.sample(jax.random.key(5), 0))
  assert ledger.runs == [(ev, 1)]
  assert math.isfinite(ledger.epsilon(1e-5))
  assert accounting.event_from_dict(accounting.event_to_dict(ev)) == ev


def test_exact_step_event_refusals():
  tx = dpjax.dpsgd(1.0, 1.0, 1.1, dpjax.PoissonSampler(1, 1.0), key=jax.random.key(0), noise='exact')
  params = jnp.zeros(3)
  _, state = tx.update(jnp.ones((2, 3)), tx.init(params), params,
                       mask=jnp.ones(2, bool))
  # The event is read from the state that ran, its sigma included: another
  # sigma runs on another grid and gives another event.
  sampler = sampling.PoissonSampler(100, 0.01)  # normalize divides by 1
  other = dpjax.dpsgd(1.0, 1.0, 2.0, dpjax.PoissonSampler(1, 1.0), key=jax.random.key(0),
                      noise='exact')
  _, other_state = other.update(jnp.ones((2, 3)), other.init(params), params,
                                mask=jnp.ones(2, bool))
  assert float(state[1].noise_multiplier) == np.float32(1.1)
  assert float(other_state[1].noise_multiplier) == 2.0
  assert accounting.epsilon(accounting.step_event(state, sampler), 1e-5) > (
      accounting.epsilon(accounting.step_event(other_state, sampler), 1e-5))
  with pytest.raises(ValueError, match='sampler'):
    accounting.step_event(state, sampling.FixedSizeSampler(100, 1))
  with pytest.raises(ValueError, match='before any step'):
    accounting.step_event(tx.init(params), sampling.PoissonSampler(100, 1.0))
  # Adaptive clipping's count noise is float: the exact path refuses it.
  adaptive = optax.chain(
      transforms.adaptive_clip_per_example(
          1.0, target_quantile=0.5, learning_rate=0.2, count_stddev=1.0,
          expected_batch_size=1.0, key=jax.random.key(1)),
      transforms.add_dpsgd_noise(1.1, key=jax.random.key(0), noise='exact'))
  _, adaptive_state = adaptive.update(jnp.ones((2, 3)), adaptive.init(params),
                                     params, mask=jnp.ones(2, bool))
  with pytest.raises(ValueError, match='exact noise path'):
    accounting.step_event(adaptive_state, sampler)


def test_bad_arguments_are_refused_naming_them():
  key = jax.random.key(0)
  with pytest.raises(ValueError, match='noise'):
    dpjax.dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(8, 1.0), key=key, noise='exakt')
  with pytest.raises(ValueError, match='gamma'):
    transforms.add_exact_gaussian_noise(1.0, key=key, gamma=0.3)
  with pytest.raises(ValueError, match='stddev'):
    transforms.add_exact_gaussian_noise(-1.0, key=key)
  with pytest.raises(ValueError, match='stddev / gamma'):
    transforms.add_exact_gaussian_noise(1.0, key=key, gamma=2.0**-30)
  summed = dpjax.clipping.clip_and_sum(jnp.ones((2, 3)), 1.0,
                                       jnp.ones(2, bool)).grad_sum
  with pytest.raises(ValueError, match='gamma'):
    tx = transforms.add_dpsgd_noise(1.0, key=key, noise='exact',
                                    gamma=2.0**-40)
    tx.update(summed, tx.init(None))
  with pytest.raises(ValueError, match='concrete'):
    jax.jit(lambda s: transforms.add_dpsgd_noise(s, key=key,
                                                 noise='exact'))(1.0)
  with pytest.raises(ValueError, match='strategy'):
    transforms.add_dpsgd_noise(1.0, key=key, noise='exact',
                               strategy=dpjax.correlated_noise.identity(2))
  with pytest.raises(ValueError, match='floating'):
    _release(jnp.ones(3, jnp.int32))
  with pytest.raises(ValueError, match='dimension'):
    transforms.add_exact_gaussian_noise_event(1.0, 1.0, 0)


def test_exact_noise_refuses_a_bare_sum_and_follows_the_carried_bound():
  tx = transforms.add_dpsgd_noise(1.1, key=jax.random.key(0), noise='exact')
  grads, mask = jnp.ones((2, 3)), jnp.ones(2, bool)
  with pytest.raises(ValueError, match='updates'):
    tx.update(grads.sum(0), tx.init(None))
  # A sum clipped to 4 gets the grid and noise of bound 4, not of 1.
  wider = dpjax.clipping.clip_and_sum(grads, 4.0, mask).grad_sum
  _, state = tx.update(wider, tx.init(None))
  assert float(state.l2_sensitivity) == 4.0
  gamma = transforms.exact_gaussian_grid(1.1 * 4.0, bound=4.0)
  assert float(state.grid.gamma) == gamma
  assert float(state.grid.grid_sigma) >= 1.1 * 4.0 / gamma
  assert float(state.grid.grid_sensitivity) >= 4.0 / gamma + math.sqrt(3)
  # A bound traced through a jit boundary cannot fix the grid.
  with pytest.raises(ValueError, match='updates'):
    jax.jit(tx.update)(wider, tx.init(None))
  with pytest.raises(ValueError, match='clip=True'):
    dpjax.dpsgd(1.0, 1.0, 1.1, dpjax.PoissonSampler(1, 1.0), key=jax.random.key(0), noise='exact',
                clip=False)
