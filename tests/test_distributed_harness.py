"""Tests of dpjax.distributed's client harness: keys and exact sums."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import _keys
from dpjax import distributed as dist


def _mesh(size, name='clients'):
  if jax.device_count() < size:
    pytest.fail(f'Expected >= {size} host devices (tests/conftest.py forces '
                f'4 with XLA_FLAGS), found {jax.device_count()}.')
  return jax.sharding.Mesh(np.array(jax.devices()[:size]), (name,))


def test_key_derivation_is_the_documented_one():
  key = jax.random.key(5)
  root = jax.random.split(_keys.stream(key, 'protocol_round'))
  chex.assert_trees_all_equal(jax.random.key_data(dist.shared_key(key)),
                              jax.random.key_data(root[0]))
  keys = dist.client_keys(key, 3)
  assert keys.shape == (3,)
  for i in range(3):
    want = jax.random.fold_in(root[1], i)
    chex.assert_trees_all_equal(jax.random.key_data(keys[i]),
                                jax.random.key_data(want))
  # A client's key depends on its index only, not on how many clients.
  chex.assert_trees_all_equal(jax.random.key_data(keys),
                              jax.random.key_data(dist.client_keys(key, 8)[:3]))
  # Same under jit; raw uint32 keys are accepted.
  chex.assert_trees_all_equal(
      jax.random.key_data(jax.jit(dist.client_keys, static_argnums=1)(key, 3)),
      jax.random.key_data(keys))
  chex.assert_trees_all_equal(
      jax.random.key_data(dist.client_keys(jax.random.PRNGKey(5), 3)),
      jax.random.key_data(dist.client_keys(jax.random.wrap_key_data(
          jax.random.PRNGKey(5)), 3)))
  with pytest.raises(ValueError, match='num_clients=0'):
    dist.client_keys(key, 0)
  with pytest.raises(ValueError, match='key'):
    dist.shared_key(None)


def _noisy_counts(key, x, shared):
  """An integer encoder with private randomness and shared data."""
  offset, scale = shared
  noise = jax.random.randint(key, x.shape, 0, 1000, jnp.int32)
  return jnp.round(x * scale).astype(jnp.int32) + noise + offset


@pytest.mark.usefixtures('full_optimization')
def test_client_sum_vmapped_equals_sharded_bitwise():
  n, d = 8, 5
  xs = jnp.asarray(np.random.default_rng(0).normal(size=(n, d)), jnp.float32)
  shared = (jnp.int32(3), jnp.float32(100.0))
  for seed in range(3):
    keys = dist.client_keys(jax.random.key(seed), n)
    want = sum(_noisy_counts(keys[i], xs[i], shared) for i in range(n))
    got = dist.client_sum(_noisy_counts, keys, xs, shared)
    chex.assert_trees_all_equal(got, want)
    for size in (1, 2, 4):
      chex.assert_trees_all_equal(
          dist.client_sum(_noisy_counts, keys, xs, shared, mesh=_mesh(size)),
          want)
  # Under an outer jit, with a pytree of client inputs.
  run = jax.jit(lambda k, x: dist.client_sum(
      lambda kk, t, s: _noisy_counts(kk, t['a'] + t['b'], s), k,
      dict(a=x, b=-x), shared, mesh=_mesh(4)))
  keys = dist.client_keys(jax.random.key(0), n)
  chex.assert_trees_all_equal(
      run(keys, xs), dist.client_sum(_noisy_counts, keys, 0 * xs, shared))


def test_client_sum_refuses_what_it_cannot_sum_exactly():
  keys = dist.client_keys(jax.random.key(0), 8)
  xs = jnp.ones((8, 3))
  as_float = lambda k, x, s: x + jax.random.normal(k, x.shape)
  # Floats are summed on one device only (the order would depend on layout).
  assert dist.client_sum(as_float, keys, xs).shape == (3,)
  with pytest.raises(ValueError, match='integer messages'):
    dist.client_sum(as_float, keys, xs, mesh=_mesh(4))
  as_int = lambda k, x, s: x.astype(jnp.int32)
  with pytest.raises(ValueError, match='divisible'):
    dist.client_sum(as_int, keys[:6], xs[:6], mesh=_mesh(4))
  with pytest.raises(ValueError, match="axis_name='batch'"):
    dist.client_sum(as_int, keys, xs, mesh=_mesh(4), axis_name='batch')
  with pytest.raises(ValueError, match='Mesh'):
    dist.client_sum(as_int, keys, xs, mesh='clients')
