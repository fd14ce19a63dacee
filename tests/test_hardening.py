"""Inputs and habits that must never silently void a stated guarantee.

Each test names the misuse it guards against: non-finite input, a forgotten
batch axis, padding without its mask, overflowing norms, infinite
hyperparameters, integer gradients and empty batches.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dp_accounting
import dpjax
from dpjax import _clipped_sum
from dpjax import distributed
from dpjax import noise
from dpjax import transforms

KEY = jax.random.key(0)
BATCH_KEY = jax.random.key(7)
NAN_VECTOR = jnp.array([1.0, jnp.nan, -2.0, jnp.inf, 0.5, -jnp.inf])
ZERO_SUBSTITUTE = jnp.array([1.0, 0.0, -2.0, 0.0, 0.5, 0.0])


def _run(tx, updates, params=None):
  return tx.update(updates, tx.init(params), params)[0]


# --------------------------------------------- non-finite input never leaks


@pytest.mark.parametrize('factory', [
    lambda: dpjax.add_gaussian_noise(1.0, key=KEY),
    lambda: dpjax.add_laplace_noise(1.0, key=KEY),
    lambda: dpjax.transforms.laplace_privatizer(1.0, 1.5, key=KEY),
    lambda: dpjax.transforms.compressive_privatizer(2, 5, 1.0, 1.5, key=KEY),
    lambda: dpjax.transforms.compressive_privatizer(2, 5, 1.0, 1.5, key=KEY,
                                         noise_calibration='paper'),
], ids=['gaussian', 'laplace', 'laplace_privatizer', 'compressive',
        'compressive_paper'])
def test_nan_and_inf_are_released_as_their_zero_substitute(factory):
  out = _run(factory(), NAN_VECTOR)
  want = _run(factory(), ZERO_SUBSTITUTE)
  assert bool(jnp.all(jnp.isfinite(out)))
  np.testing.assert_array_equal(out, want)


def test_compressive_mechanism_on_nan_is_not_all_zeros():
  """Before: one NaN made every release all zeros (a distinguishing event)."""
  v = jnp.zeros(30).at[3].set(jnp.nan).at[7].set(5.0)
  out = dpjax.transforms.compressive_mechanism(
      KEY, v, kappa=2, num_measurements=8, epsilon=1.0, linf_clip=1.0)
  want = dpjax.transforms.compressive_mechanism(
      KEY, v.at[3].set(0.0), kappa=2, num_measurements=8, epsilon=1.0,
      linf_clip=1.0)
  np.testing.assert_array_equal(out.value, want.value)


def test_nonfinite_example_counts_like_a_masked_row():
  params = {'w': jnp.zeros(3)}
  grads = {'w': jnp.array([[1.0, 2.0, 2.0], [jnp.nan, 0.0, 0.0],
                           [0.5, 0.5, jnp.inf]])}
  tx = dpjax.clip_per_example(1.0)
  out, state = tx.update(grads, tx.init(params), params,
                         mask=jnp.ones(3, bool))
  masked, _ = tx.update({'w': grads['w'].at[1:].set(0.0)}, tx.init(params),
                        params, mask=jnp.array([True, False, False]))
  np.testing.assert_array_equal(out.value['w'], masked.value['w'])
  assert int(state.num_dropped) == 2


@pytest.mark.parametrize('rotate', [False, True])
def test_cpsgd_client_with_nan_sends_what_a_zero_vector_sends(rotate):
  d = 6
  cfg = distributed.CpsgdConfig(
      l2_norm_clip=1.0, levels=8, trials=16,
      linf_clip=(distributed.rotated_linf_clip(1.0, d, 2, 1e-5) if rotate
                 else None), rotate=rotate)
  xs = jnp.stack([NAN_VECTOR, jnp.ones(d) / 4])
  zs = jnp.stack([jnp.zeros(d), jnp.ones(d) / 4])
  np.testing.assert_array_equal(distributed.distributed_mean(cfg, KEY, xs),
                                distributed.distributed_mean(cfg, KEY, zs))


def test_gaussian_protocol_client_with_nan_sends_what_a_zero_vector_sends():
  xs = jnp.stack([NAN_VECTOR, jnp.ones(6) / 4])
  zs = jnp.stack([jnp.zeros(6), jnp.ones(6) / 4])
  a = distributed.gaussian_distributed_mean(KEY, xs, 1.0, 0.5)
  b = distributed.gaussian_distributed_mean(KEY, zs, 1.0, 0.5)
  np.testing.assert_array_equal(a, b)


# ------------------------------------------------------ shapes and masks


def test_forgotten_batch_axis_raises_naming_the_leaf():
  params = {'w': jnp.zeros((4, 3)), 'b': jnp.zeros(3)}
  tx = dpjax.dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(8, 1.0), key=KEY)
  param_shaped = jax.tree.map(jnp.ones_like, params)  # no batch axis
  with pytest.raises(ValueError, match=r"\['b'\].*Missing batch axis"):
    tx.update(param_shaped, tx.init(params), params, mask=jnp.ones(4, bool))


def test_aggregator_requires_params_to_check_shapes():
  tx = dpjax.clip_per_example(1.0)
  with pytest.raises(ValueError, match='params'):
    tx.update(jnp.ones((2, 3)), tx.init(None), mask=jnp.ones(2, bool))


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_padding_cannot_reach_an_aggregator_without_its_mask(method):
  loss = lambda w, x: jnp.sum(jnp.tanh(x @ w))
  w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
  fn = dpjax.clipped_grad_sum(loss, 1.0, method)
  with pytest.raises(TypeError):
    fn(w, x)  # pylint: disable=no-value-for-parameter
  with pytest.raises(ValueError, match='mask='):
    fn(w, x, None)
  with pytest.raises(ValueError, match='boolean mask'):
    fn(w, x, jnp.full(4, 0.5))
  with pytest.raises(ValueError, match=r'shape \(4,\)'):
    fn(w, x, jnp.ones(3, bool))


def test_poisson_padding_without_mask_is_refused_by_the_chain():
  """Before: example 0 was counted once per padded slot."""
  sampler = dpjax.PoissonSampler(100, 0.08)
  batch = sampler.sample(KEY, 0)
  params = jnp.zeros(2)
  grads = jnp.ones((sampler.max_batch_size, 2))
  tx = dpjax.dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(8, 1.0), key=KEY)
  with pytest.raises(ValueError, match='mask='):
    tx.update(grads, tx.init(params), params)
  out, _ = tx.update(grads, tx.init(params), params, mask=batch.mask)
  assert bool(jnp.all(jnp.isfinite(out)))


# ------------------------------------------------------- smaller findings


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_empty_batch_gives_a_zero_sum(method):
  loss = lambda w, x: jnp.sum(jnp.tanh(x @ w))
  w = jnp.ones((3, 2))
  out = dpjax.clipped_grad_sum(loss, 1.0, method)(w, jnp.ones((0, 3)),
                                                   jnp.ones(0, bool))
  np.testing.assert_array_equal(out.grad_sum.value, jnp.zeros((3, 2)))


def test_huge_finite_gradient_is_clipped_not_dropped():
  params = jnp.zeros(2)
  grads = jnp.array([[3e30, 4e30], [0.3, 0.4]], jnp.float32)
  out, state = dpjax.clip_per_example(1.0).update(
      grads, dpjax.clip_per_example(1.0).init(params), params,
      mask=jnp.ones(2, bool))
  np.testing.assert_allclose(out.value, [0.6 + 0.3, 0.8 + 0.4], rtol=1e-5)
  assert int(state.num_dropped) == 0


def test_huge_finite_gradient_is_clipped_not_dropped_by_ghost_clipping():
  """Before: ghost clipping's factored norm ||a||^2 ||g||^2 overflowed."""
  loss = lambda w, x: jnp.sum(x @ w)  # per-example gradient x^T: norm ||x||
  x = jnp.array([[3e30, 4e30], [0.3, 0.4]], jnp.float32)
  out = dpjax.clipped_grad_sum(loss, 1.0, 'ghost')(
      jnp.zeros((2, 1)), x, jnp.ones(2, bool))
  np.testing.assert_allclose(out.grad_sum.value[:, 0], [0.6 + 0.3, 0.8 + 0.4],
                             rtol=1e-5)
  np.testing.assert_allclose(out.norms, [5e30, 0.5], rtol=1e-6)
  assert int(dpjax.clipping.count_nonfinite(out.norms)) == 0


def test_integer_gradients_are_refused():
  params = jnp.zeros(2, jnp.int32)
  tx = dpjax.clip_per_example(1.0)
  with pytest.raises(ValueError, match='floating'):
    tx.update(jnp.ones((2, 2), jnp.int32), tx.init(params), params,
              mask=jnp.ones(2, bool))


@pytest.mark.parametrize('call, match', [
    (lambda: dpjax.clip_per_example(float('inf')), 'l2_norm_clip=inf'),
    (lambda: dpjax.dpsgd(0.1, 1.0, float('inf'), dpjax.PoissonSampler(8, 1.0), key=KEY),
     'noise_multiplier=inf'),
    (lambda: dpjax.add_gaussian_noise(float('nan'), key=KEY), 'stddev=nan'),
    (lambda: dpjax.add_laplace_noise(float('inf'), key=KEY), 'scale=inf'),
])
def test_infinite_hyperparameters_are_refused(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_the_noisy_sgd_ablation_sums_without_clipping():
  params = jnp.zeros(2)
  sched = transforms.SparsityMaskSchedule.cooling(0.0, 1, 1, params)
  tx = dpjax.rs_dpsgd(1.0, 1.0, 0.0, dpjax.PoissonSampler(1, 1.0), sched, key=KEY,
                      mask_key=jax.random.key(1),
                      clip=False)
  out, _ = tx.update(jnp.array([[3.0, 4.0], [1.0, 1.0]]), tx.init(params),
                     params, mask=jnp.array([True, False]))
  np.testing.assert_allclose(out, [-3.0, -4.0])


# ------------------------------------------------------- noise is not replayed


def test_ledger_refuses_to_spend_the_same_noise_twice():
  """Before: a second tx.init replayed step 0's noise without an error."""
  tx = dpjax.add_gaussian_noise(1.0, key=KEY)
  ledger = dpjax.PrivacyLedger()
  event = dpjax.accounting.gaussian_event(1.0)
  state = tx.init(None)
  for _ in range(3):
    ledger.record(event, noise=(state.key, state.count))
    _, state = tx.update(jnp.zeros(2), state)
  again = tx.init(None)  # phased training restarted from parameters only
  with pytest.raises(ValueError, match='already spent'):
    ledger.record(event, noise=(again.key, again.count))
  other = dpjax.add_gaussian_noise(1.0, key=KEY)  # a second transform, same key
  with pytest.raises(ValueError, match='already spent'):
    ledger.record(event, 2, noise=(other.init(None).key, 1))
  ledger.record(event, noise=(state.key, state.count))  # the stream goes on
  restored = dpjax.PrivacyLedger.from_json(ledger.to_json())
  assert restored == ledger and restored.noise_spent == ledger.noise_spent
  assert list(ledger.noise_spent.values()) == [[(0, 4)]]
  with pytest.raises(ValueError, match='already spent'):
    restored.record(event, noise=(state.key, 3))


# ------------------------------------------------- the ledger records what ran


def _run_dpsgd(tx, sampler, steps, d=3):
  """``steps`` DP-SGD steps on Poisson batches (step t draws batch t of
  ``BATCH_KEY``); the state after each."""
  params = jnp.zeros(d)
  grads = jnp.ones((sampler.max_batch_size, d))

  @jax.jit
  def step(state, t):
    mask = sampler.sample(BATCH_KEY, t).mask
    return tx.update(grads, state, params, mask=mask)[1]

  state, states = tx.init(params), []
  for t in range(steps):
    state = step(state, t)
    states.append(state)
  return states


def test_ledger_records_the_sigma_that_ran():
  """Before: running sigma=0.5 and recording sampler.dp_event(1.5) for 100
  steps gave eps 0.35 for a run whose eps is 5.92, with no error. Now the
  ledger reads sigma from the state that ran: no other can be claimed."""
  sampler = dpjax.PoissonSampler(2000, 0.005)
  tx = dpjax.dpsgd(0.1, 1.0, 0.5, sampler, key=KEY)
  states = _run_dpsgd(tx, sampler, 100)
  assert dpjax.accounting.step_event(states[0], sampler) == sampler.dp_event(
      0.5)
  ledger = dpjax.PrivacyLedger()
  for t, s in enumerate(states):
    ledger.record_step(s, sampler, (BATCH_KEY, t))
  def eps(sigma):  # 100 steps of the sampler's (truncated Poisson) event
    return dpjax.accounting.epsilon(dp_accounting.SelfComposedDpEvent(
        sampler.dp_event(sigma), 100), 1e-5)

  ran, claimed = eps(0.5), eps(1.5)
  assert ledger.epsilon(1e-5) == pytest.approx(ran, rel=1e-6)
  assert ran > 5 > 0.5 > claimed
  with pytest.raises(ValueError, match='already spent'):  # a step twice
    ledger.record_step(states[3], sampler, (BATCH_KEY, 100))


def test_ledger_follows_a_traced_sigma_changed_mid_run():
  sampler = dpjax.PoissonSampler(1000, 0.01)
  tx = optax.inject_hyperparams(dpjax.dpsgd, static_args=('key',))(
      learning_rate=0.1, l2_norm_clip=1.0, noise_multiplier=2.0,
      sampler=sampler, key=KEY)
  params = jnp.zeros(2)
  state = tx.init(params)
  sigmas = []
  for t, sigma in enumerate([2.0, 2.0, 0.7]):
    state.hyperparams['noise_multiplier'] = jnp.float32(sigma)
    _, state = jax.jit(tx.update)(jnp.ones((4, 2)), state, params,
                                  mask=jnp.ones(4, bool))
    event = dpjax.accounting.step_event(state, sampler)
    noise_state = dpjax.accounting.privacy_states(state)[0]
    assert int(noise_state.stream.count) == t + 1
    sigmas.append(event.noise_multiplier)
  np.testing.assert_allclose(sigmas, [2.0, 2.0, 0.7], rtol=1e-6)


def test_dpsgd_noise_releases_non_finite_sums_as_their_zero_substitute():
  tx = dpjax.transforms.add_dpsgd_noise(1.1, key=KEY)
  # A sum overflowing after clipping (internal constructor: no row gives it).
  bad = _clipped_sum.make(jnp.array([jnp.nan, jnp.inf, 2.0, -jnp.inf]), 1.0)
  good = _clipped_sum.make(jnp.array([0.0, 0.0, 2.0, 0.0]), 1.0)
  out_bad, _ = tx.update(bad, tx.init(None))
  out_good, _ = tx.update(good, tx.init(None))
  np.testing.assert_array_equal(out_bad, out_good)


def test_normalize_divisor_must_match_the_sampler():
  """Before: dividing by a batch size other than the sampler's q N (e.g. the
  padded size) was never checked. The chains read the divisor from the
  sampler; a chain built by hand with its own ``normalize`` can still
  disagree with it, and the reader refuses that."""
  sampler = dpjax.PoissonSampler(1000, 0.032)
  tx = optax.chain(dpjax.clip_per_example(1.0),
                   dpjax.transforms.add_dpsgd_noise(1.0, key=KEY),
                   dpjax.normalize(sampler.max_batch_size), optax.sgd(0.1))
  state, = _run_dpsgd(tx, sampler, 1)
  with pytest.raises(ValueError, match='expected batch size is 32'):
    dpjax.accounting.step_event(state, sampler)
  good = dpjax.dpsgd(0.1, 1.0, 1.0, sampler, key=KEY)
  event = dpjax.accounting.step_event(_run_dpsgd(good, sampler, 1)[0],
                                      sampler)
  assert event == sampler.dp_event(1.0)


@pytest.mark.parametrize('not_a_sampler', [
    32, 32.0, jnp.float32(32), dpjax.PoissonSampler, None])
def test_chains_refuse_a_number_in_the_samplers_place(not_a_sampler):
  """The divisor lives in the sampler the batches come from; a second
  number could only disagree with it."""
  sched = dpjax.transforms.SparsityMaskSchedule.cooling(0.5, 1, 10,
                                                        jnp.zeros(3))
  strategy = dpjax.correlated_noise.banded_toeplitz([1.0, 0.5], 4)
  for make in (
      lambda s: dpjax.dpsgd(0.1, 1.0, 1.0, s, key=KEY),
      lambda s: dpjax.rs_dpsgd(0.1, 1.0, 1.0, s, sched, key=KEY,
                               mask_key=jax.random.key(1)),
      lambda s: dpjax.bandmf(0.1, 1.0, 1.0, s, strategy, key=KEY),
      lambda s: dpjax.adaptive_dpsgd(0.1, 1.0, 1.0, s, key=KEY),
      lambda s: dpjax.transforms.dp_compsgd(0.1, 2, 1.0, 1.0, 1.0, s,
                                            key=KEY),
      lambda s: dpjax.transforms.dp_projected_sgd(0.1, 1.0, 1.0, 1.0, s,
                                                  key=KEY)):
    with pytest.raises(ValueError, match='pass the sampler'):
      make(not_a_sampler)


def test_step_event_refuses_unclipped_unstepped_and_batched_states():
  sampler = dpjax.PoissonSampler(100, 0.1)
  sched = dpjax.transforms.SparsityMaskSchedule.cooling(0.5, 1, 10,
                                                        jnp.zeros(3))
  noisy = dpjax.rs_dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(10, 1.0), sched, key=KEY,
                         mask_key=jax.random.key(1), clip=False)
  with pytest.raises(ValueError, match='unclipped'):
    dpjax.accounting.step_event(_run_dpsgd(noisy, sampler, 1)[0], sampler)
  tx = dpjax.dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(10, 1.0), key=KEY)
  with pytest.raises(ValueError, match='before any step'):
    dpjax.accounting.step_event(tx.init(jnp.zeros(3)), sampler)
  state = _run_dpsgd(tx, sampler, 1)[0]
  seeds = jax.tree.map(lambda x: jnp.stack([x, x]), state)
  with pytest.raises(ValueError, match='index the run'):
    dpjax.accounting.step_event(seeds, sampler)
  with pytest.raises(ValueError, match='found 0'):
    dpjax.accounting.step_event(optax.EmptyState(), sampler)


# ---------------------------------------------- Laplace without float leaks


def test_exact_laplace_privatizer_releases_grid_values_from_an_integer_sum():
  eps, xi, n = 1.0, 0.5, 20000
  tx = dpjax.transforms.laplace_privatizer(eps, xi, key=KEY)
  v = jax.random.uniform(jax.random.key(9), (n,), minval=-1.0, maxval=1.0)
  out = np.asarray(tx.update(v, tx.init(None))[0], np.float64)
  eta = xi / 2**4  # k = min(10, floor(19 - log2(n / eps))) = 4
  codes = out / eta
  np.testing.assert_array_equal(codes, np.round(codes))  # on eta Z exactly
  clipped = np.round(np.clip(np.asarray(v), -xi, xi) / eta) * eta
  noise = (out - clipped) / (2 * xi * n / eps)
  from scipy import stats  # pylint: disable=import-outside-toplevel
  assert stats.kstest(noise, 'laplace').pvalue > 1e-3
  assert stats.kstest(noise / 1.15, 'laplace').pvalue < 1e-6


def test_exact_laplace_needs_concrete_hyperparameters():
  with pytest.raises(ValueError, match='exact=False'):
    jax.jit(lambda e: dpjax.transforms.laplace_privatizer(e, 1.0, key=KEY).init(
        None))(1.0)
  tx = jax.jit(lambda e: dpjax.transforms.laplace_privatizer(
      e, 1.0, key=KEY, exact=False).update(
          jnp.ones(3),
          dpjax.transforms.laplace_privatizer(1.0, 1.0, key=KEY, exact=False).
          init(None))[0])
  assert tx(2.0).shape == (3,)


def test_add_laplace_noise_releases_grid_values_of_the_stated_scale():
  """Before: x + float Laplace, whose low-order bits leak x (Mironov 2012)."""
  scale, n = 1.7, 20000
  eta = transforms.laplace_grid_spacing(scale)
  assert eta == 2.0**-10
  v = jax.random.uniform(jax.random.key(9), (n,), minval=-5.0, maxval=5.0)
  tx = dpjax.add_laplace_noise(scale, key=KEY)
  out = np.asarray(jax.jit(tx.update)(v, tx.init(None))[0], np.float64)
  codes = out / eta
  np.testing.assert_array_equal(codes, np.round(codes))  # on eta Z exactly
  from scipy import stats  # pylint: disable=import-outside-toplevel
  err = (out - np.asarray(v, np.float64)) / scale  # off-grid inputs too
  assert stats.kstest(err, 'laplace').pvalue > 1e-3
  assert stats.kstest(err / 1.15, 'laplace').pvalue < 1e-6
  # A coarser grid given explicitly is used as given.
  tx = dpjax.add_laplace_noise(scale, key=KEY, eta=0.25)
  coarse = np.asarray(tx.update(v, tx.init(None))[0], np.float64) / 0.25
  np.testing.assert_array_equal(coarse, np.round(coarse))


def _release_log_pmf(x, scale, eta, support):
  """log P[eta (R(x / eta) + Z) = eta k] + const for k in ``support``: R
  randomized rounding, Z the discrete Laplace that add_laplace_noise samples
  (the constant, its normalization, is the same for every x)."""
  b = float(noise.discrete_laplace_scale(
      transforms.laplace_grid_scale(scale, eta)))
  u = x / eta
  j, f = np.floor(u), u - np.floor(u)
  with np.errstate(divide='ignore'):
    return np.logaddexp(np.log1p(-f) - np.abs(support - j) / b,
                        np.log(f) - np.abs(support - j - 1) / b)


@pytest.mark.parametrize('eta', [None, 2.0**-4, 1.0])
def test_randomized_rounding_keeps_the_laplace_epsilon_exact(eta):
  """The log-likelihood ratio of two inputs x, x' never exceeds
  |x - x'| / scale, on or off the grid, for the grids the exact Laplace
  uses; rounding to the nearest grid point instead would break it."""
  scale = 1.0
  eta = transforms.laplace_grid_spacing(scale) if eta is None else eta
  support = np.arange(-60000, 60001)
  worst = 0.0
  for x, x2 in [(0.0, eta / 3), (0.49 * eta, 0.51 * eta), (0.1, 0.1 + eta),
                (-0.3 * eta, 0.7 * eta), (2.0, 3.5)]:
    ratio = np.abs(_release_log_pmf(x, scale, eta, support)
                   - _release_log_pmf(x2, scale, eta, support))
    assert np.all(np.isfinite(ratio))
    worst = max(worst, float(np.max(ratio)) / (abs(x - x2) / scale))
  assert worst <= 1 + 1e-9
  # Nearest rounding: x = 0.49 eta and 0.51 eta land one grid step apart.
  b = float(noise.discrete_laplace_scale(
      transforms.laplace_grid_scale(scale, eta)))
  assert (1 / b) / (0.02 * eta / scale) > 10


def test_float_laplace_remains_an_explicit_option():
  v = jnp.linspace(-1.0, 1.0, 64)
  tx = dpjax.add_laplace_noise(0.5, key=KEY, exact=False)
  out = tx.update(v, tx.init(None))[0]
  step0 = jax.random.fold_in(tx.init(None).key, 0)  # the transform's stream
  want = v + noise.laplace(jax.random.split(step0, 1)[0], v.shape, scale=0.5)
  np.testing.assert_array_equal(out, want)
  # Traced scales need the float path; the exact one says so.
  fn = lambda s, e: dpjax.add_laplace_noise(s, key=KEY, exact=e).update(  # noqa: E731
      v, transforms.KeyStepState.create(KEY, stream='laplace_noise'))[0]
  assert jax.jit(lambda s: fn(s, False))(0.5).shape == v.shape
  with pytest.raises(ValueError, match='exact=False'):
    jax.jit(lambda s: fn(s, True))(0.5)


@pytest.mark.parametrize('kwargs, match', [
    (dict(eta=0.3), 'eta=0.3'), (dict(eta=2.0**-30), 'scale / eta'),
    (dict(eta=2.0**-4, exact=False), 'eta=0.0625'),
])
def test_laplace_grid_is_validated(kwargs, match):
  with pytest.raises(ValueError, match=match):
    dpjax.add_laplace_noise(1.0, key=KEY, **kwargs)


def test_randomized_rounding_is_unbiased_with_exact_probabilities():
  """P[round up] is the fractional part itself, also far below 2^-24."""
  n = 400000
  for x, p in [(-2.3, 0.7), (5.0 + 2.0**-3, 2.0**-3), (0.9999, 0.9999)]:
    r = np.asarray(noise.randomized_round(jax.random.key(5), jnp.full(n, x)))
    lo = np.floor(np.float32(x))
    assert set(np.unique(r)) <= {lo, lo + 1}
    hits = int(np.sum(r == lo + 1))
    assert abs(hits - n * p) < 5 * np.sqrt(n * p * (1 - p))
  # f = 2^-30: 2^22 draws give 2^-8 expected hits; with key 0, none.
  tiny = noise.randomized_round(jax.random.key(0),
                                jnp.full(2**22, 2.0**-30, jnp.float32))
  assert int(jnp.sum(tiny)) <= 2


def test_rs_dpsgd_refuses_one_key_for_noise_and_masks():
  sched = transforms.SparsityMaskSchedule.cooling(0.5, 1, 1, jnp.zeros(4))
  with pytest.raises(ValueError, match='different'):
    dpjax.rs_dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(4, 1.0), sched, key=KEY, mask_key=KEY)
