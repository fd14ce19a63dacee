"""Fast Walsh-Hadamard transform and randomized Hadamard rotation."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import linalg

import dpjax



@pytest.mark.parametrize('d', [1, 2, 8, 64, 1024])
def test_fwht_equals_the_normalized_sylvester_matrix(d):
  x = np.asarray(jax.random.normal(jax.random.key(d), (3, d)), np.float64)
  want = x @ linalg.hadamard(d).T / np.sqrt(d)
  np.testing.assert_allclose(dpjax.compression.fwht(jnp.asarray(x, jnp.float32)), want,
                             rtol=1e-5, atol=1e-5)


def test_fwht_is_orthogonal_and_its_own_inverse():
  x = jax.random.normal(jax.random.key(0), (4, 2**14))
  y = dpjax.compression.fwht(x)
  np.testing.assert_allclose(jnp.linalg.norm(y, axis=-1),
                             jnp.linalg.norm(x, axis=-1), rtol=1e-5)
  np.testing.assert_allclose(dpjax.compression.fwht(y), x, atol=1e-5)


def test_fwht_is_fast_at_a_million_coordinates():
  f = jax.jit(dpjax.compression.fwht)
  x = jax.random.normal(jax.random.key(0), (2**20,))
  y = f(x).block_until_ready()
  np.testing.assert_allclose(jnp.linalg.norm(y), jnp.linalg.norm(x),
                             rtol=1e-4)
  np.testing.assert_allclose(f(y)[:1000], x[:1000], atol=1e-4)


def test_randomized_hadamard_inverse_and_norm_with_the_same_key_only():
  x = jax.random.normal(jax.random.key(1), (256,))
  k = jax.random.key(7)
  y = dpjax.compression.randomized_hadamard(x, key=k)
  np.testing.assert_allclose(jnp.linalg.norm(y), jnp.linalg.norm(x),
                             rtol=1e-5)
  np.testing.assert_allclose(dpjax.compression.inverse_randomized_hadamard(y, key=k), x,
                             atol=1e-5)
  wrong = dpjax.compression.inverse_randomized_hadamard(y, key=jax.random.key(8))
  assert float(jnp.max(jnp.abs(wrong - x))) > 0.1
  # The rotation spreads a spike evenly: |R e_1| = 1 / sqrt(d) everywhere.
  spike = dpjax.compression.randomized_hadamard(jnp.zeros(256).at[0].set(1.0), key=k)
  np.testing.assert_allclose(jnp.abs(spike), 1 / 16, rtol=1e-6)


def test_pytree_round_trip_restores_structure_shapes_and_dtypes():
  tree = {'w': jax.random.normal(jax.random.key(0), (5, 3)),
          'b': jnp.arange(3, dtype=jnp.float32),
          'deep': [jnp.ones((2, 2, 2)), jnp.full((1,), -2.0)]}
  k = jax.random.key(3)
  y = dpjax.compression.rotate_tree(tree, key=k)
  assert y.shape == (dpjax.compression.rotated_size(tree),) == (32,)
  total = jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree.leaves(tree)))
  np.testing.assert_allclose(jnp.linalg.norm(y), total, rtol=1e-5)
  back = dpjax.compression.unrotate_tree(y, tree, key=k)
  assert jax.tree.structure(back) == jax.tree.structure(tree)
  for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(tree)):
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, atol=1e-5)
  like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)
  back2 = dpjax.compression.unrotate_tree(y, like, key=k)
  np.testing.assert_allclose(back2['w'], tree['w'], atol=1e-5)


def test_rotation_is_deterministic_from_the_key_with_and_without_jit():
  tree = {'a': jnp.linspace(-1, 1, 100)}
  k = jax.random.key(9)
  eager = dpjax.compression.rotate_tree(tree, key=k)
  jitted = jax.jit(lambda t, kk: dpjax.compression.rotate_tree(t, key=kk))(tree, k)
  np.testing.assert_allclose(eager, jitted, rtol=1e-6, atol=1e-7)
  np.testing.assert_array_equal(eager, dpjax.compression.rotate_tree(tree, key=k))
  assert not np.allclose(eager, dpjax.compression.rotate_tree(tree, key=jax.random.key(10)))


def test_rotation_rejects_bad_arguments():
  with pytest.raises(ValueError, match='d=6'):
    dpjax.compression.fwht(jnp.ones(6))
  with pytest.raises(ValueError, match='shape \\(8,\\)'):
    dpjax.compression.unrotate_tree(jnp.ones(8), {'a': jnp.ones(20)}, key=jax.random.key(0))
  with pytest.raises(ValueError, match='key'):
    dpjax.compression.randomized_hadamard(jnp.ones(4), key=None)
  with pytest.raises(ValueError, match='at least one'):
    dpjax.compression.rotate_tree({}, key=jax.random.key(0))
