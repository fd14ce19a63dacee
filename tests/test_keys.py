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


@jax.jit
def _noise_of(sigma, clip, key):
  """The standardized noise z of one add_dpsgd_noise step at (sigma, C)."""
  dim = 20_000
  rows = jnp.ones((1, dim)) / jnp.sqrt(dim)  # one row of norm 1 <= C
  summed = dpjax.clipping.clip_and_sum(rows, clip, jnp.ones(1, bool)).grad_sum
  tx = dpjax.transforms.add_dpsgd_noise(sigma, key=key)
  out, _ = tx.update(summed, tx.init(None))
  return (out - summed.value) / (sigma * clip)


@pytest.mark.parametrize('a, b', [((1.0, 1.0), (2.0, 1.0)),   # sweep sigma
                                  ((1.0, 1.0), (1.0, 3.0))])  # sweep C
def test_privatizers_differing_in_sigma_or_bound_draw_independent_noise(a, b):
  """Before: one key gave every privatizer one draw z, so the releases
  S + sigma_1 C_1 z and S + sigma_2 C_2 z gave S without noise (a sweep
  from one key; ``dpsgd`` beside ``adaptive_dpsgd``: audit case
  ``shared_noise_key``). Sigma and the sum's bound are folded into the key.
  """
  key = jax.random.key(3)
  za, zb = _noise_of(*a, key), _noise_of(*b, key)
  assert abs(float(np.corrcoef(za, zb)[0, 1])) < 0.05
  # The same (sigma, C) and key draw the same noise: the run is a pure
  # function of its key and public parameters.
  np.testing.assert_array_equal(za, _noise_of(*a, key))
  # Under vmap over (sigma, C) (a traced sweep) the draws are independent.
  sweep = jax.vmap(_noise_of, in_axes=(0, 0, None))(
      jnp.array([a[0], b[0]]), jnp.array([a[1], b[1]]), key)
  assert abs(float(np.corrcoef(sweep[0], sweep[1])[0, 1])) < 0.05
  np.testing.assert_allclose(sweep[0], za, atol=1e-5)


def test_adaptive_counts_differing_in_their_noise_draw_independently():
  """The count noise folds its stddev and the step's bound into its key: a
  sweep over count_stddev from one key does not give the exact count."""
  grads = jnp.ones((4, 3))  # every row of norm sqrt(3) > 1 is clipped

  def count_noise(stddev, key):
    tx = dpjax.transforms.adaptive_clip_per_example(
        1.0, target_quantile=0.5, learning_rate=0.2, count_stddev=stddev,
        expected_batch_size=4.0, key=key)
    state = tx.update(grads, tx.init(None), jnp.zeros(3),
                      mask=jnp.ones(4, bool))[1]
    return ((state.unclipped_fraction - 0.5) * 4 + 2.0) / stddev

  keys = jax.random.split(jax.random.key(5), 2000)
  z = jax.jit(jax.vmap(jax.vmap(count_noise, (None, 0)), (0, None)))(
      jnp.array([1.0, 2.0]), keys)
  assert abs(float(np.corrcoef(z[0], z[1])[0, 1])) < 0.1
  assert 0.9 < float(np.std(z[0])) < 1.1  # the standardized count noise


NOISE_TRANSFORMS = {
    'gaussian': lambda s, k: dpjax.transforms.add_gaussian_noise(s, key=k),
    'laplace': lambda s, k: dpjax.transforms.add_laplace_noise(
        s, key=k, exact=False),
    'laplace_exact': lambda s, k: dpjax.transforms.add_laplace_noise(s, key=k),
    'discrete_gaussian': lambda s, k:
        dpjax.transforms.add_discrete_gaussian_noise(s, key=k, eta=2.0**-8),
    'exact_gaussian': lambda s, k: dpjax.transforms.add_exact_gaussian_noise(
        s, key=k),
    # Noise scale 2 xi n / epsilon: epsilon = 1 / s scales it by s.
    'laplace_privatizer': lambda s, k: dpjax.transforms.laplace_privatizer(
        1.0 / s, 1.0, key=k),
}


@pytest.mark.parametrize('name', sorted(NOISE_TRANSFORMS))
def test_noise_transforms_of_one_key_at_two_scales_draw_independently(name):
  """Before: add_gaussian_noise(1) and add_gaussian_noise(2) of one key drew
  one z, so 2 r_1 - r_2 gave the input without noise; each noise transform
  folds its scale into its stream."""
  x, key = jnp.zeros(2000), jax.random.key(4)
  z = [NOISE_TRANSFORMS[name](s, key).update(x, NOISE_TRANSFORMS[name](
      s, key).init(None))[0] / s for s in (1.0, 2.0)]
  assert abs(float(np.corrcoef(z[0], z[1])[0, 1])) < 0.1
