"""DP-SGD transforms: purity, noise scale, limits, jit, recompilation, sharding."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

import dpjax

KEY = jax.random.key(42)


def loss(params, example):
  logits = example['x'] @ params['w'] + params['b']
  return -jax.nn.log_softmax(logits)[example['y']]


def setup(batch=16, d=6, classes=3, seed=0):
  kx, ky, kw = jax.random.split(jax.random.key(seed), 3)
  data = {'x': jax.random.normal(kx, (batch, d)),
          'y': jax.random.randint(ky, (batch,), 0, classes)}
  params = {'w': 0.1 * jax.random.normal(kw, (d, classes)),
            'b': jnp.zeros(classes)}
  return params, data


def make_step(tx, jit=True):
  """One DP step of ``tx``, jitted as users run it (op by op: ``jit=False``)."""
  grads_fn = dpjax.per_example_grads(loss)

  def step(params, state, data, mask):
    if mask is None:  # a batch without padding
      mask = jnp.ones(jax.tree.leaves(data)[0].shape[0], bool)
    updates, state = tx.update(grads_fn(params, data), state, params, mask=mask)
    return optax.apply_updates(params, updates), state

  return jax.jit(step) if jit else step


def test_same_state_twice_gives_the_same_update():
  params, data = setup()
  tx = dpjax.dpsgd(0.1, 1.0, 1.1, dpjax.PoissonSampler(16, 1.0), key=KEY)
  state = tx.init(params)
  step = make_step(tx)
  a, _ = step(params, state, data, None)
  b, _ = step(params, state, data, None)
  chex.assert_trees_all_equal(a, b)


def test_successive_steps_draw_fresh_noise():
  tx = dpjax.add_gaussian_noise(1.0, key=KEY)
  zeros = jnp.zeros(8)
  state = tx.init(zeros)
  n1, state = tx.update(zeros, state)
  n2, _ = tx.update(zeros, state)
  assert not np.array_equal(n1, n2)


def test_different_keys_give_different_noise():
  zeros = jnp.zeros(8)
  t1 = dpjax.add_gaussian_noise(1.0, key=jax.random.key(0))
  t2 = dpjax.add_gaussian_noise(1.0, key=jax.random.key(1))
  assert not np.array_equal(t1.update(zeros, t1.init(zeros))[0],
                            t2.update(zeros, t2.init(zeros))[0])


@pytest.mark.parametrize('factory,dist', [
    (dpjax.add_gaussian_noise, 'norm'), (dpjax.add_laplace_noise, 'laplace')])
def test_transform_noise_has_the_stated_scale(factory, dist):
  scale = 1.7
  tx = factory(scale, key=KEY)
  zeros = {'a': jnp.zeros((100, 50)), 'b': jnp.zeros((5000,))}
  noise, _ = jax.jit(tx.update)(zeros, tx.init(zeros))
  x = np.concatenate([np.ravel(v) for v in jax.tree.leaves(noise)])
  assert stats.kstest(x, dist, args=(0, scale)).pvalue > 1e-3
  for wrong in (2 / 3 * scale, 3 / 2 * scale):
    assert stats.kstest(x, dist, args=(0, wrong)).pvalue < 1e-6


def test_dpsgd_noise_stddev_is_sigma_times_the_total_clip_bound():
  clip = {'w': 0.6, 'b': 0.8}  # total bound 1.0
  sigma = 2.0
  params = {'w': jnp.zeros((200, 100)), 'b': jnp.zeros(3000)}
  tx = dpjax.dpsgd(1.0, clip, sigma, sampler=dpjax.PoissonSampler(1, 1.0), key=KEY)
  per_example = jax.tree.map(lambda p: jnp.zeros((1,) + p.shape), params)
  updates, _ = tx.update(per_example, tx.init(params), params,
                         mask=jnp.ones(1, bool))
  x = -np.concatenate([np.ravel(v) for v in jax.tree.leaves(updates)])
  assert stats.kstest(x, 'norm', args=(0, sigma * 1.0)).pvalue > 1e-3
  assert stats.kstest(x, 'norm', args=(0, sigma * 0.8)).pvalue < 1e-6


def test_no_clipping_no_noise_gives_plain_sgd_on_the_mean_gradient():
  params, data = setup()
  tx = dpjax.dpsgd(0.5, 1e9, 0.0, dpjax.PoissonSampler(16, 1.0), key=KEY, momentum=0.9)
  ref = optax.sgd(0.5, momentum=0.9)
  mean_loss = lambda p: jnp.mean(jax.vmap(loss, (None, 0))(p, data))
  s, rs, p, rp = tx.init(params), ref.init(params), params, params
  for _ in range(3):
    p, s = make_step(tx)(p, s, data, None)
    u, rs = ref.update(jax.grad(mean_loss)(rp), rs, rp)
    rp = optax.apply_updates(rp, u)
  chex.assert_trees_all_close(p, rp, rtol=1e-5, atol=1e-7)


def test_normalize_divides_by_expected_not_padded_batch_size():
  params, data = setup(batch=8)
  padded = jax.tree.map(lambda v: jnp.concatenate([v, v]), data)
  mask = jnp.arange(16) < 8
  tx = dpjax.dpsgd(1.0, 1e9, 0.0, sampler=dpjax.PoissonSampler(8, 1.0), key=KEY)
  a, _ = make_step(tx)(params, tx.init(params), data, None)
  b, _ = make_step(tx)(params, tx.init(params), padded, mask)
  chex.assert_trees_all_close(a, b, rtol=1e-6)


@pytest.mark.parametrize('factory', [dpjax.add_gaussian_noise,
                                     dpjax.add_laplace_noise])
@pytest.mark.usefixtures('full_optimization')
def test_noise_is_bit_identical_with_and_without_jit(factory):
  tx = factory(1.3, key=KEY)
  zeros = {'a': jnp.zeros((7, 3)), 'b': jnp.zeros(11)}
  s_e = s_j = tx.init(zeros)
  for _ in range(3):
    n_e, s_e = tx.update(zeros, s_e)
    n_j, s_j = jax.jit(tx.update)(zeros, s_j)
    chex.assert_trees_all_equal(n_e, n_j)


def test_jitted_steps_are_reproducible_and_match_eager():
  params, data = setup()
  tx = dpjax.dpsgd(0.1, 1.0, 1.1, dpjax.PoissonSampler(16, 1.0), key=KEY, momentum=0.9)
  step = make_step(tx, jit=False)
  runs = []
  for fn in (jax.jit(step), jax.jit(step), step):
    p, s = params, tx.init(params)
    for _ in range(3):
      p, s = fn(p, s, data, None)
    runs.append(p)
  chex.assert_trees_all_equal(runs[0], runs[1])  # same key: same bits
  # Eager differs from jit only by XLA's float fusion (last ulps).
  chex.assert_trees_all_close(runs[0], runs[2], rtol=1e-5, atol=1e-8)


def test_jitted_step_compiles_once_across_steps():
  params, data = setup()
  tx = dpjax.dpsgd(0.1, 1.0, 1.1, dpjax.PoissonSampler(16, 1.0), key=KEY)
  traces = []

  def step(params, state, data, mask):
    traces.append(1)
    return make_step(tx)(params, state, data, mask)

  jitted = jax.jit(step)
  state = tx.init(params)
  mask = jnp.ones(16, bool)
  for i in range(5):
    params, state = jitted(params, state, data, mask.at[i].set(False))
  assert len(traces) == 1
  assert int(state[1].stream.count) == 5


def test_clip_state_counts_dropped_nonfinite_examples():
  params, data = setup()
  data['x'] = data['x'].at[3].set(jnp.nan)
  tx = dpjax.dpsgd(0.1, 1.0, 1.1, dpjax.PoissonSampler(16, 1.0), key=KEY)
  new_params, state = make_step(tx)(params, tx.init(params), data, None)
  chex.assert_tree_all_finite(new_params)
  assert int(state[0].num_dropped) == 1


# ----------------------------------------- the clipped sum carries its bound


def _sum_step(sigma=1.0):
  """``dpsgd(per_example=False)``'s update of ``updates`` (state returned)."""
  params, _ = setup()
  tx = dpjax.dpsgd(0.1, None, sigma, dpjax.PoissonSampler(16, 1.0), key=KEY, per_example=False)
  return lambda updates: tx.update(updates, tx.init(params), params)


@pytest.mark.parametrize('jit', [False, True])
def test_dpsgd_on_a_sum_refuses_an_unclipped_sum(jit):
  """Before: a plain jax.grad sum was noised and recorded at sigma."""
  params, data = setup()
  plain = jax.grad(lambda p: jnp.sum(jax.vmap(loss, (None, 0))(p, data)))(
      params)
  step = _sum_step()
  with pytest.raises(ValueError, match='Expected updates to be a ClippedSum'):
    (jax.jit(step) if jit else step)(plain)


def test_dpsgd_on_a_sum_refuses_a_second_bound():
  """The ClippedSum carries the bound; a chain given another could only
  disagree with it (before: a sum clipped at C = 4 was noised for C = 1)."""
  with pytest.raises(ValueError, match='l2_norm_clip=None'):
    dpjax.dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(16, 1.0), key=KEY, per_example=False)
  with pytest.raises(ValueError, match='Expected an l2_norm_clip'):
    dpjax.dpsgd(0.1, None, 1.0, dpjax.PoissonSampler(16, 1.0), key=KEY)


def _bound_and_noise(out, state, summed):
  """(carried bound in the state, released noise) of a noise step."""
  noise_state = dpjax.accounting.privacy_states(state)[0]
  return (float(noise_state.l2_sensitivity),
          jax.tree.map(jnp.subtract, out, summed.value))


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_dpsgd_noise_follows_the_bound_the_sum_carries(method, standard_draw):
  """Before: a sum clipped at C = 4 was noised for C = 1 and recorded. Now
  the noise is sigma x the sum's own bound, traced or not; per-layer bounds
  count by their total."""
  params, data = setup()
  mask = jnp.ones(16, bool)
  summed = lambda c: dpjax.clipped_grad_sum(loss, c, method)(params, data,
                                                             mask).grad_sum
  tx = dpjax.transforms.add_dpsgd_noise(1.1, key=KEY)
  step = jax.jit(lambda s: tx.update(s, tx.init(params)))
  for c in (1.0, 4.0, {'w': 3.0, 'b': 4.0}):
    s = summed(c)
    out, state = step(s)
    bound, noise = _bound_and_noise(out, state, s)
    assert bound == (5.0 if isinstance(c, dict) else c)
    # The stream's standard draw, scaled by sigma x bound.
    z = standard_draw(dpjax.accounting.privacy_states(state)[0], noise)
    chex.assert_trees_all_close(noise, jax.tree.map(
        lambda x: 1.1 * bound * x, z), rtol=1e-5, atol=1e-5 * bound)
    assert float(jnp.std(noise['w'])) > 0.3 * bound


def test_hand_built_chain_noise_follows_the_clip(standard_draw):
  """Before: chain(clip_per_example(10), add_dpsgd_noise(C=1)) ran as
  sigma; now the noise is calibrated to the 10 the clipping bound."""
  params, data = setup()
  grads = dpjax.per_example_grads(loss)(params, data)
  mask = jnp.ones(16, bool)
  for c in (1.0, 10.0):
    tx = optax.chain(dpjax.clip_per_example(c),
                     dpjax.transforms.add_dpsgd_noise(1.0, key=KEY))
    summed = dpjax.clipping.clip_and_sum(grads, c, mask).grad_sum
    out, state = tx.update(grads, tx.init(params), params, mask=mask)
    bound, noise = _bound_and_noise(out, state, summed)
    assert bound == c
    z = standard_draw(dpjax.accounting.privacy_states(state)[0], noise)
    chex.assert_trees_all_close(noise, jax.tree.map(lambda x: c * x, z),
                                rtol=1e-5, atol=1e-5 * c)


@pytest.mark.filterwarnings('ignore:optax.tree_utils.tree_scalar_mul')
def test_scaling_and_adding_clipped_sums_keeps_a_recordable_bound():
  """Scaling by a Python number scales the carried bound (|a| C) and adding
  two sums adds their bounds, eagerly and under jit; the event stays
  sigma's."""
  params, data = setup()
  sampler = dpjax.PoissonSampler(1000, 0.016)
  s = dpjax.clipped_grad_sum(loss, 1.0)(params, data,
                                        jnp.ones(16, bool)).grad_sum
  tx = dpjax.transforms.add_dpsgd_noise(1.1, key=KEY)
  for mapping, bound in [
      (lambda m: jax.tree.map(lambda x: -100 * x, m), 100.0),
      (lambda m: optax.scale(100.).update(m, None)[0], 100.0),
      (lambda m: optax.tree_utils.tree_scalar_mul(100., m), 100.0),
      (lambda m: jax.tree.map(lambda x, y: x + y, m, m), 2.0)]:
    # Under jit the sum is made in the jitted step (here: closed over).
    for run in (lambda f: f(s), lambda f: jax.jit(lambda: f(s))()):
      state = run(lambda m, f=mapping: tx.update(f(m), tx.init(params))[1])
      assert float(state.l2_sensitivity) == bound
      event = dpjax.accounting.step_event(state, sampler)
      assert event == sampler.dp_event(float(np.float32(1.1)))


@pytest.mark.parametrize('mapping', ['data_scale', 'array_add', 'array_scale'])
def test_arithmetic_by_an_array_is_refused(mapping):
  """A scale that is an array may depend on the data (S / ||S|| moves by up
  to 2 whatever C): on a sum clipped to a concrete C the noise refuses a
  bound that is no longer a Python number and no longer C, eagerly at once
  and under jit at recording."""
  params, data = setup()
  sampler = dpjax.PoissonSampler(1000, 0.016)
  s = dpjax.clipped_grad_sum(loss, 1.0)(params, data,
                                        jnp.ones(16, bool)).grad_sum
  tx = dpjax.transforms.add_dpsgd_noise(1.1, key=KEY)
  maps = {
      'data_scale': lambda m: jax.tree.map(
          lambda x: x / optax.tree_utils.tree_norm(m.value), m),
      'array_add': lambda m: jax.tree.map(jnp.add, m, m),
      'array_scale': lambda m: jax.tree.map(lambda x: jnp.float32(3) * x, m)}
  with pytest.raises(ValueError, match='scaled only by Python numbers'):
    tx.update(maps[mapping](s), tx.init(params))
  state = jax.jit(lambda m: tx.update(maps[mapping](m), tx.init(params))[1])(s)
  assert not bool(state.linear)
  with pytest.raises(ValueError, match='scaling and adding by Python'):
    dpjax.accounting.step_event(state, sampler)


def test_a_jit_boundary_keeps_the_bound():
  """A clipped sum returned by one jitted function and noised in another
  keeps its bound (the leaf is an array equal to C)."""
  params, data = setup()
  sampler = dpjax.PoissonSampler(1000, 0.016)
  s = jax.jit(dpjax.clipped_grad_sum(loss, 0.5))(params, data,
                                                 jnp.ones(16, bool)).grad_sum
  tx = dpjax.transforms.add_dpsgd_noise(1.1, key=KEY)
  for run in (lambda f: f(s), lambda f: jax.jit(f)(s)):
    state = run(lambda m: tx.update(m, tx.init(params))[1])
    assert float(state.l2_sensitivity) == 0.5
    dpjax.accounting.step_event(state, sampler)


@pytest.mark.parametrize('fn', [jnp.sign, jnp.tanh, lambda x: x + 1.0])
def test_a_non_linear_map_of_the_sum_is_refused(fn):
  """A map other than scaling and adding leaves no valid bound: the noise
  refuses the sum at once when concrete, and step_event when traced."""
  params, data = setup()
  sampler = dpjax.PoissonSampler(1000, 0.016)
  tx = dpjax.transforms.add_dpsgd_noise(1.1, key=KEY)
  s = dpjax.clipped_grad_sum(loss, 0.5)(params, data,
                                        jnp.ones(16, bool)).grad_sum
  with pytest.raises(ValueError, match='non-linear map'):
    tx.update(jax.tree.map(fn, s), tx.init(params))
  _, state = jax.jit(lambda m: tx.update(jax.tree.map(fn, m),
                                         tx.init(params)))(s)
  assert not bool(state.linear)
  with pytest.raises(ValueError, match='non-linear map'):
    dpjax.accounting.step_event(state, sampler)


def test_a_traced_bound_is_recorded_as_the_sum_carried_it():
  """Traced bounds (a sweep over C) pass the update; the state keeps the
  sum's bound and the event is sigma's whatever the bound."""
  params, data = setup()
  sampler = dpjax.PoissonSampler(1000, 0.016)

  @jax.jit
  def state_after(sum_clip):
    tx = dpjax.dpsgd(0.1, None, 1.1, dpjax.PoissonSampler(16, 1.0), key=KEY, per_example=False)
    summed = dpjax.clipped_grad_sum(loss, sum_clip)(
        params, data, jnp.ones(16, bool)).grad_sum
    return tx.update(summed, tx.init(params), params)[1]

  for c in (0.5, 1.0, 4.0):
    state = state_after(c)
    noise_state = dpjax.accounting.privacy_states(state)[0]
    assert float(noise_state.l2_sensitivity) == c
    event = dpjax.accounting.step_event(state, sampler)
    assert event.noise_multiplier == pytest.approx(1.1, rel=1e-6)


def test_step_event_refuses_a_sum_clipped_per_another_unit():
  """A per-example sum under a user-level sampler (one user with k examples
  moves it by k C) is refused, and a per-user sum under an example one."""
  params, data = setup()
  ids = np.repeat(np.arange(8), 2)
  users = dpjax.sampling.UserPoissonSampler(ids, 0.5, max_examples_per_user=2)
  examples = dpjax.PoissonSampler(1000, 0.016)
  mask = jnp.ones(16, bool)
  per_example = dpjax.clipped_grad_sum(loss, 1.0)(params, data, mask)
  per_user = dpjax.clipping.clipped_user_grad_sum(loss, 1.0)(
      params, jax.tree.map(lambda x: x.reshape((8, 2) + x.shape[1:]), data),
      dpjax.sampling.UserBatch(jnp.arange(16).reshape(8, 2),
                               mask.reshape(8, 2), jnp.asarray(8)))
  assert per_example.grad_sum.unit == 'example'
  assert per_user.grad_sum.unit == 'user'
  tx = dpjax.transforms.add_dpsgd_noise(1.0, key=KEY)
  ex_state = tx.update(per_example.grad_sum, tx.init(params))[1]
  user_state = tx.update(per_user.grad_sum, tx.init(params))[1]
  with pytest.raises(ValueError, match='clipped per example, but the '
                     'sampler accounts per user'):
    dpjax.accounting.step_event(ex_state, users)
  with pytest.raises(ValueError, match='clipped per user, but the sampler '
                     'accounts per example'):
    dpjax.accounting.step_event(user_state, examples)
  dpjax.accounting.step_event(ex_state, examples)
  dpjax.accounting.step_event(user_state, users)


def test_noisy_sgd_ablation_adds_nominal_noise_and_cannot_be_recorded():
  """clip=False sums per-example gradients unclipped with noise sigma x the
  nominal C; the sum's unit is 'unclipped' and no event can be read."""
  params, data = setup()
  grads = dpjax.per_example_grads(loss)(params, data)
  mask = jnp.ones(16, bool)
  summed = dpjax.transforms._clipping.sum_per_example(2.0).update(
      grads, optax.EmptyState(), params, mask=mask)[0]
  assert summed.unit == 'unclipped' and summed.l2_norm_clip == 2.0
  tx = dpjax.dpsgd(1.0, 2.0, 1.0, dpjax.PoissonSampler(1, 1.0), key=KEY, clip=False)
  noisy = dpjax.dpsgd(1.0, 2.0, 1.0, dpjax.PoissonSampler(1, 1.0), key=KEY)  # same key, clipped
  out, state = tx.update(grads, tx.init(params), params, mask=mask)
  noise_state = dpjax.accounting.privacy_states(state)[0]
  assert float(noise_state.l2_sensitivity) == 2.0
  with pytest.raises(ValueError, match='unclipped sum'):
    dpjax.accounting.step_event(state, dpjax.PoissonSampler(100, 0.1))
  clipped = dpjax.clipping.clip_and_sum(grads, 2.0, mask).grad_sum
  out_c, _ = noisy.update(grads, noisy.init(params), params, mask=mask)
  # The same noise (sgd's -lr x ...) on the unclipped and the clipped sum.
  chex.assert_trees_all_close(
      jax.tree.map(lambda o, v: -o - v, out, summed.value),
      jax.tree.map(lambda o, v: -o - v, out_c, clipped.value),
      rtol=1e-4, atol=1e-5)
  # On sums, the sum says whether it was clipped: clip=False is refused, a
  # bare pytree too, and the ablation's unclipped_sum is noised at sigma x C
  # and cannot be recorded.
  plain = jax.tree.map(lambda g: g.sum(0), grads)
  with pytest.raises(ValueError, match='unclipped_sum'):
    dpjax.dpsgd(0.1, None, 1.0, dpjax.PoissonSampler(16, 1.0), key=KEY, per_example=False, clip=False)
  on_sums = dpjax.dpsgd(0.1, None, 1.0, dpjax.PoissonSampler(16, 1.0), key=KEY, per_example=False)
  with pytest.raises(ValueError, match='Expected updates to be a ClippedSum'):
    on_sums.update(plain, on_sums.init(params), params)
  state = on_sums.update(dpjax.clipping.unclipped_sum(plain, 2.0),
                         on_sums.init(params), params)[1]
  assert float(dpjax.accounting.privacy_states(state)[0].l2_sensitivity) == 2.0
  with pytest.raises(ValueError, match='unclipped sum'):
    dpjax.accounting.step_event(state, dpjax.PoissonSampler(100, 0.1))


def test_sharded_batch_gives_the_same_step_as_one_device():
  assert jax.device_count() >= 2
  params, data = setup(batch=16)
  tx = dpjax.dpsgd(0.1, 1.0, 1.1, dpjax.PoissonSampler(16, 1.0), key=KEY)
  step = jax.jit(make_step(tx))
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ('batch',))
  sharded = jax.device_put(
      data, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('batch')))
  one, _ = step(params, tx.init(params), data, None)
  two, _ = step(params, tx.init(params), sharded, None)
  chex.assert_trees_all_close(one, two, rtol=1e-5, atol=1e-7)


def test_key_is_a_required_keyword():
  with pytest.raises(TypeError):
    dpjax.add_gaussian_noise(1.0)  # pylint: disable=missing-kwoa
  with pytest.raises(ValueError, match='key'):
    dpjax.add_gaussian_noise(1.0, key=None)
  with pytest.raises(ValueError, match='key'):
    dpjax.dpsgd(0.1, 1.0, 1.0, dpjax.PoissonSampler(10, 1.0), key=3)


@pytest.mark.parametrize('kwargs,match', [
    (dict(noise_multiplier=-1.0), 'noise_multiplier=-1.0'),
    (dict(l2_norm_clip=0.0), 'l2_norm_clip=0.0'),
    (dict(l2_norm_clip=-2.0), 'l2_norm_clip=-2.0'),
    (dict(momentum=-0.5), 'momentum=-0.5'),
])
def test_dpsgd_validates_hyperparameters(kwargs, match):
  args = dict(learning_rate=0.1, l2_norm_clip=1.0, noise_multiplier=1.0,
              sampler=dpjax.PoissonSampler(10, 1.0), key=KEY)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dpjax.dpsgd(**args)


def test_factories_validate_their_scales():
  with pytest.raises(ValueError, match='stddev=-1'):
    dpjax.add_gaussian_noise(-1, key=KEY)
  with pytest.raises(ValueError, match='scale=-1'):
    dpjax.add_laplace_noise(-1, key=KEY)
  with pytest.raises(ValueError, match='expected_batch_size=-3'):
    dpjax.normalize(-3)
  with pytest.raises(ValueError, match='l2_norm_clip'):
    dpjax.clip_per_example(0.0)


# --- discrete noise, stochastic quantization, Hadamard rotation ---------------


def test_discrete_gaussian_noise_is_pure_stays_on_the_grid_and_has_its_scale():
  eta, sigma = 0.25, 1.5
  tx = dpjax.transforms.add_discrete_gaussian_noise(sigma, key=KEY, eta=eta)
  zeros = {'a': jnp.zeros((100, 100)), 'b': jnp.zeros((10_000,))}
  state = tx.init(zeros)
  n1, s1 = tx.update(zeros, state)
  n1b, _ = tx.update(zeros, state)
  chex.assert_trees_all_equal(n1, n1b)  # same state: same noise
  n2, _ = tx.update(zeros, s1)
  assert not np.array_equal(n1['a'], n2['a'])
  assert int(s1.count) == 1 and isinstance(s1, dpjax.transforms.KeyStepState)
  x = np.concatenate([np.ravel(v) for v in jax.tree.leaves(n1)])
  np.testing.assert_array_equal(x / eta, np.round(x / eta))
  k = np.round(x / eta).astype(int)
  s2 = float(dpjax.noise.discrete_gaussian_sigma_squared(sigma, eta))
  support = np.arange(-60, 61)
  pmf = np.exp(-support**2 / (2 * s2))
  pmf /= pmf.sum()
  observed = np.bincount(np.clip(k + 60, 0, 120), minlength=121)
  keep = pmf * len(k) > 20
  obs = np.append(observed[keep], observed[~keep].sum())
  exp = np.append(pmf[keep], pmf[~keep].sum()) * len(k)
  assert stats.chisquare(obs, exp).pvalue > 1e-3
  wrong = np.exp(-support**2 / (2 * s2 * 1.1**2))
  wrong /= wrong.sum()
  expw = np.append(wrong[keep], wrong[~keep].sum()) * len(k)
  assert stats.chisquare(obs, expw).pvalue < 1e-6


def test_discrete_gaussian_noise_on_integer_codes_and_zero_sigma():
  codes = {'c': jnp.arange(6, dtype=jnp.int32)}
  tx = dpjax.transforms.add_discrete_gaussian_noise(3.0, key=KEY)
  out, _ = tx.update(codes, tx.init(codes))
  assert out['c'].dtype == jnp.int32
  quiet = dpjax.transforms.add_discrete_gaussian_noise(0.0, key=KEY, eta=0.5)
  g = {'w': jnp.linspace(-1, 1, 5)}
  chex.assert_trees_all_equal(quiet.update(g, quiet.init(g))[0], g)
  with pytest.raises(ValueError, match='eta=1'):
    bad = dpjax.transforms.add_discrete_gaussian_noise(1.0, key=KEY, eta=0.5)
    bad.update(codes, bad.init(codes))


def test_quantize_stochastic_is_unbiased_pure_and_reports_bits():
  q = dpjax.compression.low_precision_quantizer(eta=0.125, bits=6)
  tx = dpjax.transforms.quantize_stochastic(q, key=KEY)
  g = {'w': jnp.linspace(-2.0, 2.0, 33), 'b': jnp.array([0.3, 100.0])}
  state = tx.init(g)
  out, s1 = tx.update(g, state)
  chex.assert_trees_all_equal(out, jax.jit(tx.update)(g, state)[0])
  assert int(s1.count) == 1
  assert float(out['b'][1]) == q.high  # clamped
  np.testing.assert_array_equal(out['w'] / q.spacing,
                                np.round(out['w'] / q.spacing))
  assert q.bits_per_coordinate == 6
  # Unbiased inside the range: average over steps.
  update = jax.jit(tx.update)

  def body(carry, _):
    st = carry
    o, st = update(g, st)
    return st, o['w']

  _, outs = jax.lax.scan(body, state, None, length=4000)
  err = np.abs(np.asarray(outs).mean(0) - np.asarray(g['w']))
  assert err.max() < 5 * q.spacing / 2 / np.sqrt(4000)


def test_rotate_then_unrotate_is_the_identity_every_step_with_the_same_key():
  k = jax.random.key(21)
  tx = optax.chain(dpjax.transforms.rotate_hadamard(key=k),
                   dpjax.transforms.unrotate_hadamard(key=k))
  g = {'w': jax.random.normal(KEY, (7, 3)), 'b': jnp.ones(4)}
  state = tx.init(g)
  update = jax.jit(tx.update)
  for _ in range(3):
    out, state = update(g, state, g)
    chex.assert_trees_all_close(out, g, atol=1e-5)
  # The signs change from step to step, and a different key cannot invert.
  rot = dpjax.transforms.rotate_hadamard(key=k)
  y0, s = rot.update(g, rot.init(g))
  y1, _ = rot.update(g, s)
  assert y0.shape == (32,) and not np.allclose(y0, y1)
  other = dpjax.transforms.unrotate_hadamard(key=jax.random.key(22), like=g)
  back, _ = other.update(y0, other.init(g))
  assert not np.allclose(back['w'], g['w'], atol=1e-2)
  with pytest.raises(ValueError, match='target pytree'):
    lone = dpjax.transforms.unrotate_hadamard(key=k)
    lone.update(y0, lone.init(None))


def test_cpsgd_style_chain_rotates_quantizes_adds_noise_and_unrotates():
  k = jax.random.key(5)
  q = dpjax.compression.k_level_quantizer(x_max=1.0, levels=17)
  g = {'w': 0.3 * jax.random.normal(KEY, (10, 10)), 'b': jnp.zeros(6)}
  tx = optax.chain(dpjax.transforms.rotate_hadamard(key=k),
                   dpjax.transforms.quantize_stochastic(q, key=k),
                   dpjax.transforms.add_discrete_gaussian_noise(0.0, key=k,
                                                     eta=q.spacing),
                   dpjax.transforms.unrotate_hadamard(key=k))
  state = tx.init(g)
  step = jax.jit(tx.update)
  outs = []
  for _ in range(200):
    out, state = step(g, state, g)
    outs.append(out['w'])
  mean = np.mean(outs, axis=0)
  # Unbiased end to end (rotation keeps every coordinate inside [-1, 1]).
  assert np.abs(mean - np.asarray(g['w'])).max() < 5 * q.spacing / 2 / 14


def test_new_transforms_compile_once_across_steps():
  g = jnp.zeros(16)
  tx = optax.chain(dpjax.transforms.add_discrete_gaussian_noise(1.0, key=KEY),
                   dpjax.transforms.quantize_stochastic(
                       dpjax.compression.low_precision_quantizer(0.5, 8), key=KEY))
  traces = []

  @jax.jit
  def step(state):
    traces.append(1)
    return tx.update(g, state)[1]

  state = tx.init(g)
  for _ in range(3):
    state = step(state)
  assert len(traces) == 1


def test_new_factories_require_keys_and_validate():
  with pytest.raises(TypeError):
    dpjax.transforms.add_discrete_gaussian_noise(1.0)  # pylint: disable=missing-kwoa
  with pytest.raises(TypeError):
    dpjax.transforms.rotate_hadamard()  # pylint: disable=missing-kwoa
  with pytest.raises(ValueError, match='sigma=-1'):
    dpjax.transforms.add_discrete_gaussian_noise(-1, key=KEY)
  with pytest.raises(ValueError, match='eta=0'):
    dpjax.transforms.add_discrete_gaussian_noise(1.0, key=KEY, eta=0)
  with pytest.raises(ValueError, match='quantizer'):
    dpjax.transforms.quantize_stochastic(0.5, key=KEY)
  with pytest.raises(ValueError, match='key'):
    dpjax.transforms.quantize_stochastic(dpjax.compression.k_level_quantizer(
        1.0, 4),
                                         key=None)
