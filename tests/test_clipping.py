"""Per-example gradients and clipped sums: values, sensitivity, padding, NaNs."""

import chex
import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax

D = 5


def linear_loss(params, example):
  """Squared error of a linear model; its gradient can be made arbitrarily big."""
  pred = example['x'] @ params['w'] + params['b']
  return 0.5 * jnp.square(pred - example['y'])


def make_batch(key, batch=8, scale=1.0):
  kx, ky = jax.random.split(key)
  return {'x': scale * jax.random.normal(kx, (batch, D)),
          'y': jax.random.normal(ky, (batch,))}


PARAMS = {'w': jnp.linspace(-1.0, 1.0, D), 'b': jnp.array(0.3)}


def ALL(batch):  # pylint: disable=invalid-name
  """The mask of a batch without padding."""
  return jnp.ones(jax.tree.leaves(batch)[0].shape[0], bool)


def test_per_example_grads_match_a_python_loop():
  batch = make_batch(jax.random.key(0))
  grads = dpjax.per_example_grads(linear_loss)(PARAMS, batch)
  for i in range(batch['y'].shape[0]):
    one = jax.tree.map(lambda v: v[i], batch)
    chex.assert_trees_all_close(jax.tree.map(lambda g: g[i], grads),
                                jax.grad(linear_loss)(PARAMS, one), rtol=1e-6)


def test_clipped_sum_matches_reference_formula():
  batch = make_batch(jax.random.key(1), scale=3.0)
  grads = dpjax.per_example_grads(linear_loss)(PARAMS, batch)
  flat = np.concatenate([np.asarray(grads['w']),
                         np.asarray(grads['b'])[:, None]], axis=1)
  norms = np.linalg.norm(flat, axis=1)
  clip = float(np.median(norms))  # half the examples clipped, half not
  out = dpjax.clipped_grad_sum(linear_loss, clip)(PARAMS, batch, ALL(batch))
  expected = (flat * np.minimum(1.0, clip / norms)[:, None]).sum(0)
  np.testing.assert_allclose(out.norms, norms, rtol=1e-5)
  np.testing.assert_allclose(out.grad_sum.value['w'], expected[:D], rtol=1e-5)
  np.testing.assert_allclose(out.grad_sum.value['b'], expected[D], rtol=1e-5)


def test_huge_clip_gives_the_plain_gradient_sum():
  batch = make_batch(jax.random.key(2))
  out = dpjax.clipped_grad_sum(linear_loss, 1e9)(PARAMS, batch, ALL(batch))
  mean_loss = lambda p: jnp.sum(jax.vmap(linear_loss, (None, 0))(p, batch))
  chex.assert_trees_all_close(out.grad_sum.value, jax.grad(mean_loss)(PARAMS),
                              rtol=1e-5)


def _adversarial_neighbour(batch, index, clip):
  """Replaces example ``index`` by one whose clipped gradient points the other way."""
  grads = dpjax.per_example_grads(linear_loss)(PARAMS, batch)
  g = grads['w'][index]
  x_new = -1e4 * g / jnp.linalg.norm(g)
  # Residual of sign +1 makes the new gradient ~ x_new (huge, opposite to g).
  y_new = x_new @ PARAMS['w'] + PARAMS['b'] - 1.0
  return jax.tree.map(lambda v, new: v.at[index].set(new), batch,
                      {'x': x_new, 'y': y_new})


def _diff_norm(a, b):
  return float(jnp.sqrt(sum(jnp.sum(jnp.square(x - y)) for x, y in
                            zip(jax.tree.leaves(a), jax.tree.leaves(b)))))


@pytest.mark.parametrize('clip', [0.1, 1.0])
def test_replace_one_moves_the_sum_by_at_most_2c_and_nearly_attains_it(clip):
  batch = make_batch(jax.random.key(3), scale=5.0)
  fn = jax.jit(dpjax.clipped_grad_sum(linear_loss, clip))
  base = fn(PARAMS, batch, ALL(batch)).grad_sum
  index = int(jnp.argmax(fn(PARAMS, batch, ALL(batch)).norms))  # a clipped example
  moved = fn(PARAMS, _adversarial_neighbour(batch, index, clip), ALL(batch)).grad_sum
  dist = _diff_norm(base, moved)
  assert dist <= 2 * clip * (1 + 1e-5)
  assert dist >= 1.9 * clip  # the bound is tight, so the test can fail


def test_add_remove_one_moves_the_sum_by_at_most_c_via_the_mask():
  batch = make_batch(jax.random.key(4), scale=10.0)
  fn = dpjax.clipped_grad_sum(linear_loss, 0.5)
  full = fn(PARAMS, batch, ALL(batch)).grad_sum
  for i in range(batch['y'].shape[0]):
    mask = jnp.arange(batch['y'].shape[0]) != i
    assert _diff_norm(full, fn(PARAMS, batch, mask).grad_sum) <= 0.5 * (1 + 1e-5)


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(seed=st.integers(0, 2**30), scale=st.floats(0.01, 100.0),
                  index=st.integers(0, 7))
def test_sensitivity_bound_holds_for_random_neighbours(seed, scale, index):
  k1, k2 = jax.random.split(jax.random.key(seed))
  batch = make_batch(k1, scale=scale)
  other = make_batch(k2, scale=scale * 10)
  neighbour = jax.tree.map(lambda a, b: a.at[index].set(b[index]), batch, other)
  fn = _jitted_clip_sum
  assert _diff_norm(fn(PARAMS, batch, ALL(batch)).grad_sum,
                    fn(PARAMS, neighbour, ALL(neighbour)).grad_sum) <= 2 * 1.0 * (1 + 1e-5)


_jitted_clip_sum = jax.jit(dpjax.clipped_grad_sum(linear_loss, 1.0))


def test_per_layer_clipping_bounds_each_group_and_the_total():
  clip = {'w': 0.3, 'b': 0.4}
  assert dpjax.clipping.clipped_norm_bound(clip) == pytest.approx(0.5)
  batch = make_batch(jax.random.key(5), batch=1, scale=50.0)
  out = dpjax.clipped_grad_sum(linear_loss, clip)(PARAMS, batch, ALL(batch))
  assert set(out.norms) == {'w', 'b'}
  assert float(jnp.linalg.norm(out.grad_sum.value['w'])) == pytest.approx(0.3, 1e-5)
  assert float(jnp.abs(out.grad_sum.value['b'])) == pytest.approx(0.4, 1e-5)
  # Adversarial replace-one stays within 2 * sqrt(0.3^2 + 0.4^2).
  batch = make_batch(jax.random.key(6), scale=5.0)
  fn = dpjax.clipped_grad_sum(linear_loss, clip)
  moved = fn(PARAMS, _adversarial_neighbour(batch, 0, 1.0), ALL(batch)).grad_sum
  assert _diff_norm(fn(PARAMS, batch, ALL(batch)).grad_sum, moved) <= 2 * 0.5 * (1 + 1e-5)


def test_padded_rows_contribute_exactly_nothing():
  batch = make_batch(jax.random.key(7), batch=6)
  fn = dpjax.clipped_grad_sum(linear_loss, 1.0)
  real = fn(PARAMS, batch, ALL(batch)).grad_sum
  garbage = make_batch(jax.random.key(8), batch=4, scale=1e3)
  garbage['x'] = garbage['x'].at[0].set(jnp.nan)
  padded = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), batch, garbage)
  mask = jnp.arange(10) < 6
  out = fn(PARAMS, padded, mask)
  chex.assert_trees_all_close(out.grad_sum, real, rtol=1e-6)
  assert int(dpjax.clipping.count_nonfinite(out.norms, mask)) == 0


def test_nonfinite_examples_are_dropped_and_counted():
  batch = make_batch(jax.random.key(9), batch=6)
  fn = dpjax.clipped_grad_sum(linear_loss, 1.0)
  bad = jax.tree.map(lambda v: v, batch)
  bad['x'] = bad['x'].at[2].set(jnp.inf)
  out = fn(PARAMS, bad, ALL(bad))
  keep = jnp.arange(6) != 2
  chex.assert_tree_all_finite(out.grad_sum)
  chex.assert_trees_all_close(out.grad_sum, fn(PARAMS, batch, keep).grad_sum,
                              rtol=1e-6)
  assert int(dpjax.clipping.count_nonfinite(out.norms)) == 1
  per_layer = dpjax.clipped_grad_sum(linear_loss, {'w': 1.0, 'b': 1.0})
  out = per_layer(PARAMS, bad, ALL(bad))
  chex.assert_tree_all_finite(out.grad_sum)
  assert int(dpjax.clipping.count_nonfinite(out.norms)) == 1


@pytest.mark.usefixtures('full_optimization')
def test_jit_and_eager_agree_bitwise():
  batch = make_batch(jax.random.key(10))
  fn = dpjax.clipped_grad_sum(linear_loss, 1.0)
  eager, jitted = fn(PARAMS, batch, ALL(batch)), jax.jit(fn)(PARAMS, batch, ALL(batch))
  chex.assert_trees_all_close(eager, jitted, rtol=1e-6)


@pytest.mark.parametrize('bad', [0.0, -1.0, {'w': 1.0, 'b': 0.0}])
def test_nonpositive_clip_raises_naming_the_value(bad):
  with pytest.raises(ValueError, match='l2_norm_clip'):
    dpjax.clipped_grad_sum(linear_loss, bad)


def test_unknown_method_raises():
  with pytest.raises(ValueError, match="method='nope'"):
    dpjax.clipped_grad_sum(linear_loss, 1.0, method='nope')


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_coordinate_mask_clips_and_sums_the_masked_gradients(method):
  batch = make_batch(jax.random.key(11), scale=3.0)
  cmask = {'w': jnp.array([1.0, 0.0, 1.0, 1.0, 0.0]), 'b': jnp.array(0.0)}
  out = dpjax.clipped_grad_sum(linear_loss, 1.0, method)(
      PARAMS, batch, ALL(batch), coordinate_mask=cmask)
  grads = dpjax.per_example_grads(linear_loss)(PARAMS, batch)
  masked = jax.tree.map(lambda g, m: g * m, grads, cmask)
  expected = dpjax.clipping.clip_and_sum(masked, 1.0, ALL(masked))
  chex.assert_trees_all_close(out, expected, rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(out.grad_sum.value['w'])[[1, 4]], 0.0)
  assert float(out.grad_sum.value['b']) == 0.0


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_methods_agree_on_the_reference_formula(method):
  batch = make_batch(jax.random.key(12), scale=3.0)
  clip = {'w': 0.5, 'b': 0.2}
  out = jax.jit(dpjax.clipped_grad_sum(linear_loss, clip, method))(
      PARAMS, batch, ALL(batch))
  grads = dpjax.per_example_grads(linear_loss)(PARAMS, batch)
  chex.assert_trees_all_close(out, dpjax.clipping.clip_and_sum(grads, clip, ALL(grads)), rtol=1e-5)


@pytest.mark.parametrize('method', ['vmap', 'ghost'])
def test_the_clipped_sum_carries_its_bound(method):
  """A leaf beside the value (a Python float where the bound is concrete,
  traced inside a jit over C, which then pins nothing); the per-layer
  bound is the norm of the layer bounds; the unit is per example."""
  batch = make_batch(jax.random.key(13), scale=3.0)
  fn = lambda c: dpjax.clipped_grad_sum(linear_loss, c, method)(  # noqa: E731
      PARAMS, batch, ALL(batch)).grad_sum
  flat, layered = fn(0.5), fn({'w': 0.3, 'b': 0.4})
  assert isinstance(flat, dpjax.clipping.ClippedSum)
  assert flat.l2_norm_clip == 0.5
  assert layered.l2_norm_clip == pytest.approx(0.5, rel=1e-12)
  leaves = jax.tree.leaves(flat)
  assert leaves[:-2] == jax.tree.leaves(flat.value)
  assert leaves[-2:] == [0.5, -1.0]  # the bound and its probe, -2 x bound
  assert flat.unit == 'example' and flat.origin == 0.5
  traced = jax.jit(fn)(jnp.float32(0.25))
  np.testing.assert_array_equal(traced.l2_norm_clip, np.float32(0.25))
  assert traced.origin is None
  chex.assert_trees_all_close(traced.value, fn(0.25).value, rtol=1e-6)


def test_a_clipped_sum_cannot_be_built_from_a_bare_value():
  with pytest.raises(TypeError, match='clip_and_sum'):
    dpjax.clipping.ClippedSum({'w': jnp.zeros(D)}, 1.0)
  with pytest.raises(AttributeError):
    dpjax.clipping.clip_and_sum(jnp.ones((2, 3)), 1.0,
                                jnp.ones(2, bool)).grad_sum.l2_norm_clip = 9.0
