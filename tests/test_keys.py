"""Domain-separated key streams: one user key, independent consumers.

A key shared by a Poisson sampler and DP-SGD used to make the noise encode
the batch (selection bits and noise came from one ``fold_in(key, t)``):
sampled coordinates' noise fell below Phi^-1(q), unsampled above. Every
consumer now draws from ``stream(key, name)`` with its own registered name.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import _keys

N, Q, STEPS = 64, 0.3, 100


def test_registered_names_and_constants_are_distinct():
  names = _keys.registered()
  # Every consumer family registers (a sample of the expected names).
  for name in ('dpsgd_noise', 'poisson_sampler', 'fixed_size_sampler',
               'protocol_round', 'noisy_reg', 'audit_canaries'):
    assert name in names
  assert len(set(names.values())) == len(names)
  assert all(c == _keys.constant(n) for n, c in names.items())
  assert all(0 <= c < 2**32 for c in names.values())


def test_a_name_cannot_serve_two_modules():
  with pytest.raises(ValueError, match='already used'):
    _keys.register('dpsgd_noise', 'somewhere.else')
  assert _keys.register('dpsgd_noise', 'dpjax.transforms._dpsgd_noise')
  with pytest.raises(ValueError, match='registered'):
    _keys.stream(jax.random.key(0), 'no_such_consumer')
  with pytest.raises(ValueError, match='name='):
    _keys.register('', 'x')


def test_streams_of_one_key_differ_and_are_pure():
  key = jax.random.key(7)
  data = {n: np.asarray(jax.random.key_data(_keys.stream(key, n))).tobytes()
          for n in _keys.registered()}
  assert len(set(data.values())) == len(data)
  assert np.asarray(jax.random.key_data(key)).tobytes() not in data.values()
  again = jax.jit(_keys.stream, static_argnums=1)(key, 'dpsgd_noise')
  assert np.asarray(jax.random.key_data(again)).tobytes() == data['dpsgd_noise']
  raw = jax.random.PRNGKey(7)  # a raw uint32 key keeps its form
  assert _keys.stream(raw, 'dpsgd_noise').shape == raw.shape


def test_sampler_and_noise_streams_of_one_key_differ():
  key = jax.random.key(3)
  state = dpjax.dpsgd(1.0, 1.0, 1.0, dpjax.PoissonSampler(1, 1.0), key=key).init(jnp.zeros(2))
  keys = [x for x in jax.tree.leaves(state)
          if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)]
  assert len(keys) == 1  # the noise stream, not the user key
  assert (dpjax.accounting.key_fingerprint(keys[0])
          != dpjax.accounting.key_fingerprint(key))
  sampler = dpjax.PoissonSampler(N, 0.5, max_batch_size=N)
  batch = sampler.sample(key, 0)
  drawn = np.asarray(batch.indices)[np.asarray(batch.mask)]
  undivided = jax.random.bits(  # the selection an undivided key would make
      jax.random.split(jax.random.fold_in(key, 0))[0], (N,), jnp.uint32)
  assert not np.array_equal(drawn, np.flatnonzero(undivided < jnp.uint32(2**31)))


def _noise_and_masks(key):
  """One key for the sampler and the noise, as a user might pass it."""
  sampler = dpjax.PoissonSampler(N, Q, max_batch_size=N)
  tx = dpjax.dpsgd(1.0, 1.0, 1.0, dpjax.PoissonSampler(1, 1.0), key=key)  # lr = sigma = C = batch = 1

  @jax.jit
  def step(state, t):
    batch = sampler.sample(key, t)
    per_example = jnp.zeros((1, N))
    updates, state = tx.update(per_example, state, jnp.zeros(N),
                               mask=jnp.zeros(1, bool))
    selected = jnp.zeros(N, bool).at[batch.indices].max(batch.mask)
    return state, (-updates, selected)  # sgd returns -lr * noise

  state = tx.init(jnp.zeros(N))
  zs, masks = [], []
  for t in range(STEPS):
    state, (z, m) = step(state, jnp.int32(t))
    zs.append(z)
    masks.append(m)
  return np.stack(zs), np.stack(masks)


def test_one_key_for_sampler_and_noise_gives_independent_draws():
  """The audit of the issue: whether s z < Phi^-1(q) predicts selection."""
  z, selected = _noise_and_masks(jax.random.key(11))
  assert 0 < selected.mean() < 1
  threshold = stats.norm.ppf(Q)
  p = selected.mean()
  chance = p * Q + (1 - p) * (1 - Q)  # agreement of independent events
  sd = np.sqrt(chance * (1 - chance) / z.size)
  for sign in (1, -1):
    agree = np.mean((sign * z < threshold) == selected)
    assert abs(agree - chance) < 5 * sd, (sign, agree, chance)
  # Nor does the noise's mean differ between sampled and unsampled rows.
  t = stats.ttest_ind(z[selected], z[~selected]).statistic
  assert abs(t) < 5
