"""User-level clipping and sampling: one user moves the sum by at most C."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

import dpjax

C = 0.7


class _Mlp(nn.Module):

  @nn.compact
  def __call__(self, x):
    return nn.Dense(3)(jnp.tanh(nn.Dense(8)(x)))


_MODEL = _Mlp()
_PARAMS = _MODEL.init(jax.random.key(0), jnp.zeros(6))


def _loss(params, example):
  x, y = example
  return optax.softmax_cross_entropy_with_integer_labels(
      _MODEL.apply(params, x), y)


_FNS = {m: jax.jit(dpjax.clipping.clipped_user_grad_sum(_loss, C, m))
        for m in ('vmap', 'ghost')}


def _flat(tree):
  return jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(tree)])


def _user_batch(mask):
  """A ``UserBatch`` for data already grouped by user (slot u, k holds
  example u K + k), padded as the sampler pads: index 0 where masked."""
  indices = jnp.arange(mask.size, dtype=jnp.int32).reshape(mask.shape)
  return dpjax.sampling.UserBatch(jnp.where(mask, indices, 0), mask,
                                  jnp.sum(jnp.any(mask, axis=1)))


def _users(key, users=6, per_user=5, scale=1.0):
  kx, ky, km = jax.random.split(key, 3)
  x = scale * jax.random.normal(kx, (users, per_user, 6))
  y = jax.random.randint(ky, (users, per_user), 0, 3)
  mask = jax.random.bernoulli(km, 0.7, (users, per_user)).at[:, 0].set(True)
  return (x, y), mask


def test_vmap_and_ghost_agree_and_clip_each_user_as_one():
  batch, mask = _users(jax.random.key(1))
  mask = mask.at[-1].set(False)  # a padded user
  a, b = (_FNS[m](_PARAMS, batch, _user_batch(mask))
          for m in ('vmap', 'ghost'))
  np.testing.assert_allclose(a.norms, b.norms, rtol=1e-5)
  np.testing.assert_allclose(_flat(a.grad_sum.value), _flat(b.grad_sum.value),
                             atol=1e-5)
  assert float(a.norms[-1]) == 0.0
  # The user's norm is that of the gradient of its summed loss.
  x, y = batch
  keep = mask[0]
  user_grad = jax.grad(lambda p: jnp.sum(jnp.where(
      keep, jax.vmap(_loss, (None, 0))(p, (x[0], y[0])), 0.0)))(_PARAMS)
  np.testing.assert_allclose(a.norms[0], jnp.linalg.norm(_flat(user_grad)),
                             rtol=1e-5)
  assert a.grad_sum.l2_norm_clip == C


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_replacing_one_user_moves_the_sum_by_at_most_2c(method):
  """Adversarial neighbours: the replaced user has any number of examples,
  huge inputs, or a NaN; add/remove moves the sum by <= C, replace <= 2 C."""
  fn = _FNS[method]
  batch, mask = _users(jax.random.key(2))
  base = _flat(fn(_PARAMS, batch, _user_batch(mask)).grad_sum.value)
  x, y = batch
  worst = 0.0
  for trial in range(6):
    kx = jax.random.key(100 + trial)
    scale = [1e-3, 1.0, 1e3, 1e20, 1.0, 1.0][trial]
    new_x = x.at[2].set(scale * jax.random.normal(kx, x[2].shape))
    if trial == 4:
      new_x = new_x.at[2, 1].set(jnp.nan)
    new_mask = mask.at[2].set(jnp.arange(5) < trial % 5 + 1)
    moved = _flat(fn(_PARAMS, (new_x, y),
                     _user_batch(new_mask)).grad_sum.value)
    worst = max(worst, float(jnp.linalg.norm(moved - base)))
  removed = _flat(fn(_PARAMS, batch,
                     _user_batch(mask.at[2].set(False))).grad_sum.value)
  assert float(jnp.linalg.norm(removed - base)) <= C * (1 + 1e-5)
  assert worst <= 2 * C * (1 + 1e-5)


def test_example_level_clipping_fails_the_user_bound():
  """The twin: clipping examples instead of users lets one user with k
  examples move the sum by about k C, so the test above can fail."""
  batch, mask = _users(jax.random.key(3), scale=100.0)
  mask = jnp.ones_like(mask)
  flat_batch = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), batch)
  fn = jax.jit(dpjax.clipping.clipped_grad_sum(_loss, C))
  full = _flat(fn(_PARAMS, flat_batch, mask.reshape(-1)).grad_sum.value)
  without = _flat(fn(_PARAMS, flat_batch,
                     mask.at[2].set(False).reshape(-1)).grad_sum.value)
  assert float(jnp.linalg.norm(full - without)) > 2 * C


def test_bad_masks_and_batches_are_refused():
  batch, mask = _users(jax.random.key(4))
  fn = dpjax.clipping.clipped_user_grad_sum(_loss, C)
  with pytest.raises(ValueError, match='UserBatch'):
    fn(_PARAMS, batch, None)
  users = _user_batch(mask)
  with pytest.raises(ValueError, match='boolean mask'):
    fn(_PARAMS, batch, users._replace(mask=mask.reshape(-1)))
  with pytest.raises(ValueError, match='boolean mask'):
    fn(_PARAMS, batch, users._replace(mask=mask.astype(jnp.int32)))
  flat = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), batch)
  with pytest.raises(ValueError, match='user axis'):
    fn(_PARAMS, flat, users)


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_a_bare_mask_is_refused_so_padding_cannot_be_marked_real(method):
  """The sampler pads with example 0; an all-True mask in place of the
  batch's would add example 0 to every padded row and let its user move
  the sum by many times C. Only the sampler's UserBatch is accepted, also
  under jit, so its mask is the one used."""
  ids = np.repeat(np.arange(6), [1, 3, 2, 3, 1, 2])  # example 0: user 0
  sampler = dpjax.sampling.UserPoissonSampler(ids, 0.5,
                                              max_examples_per_user=3)
  x = jax.random.normal(jax.random.key(9), (len(ids), 6))
  y = jnp.arange(len(ids)) % 3
  users = sampler.sample(jax.random.key(10), 0)
  assert not bool(jnp.all(users.mask))  # padded slots hold example 0
  data = (x[users.indices], y[users.indices])
  fn = _FNS[method]
  for bare in (jnp.ones(users.mask.shape, bool), users.mask,
               np.asarray(users.mask), (users.mask,)):
    with pytest.raises(ValueError, match='UserBatch'):
      fn(_PARAMS, data, bare)
    with pytest.raises(ValueError, match='UserBatch'):
      dpjax.clipping.clipped_user_grad_sum(_loss, C, method)(
          _PARAMS, data, bare)
  out = fn(_PARAMS, data, users)
  padded_users = ~jnp.any(users.mask, axis=1)
  assert bool(jnp.any(padded_users))
  assert bool(jnp.all(jnp.where(padded_users, out.norms, 0.0) == 0.0))


def test_user_sampler_caps_examples_and_samples_users_at_rate_q():
  rng = np.random.default_rng(0)
  ids = rng.integers(0, 50, size=400) * 7 + 3  # arbitrary labels
  sampler = dpjax.sampling.UserPoissonSampler(ids, 0.2,
                                              max_examples_per_user=4)
  assert sampler.num_users == len(np.unique(ids)) and sampler.unit == 'user'
  sample = jax.jit(jax.vmap(sampler.sample, (None, 0)))
  batches = sample(jax.random.key(5), jnp.arange(400))
  assert batches.indices.shape == (400, sampler.max_users, 4)
  # Every row of a batch belongs to one user, within the cap.
  idx, mask = np.asarray(batches.indices), np.asarray(batches.mask)
  assert mask.sum(axis=2).max() <= 4
  for b in range(3):
    for row, keep in zip(idx[b], mask[b]):
      assert len(set(ids[row[keep]])) <= 1
  # Users join at rate q: a two-sided binomial test on the users drawn.
  users = np.asarray(batches.num_sampled).sum()
  trials = 400 * sampler.num_users
  assert stats.binomtest(int(users), trials, 0.2).pvalue > 1e-3
  # The event is the Poisson event over users.
  event = sampler.dp_event(1.1)
  assert event.sampling_probability == 0.2
  assert sampler.expected_batch_size == pytest.approx(0.2 * sampler.num_users)


@pytest.mark.parametrize('kwargs, match', [
    (dict(user_ids=np.zeros((2, 2), int)), 'user_ids'),
    (dict(user_ids=np.array([0.5, 1.0])), 'user_ids'),
    (dict(max_examples_per_user=0), 'max_examples_per_user'),
    (dict(sampling_rate=1.5), 'sampling_rate'),
])
def test_user_sampler_bad_input_is_named(kwargs, match):
  args = dict(user_ids=np.array([0, 1, 1]), sampling_rate=0.5,
              max_examples_per_user=2)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dpjax.sampling.UserPoissonSampler(**args)


def test_user_level_dpsgd_step_records_a_user_event():
  ids = np.repeat(np.arange(20), 3)
  sampler = dpjax.sampling.UserPoissonSampler(ids, 0.25,
                                              max_examples_per_user=3)
  x = jax.random.normal(jax.random.key(6), (60, 6))
  y = jnp.arange(60) % 3
  tx = dpjax.dpsgd(0.1, None, 1.0, sampler,
                   key=jax.random.key(7), per_example=False)
  state = tx.init(_PARAMS)
  batch = sampler.sample(jax.random.key(8), 0)
  out = _FNS['vmap'](_PARAMS, (x[batch.indices], y[batch.indices]), batch)
  _, state = tx.update(out.grad_sum, state, _PARAMS)
  ledger = dpjax.PrivacyLedger()
  ledger.record_step(state, sampler, batch)
  with pytest.raises(ValueError):
    ledger.record_step(state, sampler, batch)
