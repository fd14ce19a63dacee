"""Random sparsification (Zhu & Blaschko, Alg. 1-3)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

import dpjax
from dpjax import compression
from dpjax import transforms as _sparsify

PARAMS = {'w': jnp.zeros((6, 5)), 'b': jnp.zeros(5)}  # d = 35
D = 35
B = 4
FULL = dpjax.PoissonSampler(B, 1.0)  # every step takes the whole batch


def per_example_ones(scale=1.0):
  return jax.tree.map(lambda p: jnp.full((B,) + p.shape, scale), PARAMS)


def nonzero_pattern(tree):
  return np.concatenate([np.asarray(x != 0).ravel() for x in
                         jax.tree.leaves(tree)])


def test_schedule_cools_linearly_to_the_final_rate():
  np.testing.assert_array_equal(_sparsify.sparsity_schedule(0.9, 4, 10),
                                [0, 3, 6, 9])
  np.testing.assert_array_equal(_sparsify.sparsity_schedule(0.3, 2, 10), [0, 3])
  np.testing.assert_array_equal(_sparsify.sparsity_schedule(0.5, 1, 9), [4])


def test_mask_sizes_are_exact_in_every_epoch_and_refresh():
  epochs, steps, refresh = 4, 6, 3
  sched = _sparsify.SparsityMaskSchedule.cooling(0.8, epochs, steps, PARAMS,
                                                 refresh)
  tx = dpjax.transforms.sparsify_random(sched,
                                        key=jax.random.key(1),
                                        per_example=False)
  state, update = tx.init(PARAMS), jax.jit(tx.update)
  expected = _sparsify.sparsity_schedule(0.8, epochs, D)
  ones = jax.tree.map(jnp.ones_like, PARAMS)
  patterns = []
  for t in range(epochs * steps):
    out, state = update(ones, state)
    pattern = nonzero_pattern(out)
    assert D - pattern.sum() == expected[t // steps], t
    patterns.append(pattern)
  for t in range(1, epochs * steps):  # the mask changes only at a refresh
    same = np.array_equal(patterns[t], patterns[t - 1])
    if t % (steps // refresh):
      assert same, t
  assert not np.array_equal(patterns[-1], patterns[-steps])


def test_one_mask_is_shared_by_every_example():
  tx = dpjax.transforms.sparsify_random(
      _sparsify.SparsityMaskSchedule.cooling(0.5, 1, 10, PARAMS),
      key=jax.random.key(2))
  out, _ = tx.update(per_example_ones(), tx.init(PARAMS))
  rows = [nonzero_pattern(jax.tree.map(lambda x, i=i: x[i], out))
          for i in range(B)]
  for row in rows:
    np.testing.assert_array_equal(row, rows[0])
  assert rows[0].sum() == D - int(0.5 * D)


def test_zeroed_set_is_uniform_over_coordinates():
  draws = 4000
  masks = jax.vmap(lambda k: compression.random_mask(k, PARAMS, 7))(
      jax.random.split(jax.random.key(3), draws))
  zeros = np.concatenate([np.asarray(1 - m).reshape(draws, -1)
                          for m in jax.tree.leaves(masks)], axis=1)
  assert np.all(zeros.sum(1) == 7)
  expected = np.full(D, draws * 7 / D)
  assert stats.chisquare(zeros.sum(0), expected).pvalue > 1e-3
  # The same test rejects a biased mask (coordinate 0 zeroed too often).
  biased = zeros.sum(0) + np.eye(D)[0] * 0.1 * draws
  assert stats.chisquare(biased, biased.sum() / D).pvalue < 1e-6


def test_smallest_k_is_a_stable_argsort_prefix_under_ties():
  # Values from a range of 4 force ties at the cut; the bisection must pick
  # exactly k, the earliest among equals, for every k including the ends.
  rng = np.random.default_rng(0)
  fn = jax.jit(compression.smallest_k)
  for values in (rng.integers(0, 4, 37), rng.integers(0, 2**32, 37,
                                                      dtype=np.uint64),
                 np.array([2**32 - 1, 0, 2**32 - 1, 7]), np.zeros(5)):
    values = values.astype(np.uint32)
    order = np.argsort(values, kind='stable')
    for k in range(-1, len(values) + 2):
      expected = np.zeros(len(values), bool)
      expected[order[:max(0, min(k, len(values)))]] = True
      np.testing.assert_array_equal(np.asarray(fn(values, k)), expected)
  # Two words, lexicographic, and an eligibility mask: the k smallest
  # eligible (w1, w2) pairs, ties by position.
  w1 = rng.integers(0, 3, 41).astype(np.uint32)
  w2 = rng.integers(0, 3, 41).astype(np.uint32)
  ok = rng.random(41) < 0.7
  order = [i for i in np.lexsort((np.arange(41), w2, w1)) if ok[i]]
  for k in (0, 1, 5, 17, len(order), 50):
    expected = np.zeros(41, bool)
    expected[order[:k]] = True
    np.testing.assert_array_equal(
        np.asarray(compression.smallest_k((w1, w2), k, ok)), expected)


def rs_step(final_rate=0.6, sigma=1.0, clip=True, key=0, l2_norm_clip=1.0,
            momentum=0.9):
  key = jax.random.key(key)
  sched = _sparsify.SparsityMaskSchedule.cooling(final_rate, 3, 5, PARAMS)
  tx = dpjax.rs_dpsgd(0.1, l2_norm_clip, sigma, FULL, sched,
                      key=jax.random.fold_in(key, 1),
                      mask_key=jax.random.fold_in(key, 0),
                      momentum=momentum or None, clip=clip)
  return tx, tx.init(PARAMS)


def test_masked_coordinates_get_neither_gradient_nor_noise():
  # Without momentum (whose velocity still moves masked coordinates, as the
  # paper notes) the update is the masked noisy sum itself.
  tx, state = rs_step(sigma=2.0, momentum=0.0)
  grads = per_example_ones(3.0)
  update = jax.jit(tx.update)
  for _ in range(12):  # into the third epoch (rate 0.6: 21 zeros)
    out, state = update(grads, state, PARAMS, mask=jnp.ones(B, bool))
  mask = nonzero_pattern(state[0].mask)
  assert D - mask.sum() == int(0.6 * D)
  np.testing.assert_array_equal(nonzero_pattern(out), mask)


def test_zero_rate_is_plain_dpsgd_bit_for_bit():
  key = jax.random.key(5)
  sched = _sparsify.SparsityMaskSchedule.cooling(0.0, 3, 5, PARAMS)
  rs = dpjax.rs_dpsgd(0.1, 1.0, 1.3, FULL, sched,
                      key=jax.random.fold_in(key, 1),
                      mask_key=jax.random.fold_in(key, 0), momentum=0.9)
  plain = dpjax.dpsgd(0.1, 1.0, 1.3, FULL, key=jax.random.fold_in(key, 1),
                      momentum=0.9)
  s_rs, s_plain = rs.init(PARAMS), plain.init(PARAMS)
  grads = jax.tree.map(
      lambda p: jax.random.normal(jax.random.key(6), (B,) + p.shape), PARAMS)
  rs_update, plain_update = jax.jit(rs.update), jax.jit(plain.update)
  for _ in range(3):
    a, s_rs = rs_update(grads, s_rs, PARAMS, mask=jnp.ones(B, bool))
    b, s_plain = plain_update(grads, s_plain, PARAMS, mask=jnp.ones(B, bool))
    chex.assert_trees_all_equal(a, b)


def test_ablations_differ_from_dpsgd_exactly_where_they_should():
  grads = per_example_ones(3.0)  # per-example norm 3 sqrt(35) >> C = 1
  valid = jnp.ones(B, bool)
  clipped_only, s1 = rs_step(sigma=0.0)
  noisy_only, s2 = rs_step(clip=False)
  full, s3 = rs_step()
  a, s1 = clipped_only.update(grads, s1, PARAMS, mask=valid)
  b, s2 = noisy_only.update(grads, s2, PARAMS, mask=valid)
  c, s3 = full.update(grads, s3, PARAMS, mask=valid)
  # Step 0 has rate 0: clipped-only is -lr * (sum of clipped rows) / B.
  clipped_row = 3.0 / (3.0 * np.sqrt(D))
  for leaf in jax.tree.leaves(a):
    np.testing.assert_allclose(leaf, -0.1 * clipped_row, rtol=1e-5)
  # Noisy-only = full DP-SGD + the clipping it skipped (same noise key).
  for x, y in zip(jax.tree.leaves(b), jax.tree.leaves(c)):
    np.testing.assert_allclose(x - y, -0.1 * (3.0 - clipped_row), rtol=1e-4)


def test_sensitivity_of_the_masked_clipped_sum():
  """Replace one example adversarially: the noiseless step moves <= 2C lr/B."""
  tx, state = rs_step(final_rate=0.5, sigma=0.0, l2_norm_clip=0.7)
  update = jax.jit(tx.update)
  for _ in range(10):  # reach a sparse epoch
    _, state = update(per_example_ones(), state, PARAMS,
                      mask=jnp.ones(B, bool))
  base = per_example_ones()
  other = jax.tree.map(lambda x: x.at[0].set(-1e4 * jnp.ones_like(x[0])), base)
  a, _ = update(base, state, PARAMS, mask=jnp.ones(B, bool))
  b, _ = update(other, state, PARAMS, mask=jnp.ones(B, bool))
  moved = np.sqrt(sum(float(jnp.sum((x - y) ** 2)) for x, y in
                      zip(jax.tree.leaves(a), jax.tree.leaves(b))))
  assert moved <= 2 * 0.7 * 0.1 / B * (1 + 1e-5)
  assert moved > 0.7 * 0.1 / B  # the bound is not vacuous here


def test_same_key_same_output_with_and_without_jit():
  tx, state = rs_step()
  grads = per_example_ones()
  valid = jnp.ones(B, bool)
  eager, _ = tx.update(grads, state, PARAMS, mask=valid)
  jitted, _ = jax.jit(tx.update)(grads, state, PARAMS, mask=valid)
  again, _ = jax.jit(tx.update)(grads, state, PARAMS, mask=valid)
  chex.assert_trees_all_close(eager, jitted, rtol=1e-5, atol=1e-8)
  chex.assert_trees_all_equal(jitted, again)
  other, _ = rs_step(key=1)[0].update(grads, rs_step(key=1)[1], PARAMS,
                                      mask=valid)
  assert not all(np.array_equal(x, y) for x, y in
                 zip(jax.tree.leaves(other), jax.tree.leaves(jitted)))


def test_no_recompilation_across_steps():
  tx, state = rs_step()
  update = jax.jit(tx.update)
  grads, valid = per_example_ones(), jnp.ones(B, bool)
  for _ in range(7):
    _, state = update(grads, state, PARAMS, mask=valid)
  assert update._cache_size() == 1


@pytest.mark.parametrize('kwargs, match', [
    (dict(final_rate=1.0), 'final_rate=1.0'),
    (dict(final_rate=-0.1), 'final_rate=-0.1'),
    (dict(epochs=0), 'epochs=0'),
    (dict(refresh_per_epoch=20), 'refresh_per_epoch=20'),
])
def test_bad_arguments_raise(kwargs, match):
  args = dict(final_rate=0.5, epochs=2, steps_per_epoch=10, like=PARAMS)
  with pytest.raises(ValueError, match=match):
    _sparsify.SparsityMaskSchedule.cooling(**dict(args, **kwargs))


def test_sparsify_random_needs_a_schedule():
  with pytest.raises(ValueError, match='SparsityMaskSchedule'):
    dpjax.transforms.sparsify_random(0.5, key=jax.random.key(0))


def test_message_bits_count_values_and_positions():
  assert compression.sparse_message_bits(1000, 1000) == 32000  # dense
  assert compression.sparse_message_bits(1000, 10) == 10 * 32 + 10 * 10
  assert compression.sparse_message_bits(1000, 500) == 500 * 32 + 1000  # bitmask
  assert compression.sparse_message_bits(1000, 10, send_indices=False) == 320


def test_run_bits_send_positions_once_per_refresh():
  sched = _sparsify.SparsityMaskSchedule.cooling(0.9, 3, 4, jnp.zeros(100), 2)
  bits = _sparsify.rs_dpsgd_bits(sched, 100)
  kept = 100 - _sparsify.sparsity_schedule(0.9, 3, 100)  # 100, 55, 10
  per_step = [int(kept[t // 4]) * 32 for t in range(12)]
  positions = {4: 100, 6: 100, 8: 10 * 7, 10: 10 * 7}  # epoch 0 is dense
  np.testing.assert_array_equal(
      bits, [b + positions.get(t, 0) for t, b in enumerate(per_step)])


def test_ranked_sparsification_zeroes_the_smallest_scores_of_last_epoch():
  # Without noise the score of coordinate j is the sum of clipped gradients;
  # make it grow with j, so epoch 1 must drop the lowest coordinates.
  w = jnp.arange(1.0, 36.0).reshape(7, 5) / 100.0
  params = {'w': jnp.zeros((7, 5))}
  grads = {'w': jnp.broadcast_to(w, (B, 7, 5))}
  tx = _sparsify.ranked_sparsified_privatizer(
      100.0, 0.0, _sparsify.SparsityMaskSchedule.cooling(0.6, 2, 3, params),
      key=jax.random.key(0))
  state, update = tx.init(params), jax.jit(tx.update)
  outs = []
  for _ in range(6):
    out, state = update(grads, state, mask=jnp.ones(B, bool))
    outs.append(np.asarray(out['w']).ravel())
  np.testing.assert_allclose(outs[0], B * np.asarray(w).ravel(), rtol=1e-6)
  kept = outs[3] != 0
  zeros = int(0.6 * 35)
  assert not kept[:zeros].any() and kept[zeros:].all()
  np.testing.assert_array_equal(outs[5] != 0, kept)  # one mask per epoch


def test_ranked_privatizer_sensitivity_and_noise_masking():
  params = {'w': jnp.zeros((7, 5))}
  tx = _sparsify.ranked_sparsified_privatizer(
      0.5, 0.0, _sparsify.SparsityMaskSchedule.cooling(0.5, 2, 2, params),
      key=jax.random.key(1))
  state, update = tx.init(params), jax.jit(tx.update)
  base = {'w': jax.random.normal(jax.random.key(2), (B, 7, 5))}
  for _ in range(2):
    _, state = update(base, state, mask=jnp.ones(B, bool))
  other = {'w': base['w'].at[0].set(1e3)}
  a, _ = update(base, state, mask=jnp.ones(B, bool))
  b, _ = update(other, state, mask=jnp.ones(B, bool))
  assert float(jnp.linalg.norm(a['w'] - b['w'])) <= 2 * 0.5 * (1 + 1e-5)
  noisy = _sparsify.ranked_sparsified_privatizer(
      0.5, 3.0, _sparsify.SparsityMaskSchedule.cooling(0.5, 2, 2, params),
      key=jax.random.key(1))
  state = noisy.init(params)
  for _ in range(3):
    out, state = jax.jit(noisy.update)(base, state, mask=jnp.ones(B, bool))
  np.testing.assert_array_equal(np.asarray(out['w']) != 0,
                                np.asarray(state.mask['w']) != 0)
  assert int((np.asarray(state.mask['w']) == 0).sum()) == int(0.5 * 35)


def test_sparse_message_round_trip_and_size():
  mask = compression.random_mask(jax.random.key(7), PARAMS, 28)
  update = jax.tree.map(
      lambda m: m * jax.random.normal(jax.random.key(8), m.shape), mask)
  msg = compression.encode_sparse(update, mask)
  assert msg.values.size == D - 28 and msg.dimension == D
  chex.assert_trees_all_equal(compression.decode_sparse(msg, PARAMS), update)
  assert msg.bits() == compression.sparse_message_bits(D, D - 28)
  assert msg.bits(send_indices=False) == 32 * (D - 28)


def test_the_state_holds_the_mask_of_the_next_step_bit_for_bit():
  """The state's mask is the mask of step ``count``, the one the next update
  applies: the same bits as the mask as a function of (key, t), redrawn at
  each refresh under a cooling schedule."""
  from dpjax.transforms._sparsifying import _sparsity_mask  # pylint: disable=g-import-not-at-top
  sched = _sparsify.SparsityMaskSchedule.cooling(0.8, 4, 6, PARAMS, 3)
  key = jax.random.key(3)
  tx = dpjax.transforms.sparsify_random(sched, key=key, per_example=False)
  state = tx.init(PARAMS)
  ones = jax.tree.map(jnp.ones_like, PARAMS)
  update = jax.jit(tx.update)
  for t in range(30):
    expected = _sparsity_mask(key, t, PARAMS, sched)
    chex.assert_trees_all_equal(dpjax.transforms.next_sparsity_mask(state),
                                expected)
    out, state = update(ones, state)
    chex.assert_trees_all_equal(
        out, jax.tree.map(lambda m: m.astype(jnp.float32), expected))


def test_next_sparsity_mask_is_what_rs_dpsgd_applies():
  """per_example=False: the caller masks the per-example gradients with the
  state's mask; the sum then equals the chain's per_example=True update
  (same keys, same mask on gradients and noise)."""
  sched = _sparsify.SparsityMaskSchedule.cooling(0.6, 3, 2, PARAMS)
  keys = dict(key=jax.random.key(1), mask_key=jax.random.key(2))
  inside = dpjax.rs_dpsgd(0.1, 1.0, 1.0, FULL, sched, **keys)
  outside = dpjax.rs_dpsgd(0.1, None, 1.0, FULL, sched, per_example=False,
                           **keys)
  grads = jax.tree.map(
      lambda p: jax.random.normal(jax.random.key(6), (B,) + p.shape), PARAMS)
  s_in, s_out = inside.init(PARAMS), outside.init(PARAMS)
  for _ in range(5):
    mask = dpjax.transforms.next_sparsity_mask(s_out)
    chex.assert_trees_all_equal(mask,
                                dpjax.transforms.next_sparsity_mask(s_in))
    masked = jax.tree.map(lambda g, m: g * m[None], grads, mask)
    total = dpjax.clipping.clip_and_sum(masked, 1.0, jnp.ones(B, bool))
    u_in, s_in = inside.update(grads, s_in, PARAMS, mask=jnp.ones(B, bool))
    u_out, s_out = outside.update(total.grad_sum, s_out, PARAMS)
    chex.assert_trees_all_close(u_in, u_out, rtol=1e-6, atol=1e-7)


def test_next_sparsity_mask_finds_the_state_anywhere_and_refuses_none():
  sched = _sparsify.SparsityMaskSchedule.cooling(0.5, 1, 10, jnp.zeros(40))
  def make(momentum=None):
    return dpjax.rs_dpsgd(0.1, 1.0, 1.0, FULL, sched, key=jax.random.key(0),
                          mask_key=jax.random.key(1), momentum=momentum)
  plain = make().init(jnp.zeros(40))
  mask = dpjax.transforms.next_sparsity_mask(plain)
  assert int((mask == 0).sum()) == 20
  injected = optax.inject_hyperparams(make)(momentum=0.9).init(jnp.zeros(40))
  np.testing.assert_array_equal(
      dpjax.transforms.next_sparsity_mask(injected), mask)
  stacked = jax.vmap(lambda p: make().init(p))(jnp.zeros((3, 40)))
  np.testing.assert_array_equal(
      dpjax.transforms.next_sparsity_mask(stacked), np.stack([mask] * 3))
  under_jit = jax.jit(dpjax.transforms.next_sparsity_mask)(plain)
  np.testing.assert_array_equal(under_jit, mask)
  with pytest.raises(ValueError, match='found none'):
    dpjax.transforms.next_sparsity_mask(
        dpjax.dpsgd(0.1, 1.0, 1.0, FULL, key=jax.random.key(0)).init(
            jnp.zeros(40)))
  other = dpjax.transforms.sparsify_random(sched, key=jax.random.key(7))
  with pytest.raises(ValueError, match='different masks'):
    dpjax.transforms.next_sparsity_mask((plain, other.init(jnp.zeros(40))))
