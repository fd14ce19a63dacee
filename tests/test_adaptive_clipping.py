"""Adaptive clipping (Andrew et al. 2021): convergence, events, bad input."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax import transforms

B = 256


def _grads_with_norms(key, norms):
  """Per-example gradients [B, 4] whose L2 norms are ``norms``."""
  direction = jax.random.normal(key, (norms.shape[0], 4))
  direction = direction / jnp.linalg.norm(direction, axis=1, keepdims=True)
  return direction * norms[:, None]


@jax.jit
def _run(key, target_quantile, count_stddev):
  """300 steps on fresh norms ~ U[0, 10]; the bound after each step."""
  tx = transforms.adaptive_clip_per_example(
      0.1, target_quantile=target_quantile, learning_rate=0.2,
      count_stddev=count_stddev, expected_batch_size=B, key=key)
  params = jnp.zeros(4)

  def step(state, k):
    norms = jax.random.uniform(k, (B,), maxval=10.0)
    grads = _grads_with_norms(jax.random.fold_in(k, 1), norms)
    out, state = tx.update(grads, state, params, mask=jnp.ones(B, bool))
    return state, (state.l2_norm_clip, out.value)

  keys = jax.random.split(jax.random.fold_in(key, 7), 300)
  return jax.lax.scan(step, tx.init(params), keys)


@pytest.mark.parametrize('target_quantile', [0.2, 0.5, 0.8])
def test_bound_converges_to_the_target_quantile(target_quantile):
  # Norms ~ U[0, 10]: the gamma-quantile is 10 gamma. Count noise m / 20.
  _, (bounds, _) = _run(jax.random.key(0), target_quantile, B / 20)
  final = float(jnp.mean(bounds[-50:]))
  assert final == pytest.approx(10 * target_quantile, rel=0.1)
  assert float(bounds[0]) < 1.0  # it started far below


def test_each_step_clips_to_the_bound_it_carries():
  _, (bounds, sums) = _run(jax.random.key(1), 0.5, 0.0)
  previous = jnp.concatenate([jnp.array([0.1]), bounds[:-1]])
  # B examples each of norm <= C_t: the sum's norm is at most B C_t.
  assert bool(jnp.all(jnp.linalg.norm(sums, axis=1) <= B * previous * 1.0001))


def test_one_example_moves_the_count_by_half_and_the_sum_by_the_bound():
  tx = transforms.adaptive_clip_per_example(
      1.0, target_quantile=0.5, learning_rate=0.0, count_stddev=0.0,
      expected_batch_size=4, key=jax.random.key(2))
  params = jnp.zeros(4)
  grads = _grads_with_norms(jax.random.key(3), jnp.array([0.5, 3.0, 1e30, 2.]))
  mask = jnp.ones(4, bool)
  base, s0 = tx.update(grads, tx.init(params), params, mask=mask)
  # Removal (mask off) moves the sum by <= C and the centred count by <= 1/2;
  # replacement (NaN, huge, tiny) by <= 2 C and <= 1.
  for value, keep, factor in ((jnp.zeros(4), False, 1),
                              (jnp.full(4, jnp.nan), True, 2),
                              (1e30 * jnp.ones(4), True, 2),
                              (1e-3 * jnp.ones(4), True, 2)):
    other, s1 = tx.update(grads.at[1].set(value), tx.init(params), params,
                          mask=mask.at[1].set(keep))
    moved = jnp.linalg.norm(base.value - other.value)
    assert float(moved) <= factor * 1.0 * (1 + 1e-6)
    count_moved = abs(float(s0.unclipped_fraction - s1.unclipped_fraction)) * 4
    assert count_moved <= factor * 0.5 + 1e-6


@jax.jit
def _zeros_then_norm_one(min_l2_norm_clip):
  """1500 steps of all-zero gradients, then 300 of norm-1 ones; the bound
  after each step (eta 0.2, gamma 0.5: -0.1 a step on zeros in log)."""
  kwargs = {} if min_l2_norm_clip is None else dict(
      min_l2_norm_clip=min_l2_norm_clip)
  tx = transforms.adaptive_clip_per_example(
      1.0, target_quantile=0.5, learning_rate=0.2, count_stddev=0.0,
      expected_batch_size=8, key=jax.random.key(8), **kwargs)
  params = jnp.zeros(4)

  def step(state, scale):
    grads = scale * jnp.ones((8, 4)) / 2.0  # norm `scale`
    _, state = tx.update(grads, state, params, mask=jnp.ones(8, bool))
    return state, state.l2_norm_clip

  scales = jnp.concatenate([jnp.zeros(1500), jnp.ones(300)])
  return jax.lax.scan(step, tx.init(params), scales)[1]


def test_the_bound_has_a_floor_and_recovers_after_zero_gradients():
  """Without a floor the bound underflows to exactly 0 after about 900
  zero-gradient steps and 0 exp(.) stays 0: every later gradient would be
  clipped to nothing. With the default floor 1e-6 C_0 it stays positive and
  grows back (exp(0.1) a step while every example is clipped)."""
  bounds = np.asarray(_zeros_then_norm_one(None))
  assert bounds.min() > 0
  np.testing.assert_allclose(bounds[1499], 1e-6, rtol=1e-5)
  assert bounds[1600] > 1e3 * bounds[1499]
  # Back at the quantile of the norm-1 gradients (all equal: about 1).
  assert bounds[-1] == pytest.approx(1.0, rel=0.2)
  # A floor given explicitly.
  floored = np.asarray(_zeros_then_norm_one(0.01))
  assert floored.min() == pytest.approx(0.01, rel=1e-6)
  assert floored[-1] == pytest.approx(1.0, rel=0.2)


def test_effective_noise_multiplier_is_one_gaussian_mechanism():
  sigma_grad, count = 1.3, 2.0
  z = transforms.adaptive_effective_noise_multiplier(sigma_grad, count)
  assert z == pytest.approx((sigma_grad**-2 + (2 * count)**-2)**-0.5)
  assert transforms.adaptive_clip_noise_multiplier(z, count) == (
      pytest.approx(sigma_grad))
  # Composing the two Gaussian blocks (sensitivities 1 and 1/2) equals one
  # Gaussian at z, for every RDP order.
  orders = [1.5, 2.0, 8.0, 64.0]
  joint = dp_accounting.rdp.RdpAccountant(orders)
  joint.compose(dp_accounting.ComposedDpEvent([
      dp_accounting.GaussianDpEvent(sigma_grad),
      dp_accounting.GaussianDpEvent(2 * count)]))
  single = dp_accounting.rdp.RdpAccountant(orders)
  single.compose(dp_accounting.GaussianDpEvent(z))
  np.testing.assert_allclose(joint._rdp, single._rdp, rtol=1e-9)  # pylint: disable=protected-access


def test_step_event_reads_the_combined_noise_from_the_state():
  sampler = dpjax.PoissonSampler(10_000, 0.0256)
  tx = dpjax.adaptive_dpsgd(0.1, 1.0, 1.1, sampler,
                            key=jax.random.key(4))
  params = jnp.zeros(4)
  step = jax.jit(lambda g, s: tx.update(g, s, params, mask=jnp.ones(8, bool)))
  _, state = step(jnp.ones((8, 4)), tx.init(params))
  event = dpjax.accounting.step_event(state, sampler)
  assert event.noise_multiplier == pytest.approx(1.1, rel=1e-6)
  # The event is the gradient noise combined with the count's, never the
  # (larger) gradient noise alone that the noise state ran.
  noise_state, = [p for p in dpjax.accounting.privacy_states(state)
                  if p.privacy_role == 'privatizer']
  sigma_grad = transforms.adaptive_clip_noise_multiplier(1.1, 256 / 20)
  assert float(noise_state.noise_multiplier) == pytest.approx(sigma_grad,
                                                              rel=1e-6)
  assert event.noise_multiplier < sigma_grad
  # A count released without noise leaves no privacy to record.
  chain = dpjax.transforms.adaptive_clip_per_example(
      1.0, target_quantile=0.5, learning_rate=0.2, count_stddev=0.0,
      expected_batch_size=256, key=jax.random.key(5))
  noisy = dpjax.transforms.add_dpsgd_noise(1.1, key=jax.random.key(5))
  tx = optax_chain(chain, noisy)
  _, state = tx.update(jnp.ones((8, 4)), tx.init(params), params,
                       mask=jnp.ones(8, bool))
  assert dpjax.accounting.step_event(state, sampler).noise_multiplier == 0


def optax_chain(*parts):
  import optax  # pylint: disable=g-import-not-at-top
  return optax.chain(*parts)


def test_the_noise_follows_the_moving_bound(standard_draw):
  # The noise is calibrated to the bound the clipped sum carries: as the
  # adaptive bound grows past its start, so does the noise (no noise fixed
  # below the moving bound).
  params = jnp.zeros(4)
  key = jax.random.key(6)
  clip = transforms.adaptive_clip_per_example(
      1.0, target_quantile=0.99, learning_rate=5.0, count_stddev=10.0,
      expected_batch_size=8, key=jax.random.key(7))
  tx = optax_chain(clip, transforms.add_dpsgd_noise(1.0, key=key))
  mask = jnp.ones(8, bool)
  step = jax.jit(lambda g, s: tx.update(g, s, params, mask=mask))
  grads = jnp.full((8, 4), 100.0)  # norm 200
  state = tx.init(params)
  for _ in range(4):
    bound = float(state[0].l2_norm_clip)  # the bound this step clips to
    out, state = step(grads, state)
    noise = out - dpjax.clipping.clip_and_sum(grads, bound,
                                              mask).grad_sum.value
    np.testing.assert_allclose(noise, bound * standard_draw(state[1], noise),
                               rtol=1e-4, atol=1e-4 * bound)
    assert float(state[1].l2_sensitivity) == pytest.approx(bound, rel=1e-6)
  assert bound > 1.0  # the bound grew past its start
  event = dpjax.accounting.step_event(state, dpjax.PoissonSampler(100, 0.08))
  assert event.noise_multiplier == pytest.approx(
      transforms.adaptive_effective_noise_multiplier(1.0, 10.0), rel=1e-6)


@pytest.mark.parametrize('kwargs, match', [
    (dict(target_quantile=0.0), 'target_quantile'),
    (dict(target_quantile=1.0), 'target_quantile'),
    (dict(target_quantile=-0.2), 'target_quantile'),
    (dict(target_quantile=1.5), 'target_quantile'),
    (dict(learning_rate=-0.1), 'learning_rate'),
    (dict(count_stddev=-1.0), 'count_stddev'),
    (dict(expected_batch_size=0), 'expected_batch_size'),
    (dict(initial_l2_norm_clip=0.0), 'initial_l2_norm_clip'),
    (dict(initial_l2_norm_clip={'a': 1.0, 'b': 1.0}), 'initial_l2_norm_clip'),
    # One leaf in a tree passed the old check and failed in init().
    (dict(initial_l2_norm_clip={'w': 1.0}), 'initial_l2_norm_clip.*scalar'),
    (dict(initial_l2_norm_clip=[1.0]), 'initial_l2_norm_clip.*scalar'),
    (dict(initial_l2_norm_clip='1.0'), 'initial_l2_norm_clip.*scalar'),
    (dict(initial_l2_norm_clip=True), 'initial_l2_norm_clip.*scalar'),
    (dict(initial_l2_norm_clip=np.ones(1)), 'initial_l2_norm_clip.*scalar'),
    (dict(min_l2_norm_clip=0.0), 'min_l2_norm_clip'),
    (dict(min_l2_norm_clip=np.nan), 'min_l2_norm_clip'),
    (dict(min_l2_norm_clip=2.0), 'min_l2_norm_clip'),
    (dict(min_l2_norm_clip=1e-50), 'min_l2_norm_clip.*float32'),
    (dict(initial_l2_norm_clip=1e-50), 'initial_l2_norm_clip.*float32'),
    (dict(min_l2_norm_clip={'w': 1e-3}), 'min_l2_norm_clip.*scalar'),
])
def test_bad_input_is_named(kwargs, match):
  args = dict(initial_l2_norm_clip=1.0, target_quantile=0.5,
              learning_rate=0.2, count_stddev=1.0, expected_batch_size=8,
              key=jax.random.key(0))
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    transforms.adaptive_clip_per_example(**args)


def test_count_noise_that_would_spend_the_budget_is_refused():
  with pytest.raises(ValueError, match='count_stddev'):
    transforms.adaptive_clip_noise_multiplier(1.0, 0.5)
  with pytest.raises(ValueError, match='count_stddev'):
    dpjax.adaptive_dpsgd(0.1, 1.0, 4.0, dpjax.PoissonSampler(20, 1.0), key=jax.random.key(0))
  # The noisy-SGD ablation still needs the bound its noise is scaled to.
  with pytest.raises(ValueError, match='l2_norm_clip'):
    dpjax.dpsgd(0.1, None, 1.0, dpjax.PoissonSampler(8, 1.0), key=jax.random.key(0), clip=False)


@pytest.mark.parametrize('count_stddev', [2.0, 0.0])
def test_adaptive_clipping_with_bandmf_records_the_combined_noise(
    count_stddev):
  """The one event reader combines the count noise whatever the strategy:
  adaptive clipping chained with BandMF is recorded at the combined sigma,
  and a count released without noise leaves an infinite epsilon."""
  sigma, bands = 1.5, 2
  strategy = dpjax.correlated_noise.banded_toeplitz(
      dpjax.correlated_noise.optimize_banded_toeplitz(8, bands), 8)
  sampler = dpjax.sampling.CyclicPoissonSampler(400, 0.25, bands,
                                                max_batch_size=400)
  tx = optax_chain(
      transforms.adaptive_clip_per_example(
          1.0, target_quantile=0.5, learning_rate=0.2,
          count_stddev=count_stddev,
          expected_batch_size=sampler.expected_batch_size,
          key=jax.random.key(8)),
      transforms.add_dpsgd_noise(sigma, key=jax.random.key(9),
                                 strategy=strategy))
  params = jnp.zeros(4)
  batch = sampler.sample(jax.random.key(10), 0)
  _, state = jax.jit(lambda s: tx.update(
      jnp.ones((batch.mask.size, 4)), s, params, mask=batch.mask))(
          tx.init(params))
  event = dpjax.accounting.step_event(state, sampler)
  want = transforms.adaptive_effective_noise_multiplier(sigma, count_stddev)
  assert event == sampler.dp_event(want)  # a Poisson-sampled Gaussian
  noise_multiplier = event.event.noise_multiplier
  assert noise_multiplier == pytest.approx(want, rel=1e-6)
  ledger = dpjax.PrivacyLedger()
  ledger.record_step(state, sampler, batch)
  if count_stddev == 0:
    assert noise_multiplier == 0
    assert ledger.epsilon(1e-5) == float('inf')
  else:
    assert want < sigma and math.isfinite(ledger.epsilon(1e-5))
