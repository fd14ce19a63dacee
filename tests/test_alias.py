"""Ready-made chains: traced hyperparameters, and each mechanism's companions.

Every privatizing transform has a public companion building its DpEvent (and
bits) from the same hyperparameters; these tests check that the event states
the epsilon the docstring claims and that it matches what the transform ran.
"""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

import dpjax
from dpjax import accounting
from dpjax import compression
from dpjax import transforms

KEY = jax.random.key(0)
D = 4000
ALL8 = jnp.ones(8, bool)


def _noise_of_one_step(sigma, clip=1.0, key=KEY, dim=D):
  """dpsgd's update for zero gradients and lr = batch = 1: -noise."""
  tx = dpjax.dpsgd(1.0, clip, sigma, dpjax.PoissonSampler(1, 1.0), key=key)
  params = jnp.zeros(dim)
  out, _ = tx.update(jnp.zeros((2, dim)), tx.init(params), params,
                     mask=jnp.ones(2, bool))
  return -out


def test_inject_hyperparams_dpsgd_matches_the_plain_chain_under_jit():
  params = jnp.zeros(D)
  grads = jax.random.normal(jax.random.key(1), (8, D))
  args = dict(learning_rate=0.1, l2_norm_clip=1.0, noise_multiplier=1.1,
              sampler=dpjax.PoissonSampler(16, 1.0), key=KEY, momentum=0.9)
  injected = optax.inject_hyperparams(dpjax.dpsgd)(**args)
  plain = dpjax.dpsgd(**args)
  s_inj, s_plain = injected.init(params), plain.init(params)
  step_inj, step_plain = jax.jit(injected.update), jax.jit(plain.update)
  for _ in range(3):
    a, s_inj = step_inj(grads, s_inj, params, mask=ALL8)
    b, s_plain = step_plain(grads, s_plain, params, mask=ALL8)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  # A changed hyperparameter in the state takes effect without retracing.
  s_inj.hyperparams['noise_multiplier'] = jnp.zeros_like(
      s_inj.hyperparams['noise_multiplier'])
  quiet, _ = step_inj(jnp.zeros((8, D)), s_inj, params, mask=ALL8)
  assert step_inj._cache_size() == 1
  assert float(jnp.abs(quiet).max()) < 1.0  # momentum only, no fresh noise


def test_vmap_over_noise_multipliers_is_one_compiled_step():
  sigmas = jnp.array([0.5, 1.0, 2.0, 4.0])
  step = jax.jit(jax.vmap(_noise_of_one_step))
  noise = step(sigmas)
  assert step._cache_size() == 1
  std = np.asarray(noise).std(axis=1)
  np.testing.assert_allclose(std / np.asarray(sigmas), 1.0, rtol=0.05)
  # A wrong scale is rejected by the same check.
  assert not np.allclose(std / (1.2 * np.asarray(sigmas)), 1.0, rtol=0.05)
  # Each row is the unvmapped step with that sigma.
  np.testing.assert_allclose(noise[2], _noise_of_one_step(2.0), rtol=1e-6)


def test_traced_clip_norm_scales_the_noise():
  noise = jax.jit(jax.vmap(lambda c: _noise_of_one_step(1.0, c)))(
      jnp.array([0.5, 3.0]))
  np.testing.assert_allclose(np.asarray(noise).std(axis=1), [0.5, 3.0],
                             rtol=0.05)


def test_rs_dpsgd_vmaps_over_sparsity_schedules():
  params = jnp.zeros(100)
  base = transforms.SparsityMaskSchedule.cooling(0.0, 1, 10, params)

  def zeros_after_one_step(num_zeros):
    sched = base._replace(num_zeros=num_zeros)
    tx = dpjax.rs_dpsgd(1.0, 1.0, 1.0, dpjax.PoissonSampler(1, 1.0), sched, key=KEY,
                        mask_key=jax.random.key(1))
    out, _ = tx.update(jnp.ones((2, 100)), tx.init(params), params,
                       mask=jnp.ones(2, bool))
    return jnp.sum(out == 0)

  counts = jax.jit(jax.vmap(zeros_after_one_step))(
      jnp.array([[0], [30], [90]], jnp.int32))
  np.testing.assert_array_equal(counts, [0, 30, 90])


def test_key_step_state_is_shared_by_the_randomized_transforms():
  for tx in (dpjax.add_gaussian_noise(1.0, key=KEY),
             dpjax.add_laplace_noise(1.0, key=KEY),
             dpjax.transforms.quantize_stochastic(
                 compression.low_precision_quantizer(0.25, 8), key=KEY),
             dpjax.transforms.rotate_hadamard(key=KEY),
             dpjax.transforms.laplace_privatizer(1.0, 1.0, key=KEY)):
    state = tx.init(jnp.zeros(4))
    assert isinstance(state, transforms.KeyStepState)
    _, state = tx.update(jnp.zeros(4), state)
    assert int(state.count) == 1


# ----------------------------------------------------------- companions


def _gaussian_delta(eps, sigma):
  """Exact delta(eps) of the Gaussian mechanism, sensitivity 1 (Balle & Wang
  2018, Thm. 8)."""
  return (stats.norm.cdf(-eps * sigma + 1 / (2 * sigma)) -
          math.exp(eps) * stats.norm.cdf(-eps * sigma - 1 / (2 * sigma)))


@pytest.mark.parametrize('stddev, sens', [(2.0, 1.0), (3.0, 0.5)])
def test_gaussian_noise_event_is_the_gaussian_mechanism(stddev, sens):
  event = accounting.gaussian_event(stddev / sens)
  eps = accounting.epsilon(event, 1e-5, accountant='pld')
  assert _gaussian_delta(eps, stddev / sens) == pytest.approx(1e-5, rel=0.02)


def test_dpsgd_noise_matches_the_noise_multiplier_its_event_states():
  """The event of dpsgd(sigma, C) is GaussianDpEvent(sigma) per step on
  sensitivity C: the noise the chain adds has stddev sigma * C."""
  sigma, clip = 1.3, 0.7
  noise = _noise_of_one_step(sigma, clip, dim=40000)
  assert stats.kstest(np.asarray(noise) / (sigma * clip), 'norm').pvalue > 1e-3
  assert stats.kstest(np.asarray(noise) / (1.1 * sigma * clip),
                      'norm').pvalue < 1e-6
  event = accounting.gaussian_event(sigma)
  assert accounting.epsilon(event, 1e-5, 'pld') == pytest.approx(
      accounting.epsilon(accounting.gaussian_event(sigma * clip / clip),
                         1e-5, 'pld'), rel=1e-6)


def test_laplace_companions_state_epsilon():
  assert accounting.basic_composition(
      accounting.laplace_event(2.0 / 4.0)) == (0.5, 0.0)
  assert accounting.basic_composition(
      accounting.laplace_event(0.25, steps=8)) == (2.0, 0.0)
  assert accounting.epsilon(accounting.laplace_event(1.0), 1e-9,
                            'pld') == pytest.approx(1.0, abs=1e-3)


def test_laplace_privatizer_noise_scale_matches_its_event():
  """laplace_privatizer(eps, xi) adds Laplace(2 xi n / eps): L1 sensitivity
  2 xi n over scale gives the eps its event states."""
  eps, xi, n = 2.0, 0.5, 20000
  tx = dpjax.transforms.laplace_privatizer(eps, xi, key=KEY)
  out, _ = tx.update(jnp.zeros(n), tx.init(None))
  scale = 2 * xi * n / eps
  assert stats.kstest(np.asarray(out) / scale, 'laplace').pvalue > 1e-3
  assert stats.kstest(np.asarray(out) / (0.9 * scale), 'laplace').pvalue < 1e-6
  event = accounting.laplace_event(2 * xi * n / scale)
  assert accounting.basic_composition(event) == accounting.basic_composition(
      accounting.laplace_event(eps))


def test_discrete_gaussian_companion_is_rho_zcdp():
  event = accounting.discrete_gaussian_event(4.0, 2.0)
  assert event == dp_accounting.ZCDpEvent(2.0**2 / (2 * 4.0**2))


@pytest.mark.parametrize('calibration', ['certified', 'paper'])
def test_compressive_event_holds_what_the_privatizer_ran(calibration):
  kappa, p, eps, n, steps = 2, 8, 0.5, 16, 5
  key = jax.random.key(3)
  tx = dpjax.transforms.compressive_privatizer(kappa, p, eps, 1.0, key=key,
                                    noise_calibration=calibration)
  state, ran = tx.init(None), []
  for _ in range(steps):
    _, state = tx.update(jnp.ones(n), state)
    ran.append(float(state.epsilon))
  stated = transforms.compressive_privatizer_epsilons(
      kappa, p, eps, key=key, dimension=n, steps=steps,
      noise_calibration=calibration)
  np.testing.assert_allclose(stated, ran, rtol=1e-5)
  event = transforms.compressive_privatizer_event(
      kappa, p, eps, key=key, dimension=n, steps=steps,
      noise_calibration=calibration)
  total, _ = accounting.basic_composition(event)
  assert total == pytest.approx(sum(ran), rel=1e-5)
  if calibration == 'certified':
    assert total == pytest.approx(eps * steps)
  else:  # the paper's calibration does not deliver the requested epsilon
    assert not np.allclose(ran, eps, rtol=1e-3)


def test_bits_companions():
  params = {'w': jnp.zeros((10, 5)), 'b': jnp.zeros(5)}
  assert transforms.dpsgd_bits(55) == 55 * 32
  sched = transforms.SparsityMaskSchedule.cooling(0.5, 2, 3, params)
  bits = transforms.rs_dpsgd_bits(sched, 55)
  assert bits[0] == 55 * 32 and bits[3] < 55 * 32
  assert transforms.compressive_privatizer_bits(20) == 640
  assert transforms.laplace_privatizer_bits(55) == 55 * 32


@pytest.mark.parametrize('kwargs,match', [
    (dict(learning_rate=-0.1), 'learning_rate=-0.1'),
    (dict(learning_rate=math.inf), 'learning_rate=inf'),
    (dict(noise_multiplier=math.inf), 'noise_multiplier=inf'),
])
def test_aliases_reject_negative_or_infinite_hyperparameters(kwargs, match):
  base = dict(learning_rate=0.1, l2_norm_clip=1.0, noise_multiplier=1.0,
              sampler=dpjax.PoissonSampler(8, 1.0))
  key, mask_key = jax.random.split(jax.random.key(0))
  with pytest.raises(ValueError, match=match):
    dpjax.dpsgd(**dict(base, **kwargs), key=key)
  schedule = transforms.SparsityMaskSchedule.cooling(
      0.5, epochs=2, steps_per_epoch=10, like=jnp.zeros(4))
  with pytest.raises(ValueError, match=match):
    dpjax.rs_dpsgd(**dict(base, **kwargs), schedule=schedule, key=key,
                   mask_key=mask_key)


def test_a_learning_rate_schedule_still_passes():
  tx = dpjax.dpsgd(learning_rate=optax.constant_schedule(0.1),
                   l2_norm_clip=1.0, noise_multiplier=1.0,
                   sampler=dpjax.PoissonSampler(8, 1.0), key=jax.random.key(0))
  assert isinstance(tx, optax.GradientTransformation)


def test_a_sweep_gives_each_member_its_own_noise():
  """The documented sweep: ``jax.vmap`` over (noise multiplier, key) pairs.

  Before: with one key shared by the members every member added
  sigma_i C z with the same z, so two members' releases r_1, r_2 gave the
  clipped sum exactly, (sigma_2 r_1 - sigma_1 r_2) / (sigma_2 - sigma_1).
  The privatizer folds sigma into its stream: one key leaves it noisy too,
  as a key per member (``jax.random.split(key, members)``) does.
  """
  grads = 3.0 * jax.random.normal(jax.random.key(1), (8, 16))
  sigmas = jnp.array([0.0, 1.0, 2.0])  # member 0 releases the clipped sum

  def one_step(sigma, key):
    tx = dpjax.dpsgd(1.0, 1.0, sigma, dpjax.PoissonSampler(1, 1.0), key=key)
    params = jnp.zeros(16)
    return tx.update(grads, tx.init(params), params, mask=ALL8)[0]

  sweep = jax.jit(jax.vmap(one_step))

  def recovered(keys):
    r = sweep(sigmas, keys)
    return r[0], (2.0 * r[1] - 1.0 * r[2]) / (2.0 - 1.0)

  for keys in (jnp.stack([KEY] * 3), jax.random.split(KEY, 3)):
    exact, recovered_sum = recovered(keys)
    # Per coordinate 2 (z_1 - z_2) ~ N(0, 8): far from the clipped sum.
    assert float(jnp.max(jnp.abs(recovered_sum - exact))) > 1.0
    assert float(jnp.std(recovered_sum - exact)) > 1.5


def test_dpsgd_on_bf16_params_keeps_its_state_dtypes():
  """The clipped sum of bf16 parameters is float32 (so is the noise); the
  SGD step after the noise works in bf16 and its momentum trace stays bf16
  (strict dtype promotion, as the tests run, refuses mixing them)."""
  params = {'w': jnp.ones((3, 2), jnp.bfloat16)}
  grads = {'w': jnp.ones((4, 3, 2), jnp.bfloat16)}
  tx = dpjax.dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(4, 1.0), key=jax.random.key(0), momentum=0.9)
  state = tx.init(params)
  updates, new_state = tx.update(grads, state, params, mask=jnp.ones(4, bool))
  assert updates['w'].dtype == jnp.bfloat16
  assert optax.apply_updates(params, updates)['w'].dtype == jnp.bfloat16
  assert ([x.dtype for x in jax.tree.leaves(new_state)]
          == [x.dtype for x in jax.tree.leaves(state)])
  noise = transforms.add_dpsgd_noise(1.0, key=jax.random.key(0))
  summed = dpjax.clipping.clip_and_sum(grads, 1.0, jnp.ones(4, bool)).grad_sum
  assert noise.update(summed, noise.init(params))[0]['w'].dtype == jnp.float32


COMPRESSED_GD = ('compgd', 'dp_compgd', 'dp_compsgd', 'dp_projected_gd',
                 'dp_projected_sgd', 'projected_gd')


@pytest.mark.parametrize('name', ('dpsgd',) + COMPRESSED_GD)
def test_ready_made_optimizers_sit_beside_dpsgd(name):
  """dpsgd and the compressed-GD optimizers: one alias module family in
  transforms; the top level keeps only the chains people start from."""
  fn = getattr(transforms, name)
  assert name in transforms.__all__
  assert (name in dpjax.__all__) == (name == 'dpsgd')
  assert fn.__module__.startswith('dpjax.transforms._alias'), fn.__module__


def test_every_optax_step_event_has_the_one_reader():
  """DP-SGD's, BandMF's and the compressed-GD steps' events are read by one
  reader, in accounting: no per-transform reader is left."""
  assert 'step_event' in accounting.__all__
  for name in ('dpsgd_step_event', 'bandmf_step_event',
               'dp_compgd_step_event', 'dp_compsgd_step_event'):
    assert name not in dpjax.__all__ and not hasattr(transforms, name)
    assert not hasattr(dpjax, name)
  assert transforms.CompressedGdState.privacy_role == 'privatizer'


# --- The noise follows the bound the clipped sum carries ----------------------


SIGMA = 1.25  # a float32 value: the state keeps sigma in float32


def _clipped(l2_norm_clip=1.0, key=jax.random.key(3), n=8, d=64):
  """A clipped sum of n per-example gradients of norm ~80, clipped to C."""
  grads = 10.0 * jax.random.normal(key, (n, d))
  return dpjax.clipping.clip_and_sum(grads, l2_norm_clip,
                                     jnp.ones(n, bool)).grad_sum


def _noisy(updates, jit=False, key=jax.random.key(4), mapping=lambda s: s):
  """(release, state) of one add_dpsgd_noise step on ``mapping(updates)``;
  with ``jit`` the map and the noise run in one jitted step, which holds the
  clipped sum as its clipping would have made it (a closed-over value)."""
  tx = transforms.add_dpsgd_noise(SIGMA, key=key)
  step = lambda s: tx.update(mapping(updates), s)
  return (jax.jit(step) if jit else step)(tx.init(None))


def _scale_by_optax(s):
  return optax.scale(100.0).update(s, optax.EmptyState())[0]


SCALINGS = {
    'optax.scale': _scale_by_optax,
    'tree.map': lambda s: jax.tree.map(lambda x: 100 * x, s),
    'tree_scalar_mul': lambda s: optax.tree_utils.tree_scalar_mul(100.0, s),
}


@pytest.mark.filterwarnings('ignore:optax.tree_utils.tree_scalar_mul')
@pytest.mark.parametrize('jit', [False, True])
@pytest.mark.parametrize('scaling', sorted(SCALINGS))
def test_a_scaled_clipped_sum_gets_noise_of_the_scaled_bound(
    scaling, jit, standard_draw):
  """Scaling the sum by 100 after clipping cannot launder its sensitivity:
  the noise is sigma x 100 C times the stream's standard draw."""
  s = _clipped(0.5)
  _, plain_state = _noisy(s, jit)
  scaled, state = _noisy(s, jit, mapping=SCALINGS[scaling])
  assert float(plain_state.l2_sensitivity) == 0.5
  assert float(state.l2_sensitivity) == pytest.approx(50.0, rel=1e-6)
  assert bool(state.linear)
  noise = scaled - 100 * s.value
  np.testing.assert_allclose(noise, SIGMA * 50.0 * standard_draw(state, noise),
                             rtol=1e-4, atol=1e-3)
  # Statistically: stddev sigma x 100 C per coordinate.
  assert float(jnp.std(noise)) == pytest.approx(SIGMA * 50.0, rel=0.3)
  sampler = dpjax.PoissonSampler(1000, 0.01)
  assert accounting.step_event(state, sampler) == sampler.dp_event(SIGMA)


def test_adding_two_clipped_sums_adds_their_bounds(standard_draw):
  """``a + b`` adds the bounds (any two bounds); ``jax.tree.map`` with a
  Python addition does the same for sums of one bound."""
  a, b = _clipped(1.0), _clipped(2.0, key=jax.random.key(5))
  c = _clipped(1.0, key=jax.random.key(6))
  for jit in (False, True):
    out, state = _noisy((a, b), jit, mapping=lambda ab: ab[0] + ab[1])
    assert float(state.l2_sensitivity) == pytest.approx(3.0, rel=1e-6)
    noise = out - (a.value + b.value)
    np.testing.assert_allclose(noise, SIGMA * 3.0 * standard_draw(state, noise),
                               rtol=1e-4, atol=1e-4)
    _, state = _noisy((a, c), jit, mapping=lambda ac: jax.tree.map(
        lambda x, y: x + y, *ac))
    assert float(state.l2_sensitivity) == 2.0


NON_LINEAR = {
    'sign': jnp.sign,
    'tanh': jnp.tanh,
    'plus_one': lambda x: x + 1,
}


@pytest.mark.parametrize('name', sorted(NON_LINEAR))
def test_a_non_linear_map_of_a_clipped_sum_is_refused(name):
  f = NON_LINEAR[name]
  s = jax.tree.map(f, _clipped(1.0))
  with pytest.raises(ValueError, match='updates'):
    _noisy(s)
  # Traced, the step runs but its state cannot be recorded.
  tx = transforms.add_dpsgd_noise(SIGMA, key=jax.random.key(4))
  _, state = jax.jit(lambda u, st: tx.update(jax.tree.map(f, u), st))(
      _clipped(1.0), tx.init(None))
  assert not bool(state.linear)
  with pytest.raises(ValueError, match='non-linear'):
    accounting.step_event(state, dpjax.PoissonSampler(1000, 0.01))
  with pytest.raises(ValueError, match='non-linear'):
    dpjax.PrivacyLedger().record_step(state, dpjax.PoissonSampler(1000, 0.01),
                                      (jax.random.key(9), 0))


# --- The unit of the clipped sum and the sampler's ---------------------------


USERS = np.repeat(np.arange(50), 4)  # 50 users, 4 examples each


def _loss(w, x):
  return jnp.sum(w * x)


def _user_sum(l2_norm_clip=1.0):
  x = jnp.ones((3, 4, 2))  # 3 users, 4 examples each
  return dpjax.clipping.clipped_user_grad_sum(_loss, l2_norm_clip)(
      jnp.zeros(2), x, dpjax.sampling.UserBatch(
          jnp.arange(12).reshape(3, 4), jnp.ones((3, 4), bool),
          jnp.asarray(3))).grad_sum


def _one_step(updates, sampler):
  tx = dpjax.dpsgd(0.1, None, SIGMA, sampler,
                   key=jax.random.key(0), per_example=False)
  params = jnp.zeros(2)
  return tx.update(updates, tx.init(params), params)[1]


def test_a_per_example_sum_is_refused_under_a_user_level_sampler():
  users = dpjax.sampling.UserPoissonSampler(USERS, 0.1,
                                            max_examples_per_user=4)
  examples = dpjax.PoissonSampler(len(USERS), 0.1)
  per_example = _clipped(1.0, d=2)
  assert per_example.unit == 'example'
  with pytest.raises(ValueError, match='clipped per example'):
    accounting.step_event(_one_step(per_example, users), users)
  user_sum = _user_sum()
  assert user_sum.unit == 'user'
  with pytest.raises(ValueError, match='clipped per user'):
    accounting.step_event(_one_step(user_sum, examples), examples)
  assert accounting.step_event(_one_step(user_sum, users), users) == (
      users.dp_event(SIGMA))


# --- One bound, one record per step -------------------------------------------


@pytest.mark.parametrize('make', [
    lambda clip: dpjax.dpsgd(0.1, clip, 1.0, dpjax.PoissonSampler(8, 1.0), key=KEY, per_example=False),
    lambda clip: dpjax.rs_dpsgd(
        0.1, clip, 1.0, dpjax.PoissonSampler(8, 1.0),
        transforms.SparsityMaskSchedule.cooling(0.5, 1, 10, jnp.zeros(4)),
        key=KEY, mask_key=jax.random.key(1), per_example=False),
    lambda clip: dpjax.bandmf(0.1, clip, 1.0, dpjax.PoissonSampler(8, 1.0),
                              dpjax.correlated_noise.identity(4), key=KEY,
                              per_example=False),
])
def test_a_second_bound_beside_the_clipped_sums_is_refused(make):
  """With per_example=False the ClippedSum carries the bound: a second one
  could only disagree with it."""
  with pytest.raises(ValueError, match='l2_norm_clip'):
    make(1.0)
  make(None)  # the bound the sum carries


def test_record_step_records_the_event_and_refuses_a_replayed_state():
  sampler = dpjax.PoissonSampler(100, 0.1)
  tx = dpjax.dpsgd(0.1, 1.0, SIGMA, sampler, key=KEY)
  params = jnp.zeros(3)
  batch = sampler.sample(jax.random.key(1), 0)
  _, state = tx.update(jnp.ones((batch.mask.size, 3)), tx.init(params),
                       params, mask=batch.mask)
  ledger = dpjax.PrivacyLedger()
  ledger.record_step(state, sampler, batch)
  assert ledger.num_events == 1
  assert ledger.runs == [(sampler.dp_event(SIGMA), 1)]
  assert ledger.runs[0][0] == accounting.step_event(state, sampler)
  # The same state again, even with a fresh batch: its noise is spent.
  with pytest.raises(ValueError, match='noise'):
    ledger.record_step(state, sampler, sampler.sample(jax.random.key(1), 1))
  assert ledger.num_events == 1
