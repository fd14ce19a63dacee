"""Ghost clipping's sensitivity: adversarial gather ids, every layer, bf16.

One record's clipped contribution must stay within C whatever its data: ids
out of range, negative or repeated with opposite output gradients (the
gather's forward clamps such an id while its transposed scatter drops it), and
weights or views in bf16 (contributions rounded after clipping).
"""

import itertools

import hypothesis
from hypothesis import strategies as st
import jax
from jax import lax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax

V, T, D = 5, 4, 3  # table rows, lookups per record, row width
B = 4  # records besides the added one
# Ids that break a gather whose norm and sum disagree: past the end, far
# past it, before the start after jnp's wrap (-V - 1 -> -1), wrapped in
# range (-1 -> V - 1), the last row, row 0.
ADVERSARIAL_IDS = (V, V + 3, 2**20, -V - 1, -1, V - 1, 0)


def _lookup(table, ids, mode):
  if mode == 'raw':  # lax.gather on unwrapped ids, promise_in_bounds
    return lax.gather(
        table, ids[:, None], lax.GatherDimensionNumbers(
            offset_dims=(1,), collapsed_slice_dims=(0,),
            start_index_map=(0,)), (1, D),
        mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)
  if mode == 'plain':
    return table[ids]  # promise_in_bounds after jnp's wrap of negatives
  return table.at[ids].get(mode=mode, fill_value=0.0)


EMBED_MODES = ('plain', 'clip', 'fill', 'raw')


def embed_loss(params, example):
  """One table per gather mode, plus uint8 ids on two more tables."""
  ids, small, t = example['ids'], example['ids_u8'], example['t']
  out = sum(jnp.sum(_lookup(params[m], ids, m) * t) for m in EMBED_MODES)
  return out + jnp.sum(params['u8_plain'][small] * t) + jnp.sum(
      params['u8_clip'].at[small].get(mode='clip') * t)


def embed_params(seed=0):
  rng = np.random.default_rng(seed)
  names = EMBED_MODES + ('u8_plain', 'u8_clip')
  return {m: jnp.asarray(rng.normal(size=(V, D)), jnp.float32) for m in names}


def adversarial_ids(seed, batch):
  """Ids [batch, T] (int32 and uint8) and output gradients [batch, T, D]
  with opposite pairs: lookup 0 and 1 carry u and -u, 2 and 3 v and -v."""
  rng = np.random.default_rng(seed)
  ids = rng.choice(ADVERSARIAL_IDS, size=(batch, T))
  small = rng.choice([0, V - 1, V, 200, 255], size=(batch, T))
  u = rng.normal(size=(batch, 2, D)) * 10.0 ** rng.integers(-1, 4,
                                                             (batch, 2, 1))
  t = np.stack([u[:, 0], -u[:, 0], u[:, 1], -u[:, 1]], axis=1)
  return {'ids': jnp.asarray(ids, jnp.int32),
          'ids_u8': jnp.asarray(small, jnp.uint8),
          't': jnp.asarray(t, jnp.float32)}


def canary():
  """The record of the measured bug: ids (V, V - 1) with outputs (u, -u)."""
  u = np.array([1000.0, 0.0, 0.0])
  return {'ids': jnp.array([[V, V - 1, -V - 1, 0]], jnp.int32),
          'ids_u8': jnp.array([[V, V - 1, 200, 0]], jnp.uint8),
          't': jnp.asarray(np.stack([u, -u, u, -u])[None], jnp.float32)}


def per_leaf_clip(params, clip=1.0):
  return jax.tree.map(lambda _: clip, params)


@jax.jit
def _embed_both(params, batch):
  clip = per_leaf_clip(params)
  mask = jnp.ones(batch['ids'].shape[0], bool)
  return (dpjax.clipped_grad_sum(embed_loss, clip)(params, batch, mask),
          dpjax.clipped_grad_sum(embed_loss, clip, 'ghost',
                                 ghost_mode='bookkeeping')(params, batch,
                                                           mask),
          dpjax.clipped_grad_sum(embed_loss, clip, 'ghost',
                                 ghost_mode='two_pass')(params, batch, mask))


def _close(a, b, rtol=2e-5, atol=2e-6):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol,
                               atol=atol)


def test_every_gather_mode_follows_the_transposed_scatter():
  plan = dpjax.clipping.ghost_plan(embed_loss, embed_params(),
                                   adversarial_ids(0, B))
  assert all(v.startswith('ghost embedding') for v in plan.values()), plan
  batch = jax.tree.map(lambda c, r: jnp.concatenate([c, r]), canary(),
                       adversarial_ids(1, 2 * B))
  exact, *ghosts = _embed_both(embed_params(), batch)
  for ghost in ghosts:  # book-keeping, two-pass
    # Row 0: a dropped id counts nowhere, so the gradient is -u on the last
    # row and on row 0 (norm 1000 sqrt 2), not the 0 of clamping both
    # dropped ids onto the row of their opposite; the clip mode does clamp
    # (int32 ids: u - u on both rows; uint8: 200 and 5 clamp to one row).
    norms = {k: float(v[0]) for k, v in ghost.norms.items()}
    assert norms.pop('clip') == 0.0, norms
    for mode, norm in norms.items():
      np.testing.assert_allclose(norm, 1000.0 * np.sqrt(2), rtol=1e-6,
                                 err_msg=mode)
    # Output gradients reach 2e3 and cancel: float32 leaves about 1e-4.
    _close(ghost.norms, exact.norms, atol=2e-4)
    _close(ghost.grad_sum, exact.grad_sum, atol=2e-4)


# --- one record moves the clipped sum by at most C, every layer ---------------


def layers_loss(params, example):
  """Every ghost form on its own leaf: Dense with T = 1 (and a materialized
  bias), Gram (T^2 <= K N) and direct (T^2 > K N) forms, conv with one
  output position, Gram and direct, and the row gathers of ``embed_loss``."""
  x, seq, seq2 = example['x'], example['seq'], example['seq2']
  out = jnp.sum((x @ params['dense'] + params['bias']) * x[:2])
  out = out + jnp.sum((seq @ params['gram']) * seq[:, :1])
  out = out + jnp.sum((seq2 @ params['direct']) * seq2[:, :1])
  for name in ('conv1', 'conv_gram', 'conv_direct'):
    img = example[name]
    y = lax.conv_general_dilated(img[None], params[name], (1, 1), 'VALID',
                                 dimension_numbers=('NHWC', 'HWIO', 'NHWC'))
    out = out + jnp.sum(y * img[0, 0, 0])
  return out + embed_loss(params['embed'], example)


def layers_params(seed=0, dtype=jnp.float32):
  rng = np.random.default_rng(seed)
  shapes = {'dense': (3, 2), 'bias': (2,), 'gram': (4, 5), 'direct': (2, 3),
            'conv1': (2, 2, 1, 3), 'conv_gram': (2, 2, 2, 2),
            'conv_direct': (2, 2, 1, 2)}
  params = {k: jnp.asarray(rng.normal(size=s), dtype)
            for k, s in shapes.items()}
  params['embed'] = jax.tree.map(lambda x: x.astype(dtype), embed_params(seed))
  return params


def layers_batch(seed, batch, scale=1.0):
  rng = np.random.default_rng(seed)
  shapes = {'x': (3,), 'seq': (3, 4), 'seq2': (6, 2), 'conv1': (2, 2, 1),
            'conv_gram': (3, 3, 2), 'conv_direct': (4, 4, 1)}
  out = {k: jnp.asarray(rng.normal(size=(batch,) + s) * scale *
                        10.0 ** rng.integers(-2, 3, (batch,) + (1,) * len(s)),
                        jnp.float32) for k, s in shapes.items()}
  out.update(adversarial_ids(seed, batch))
  return out


def test_every_layer_has_its_ghost_form():
  plan = dpjax.clipping.ghost_plan(layers_loss, layers_params(),
                                   layers_batch(0, B))
  forms = {k.split("'")[1] if 'embed' not in k else k: v
           for k, v in plan.items()}
  assert forms['bias'].startswith('per-example (elementwise')
  assert forms['dense'] == 'ghost dense (T=1, ||a||^2 ||g||^2)'
  assert forms['gram'].startswith('ghost dense (Gram')
  assert forms['direct'].startswith('ghost dense (direct')
  assert forms['conv1'] == 'ghost conv (T=1, ||a||^2 ||g||^2)'
  assert forms['conv_gram'].startswith('ghost conv (Gram')
  assert forms['conv_direct'].startswith('ghost conv (direct')
  assert sum(v == 'ghost embedding (lookups summed per row)'
             for v in plan.values()) == len(EMBED_MODES) + 2


# The ghost forms every adversarial test runs (``ghost_mode``).
GHOST_MODES = ('bookkeeping', 'two_pass')
# Every clipped-sum variant: (method, ghost_mode).
VARIANTS = (('vmap', 'auto'),) + tuple(('ghost', m) for m in GHOST_MODES)


@jax.jit
def _add_one(params, batch, clip):
  """Per ghost mode: clipped sums without and with the last record (mask);
  and the vmap norms."""
  keep = jnp.arange(B + 1) < B
  exact = dpjax.clipped_grad_sum(layers_loss, clip)
  ones = jnp.ones(B + 1, bool)
  out = {}
  for mode in GHOST_MODES:
    fn = dpjax.clipped_grad_sum(layers_loss, clip, 'ghost', ghost_mode=mode)
    out[mode] = (fn(params, batch, keep).grad_sum.value,
                 fn(params, batch, ones))
  return out, exact(params, batch, ones).norms


def _group_norms(a, b):
  return jax.tree.map(lambda x, y: float(np.linalg.norm(
      np.asarray(x, np.float64) - np.asarray(y, np.float64))), a, b)


@hypothesis.settings(max_examples=10, deadline=None)
@hypothesis.given(seed=st.integers(0, 2**30), scale=st.floats(1e-2, 1e3),
                  clip=st.floats(0.05, 20.0))
def test_adding_one_record_moves_each_layer_by_at_most_c(seed, scale, clip):
  params = layers_params(seed % 7)
  batch = jax.tree.map(lambda x, y: jnp.concatenate([x, y]),
                       layers_batch(seed, B), layers_batch(seed + 1, 1, scale))
  out, norms = _add_one(params, batch, per_leaf_clip(params, clip))
  for mode, (without, with_) in out.items():
    moved = _group_norms(without, with_.grad_sum.value)
    for name, dist in jax.tree_util.tree_leaves_with_path(moved):
      path = (mode, jax.tree_util.keystr(name))
      # The record's contribution is its gradient clipped to C: it moves
      # the sum by exactly min(norm, C), norm the vmap path's.
      norm = dict(jax.tree_util.tree_leaves_with_path(norms))[name][B]
      assert dist <= clip * (1 + 1e-5), (path, dist, clip)
      np.testing.assert_allclose(dist, min(float(norm), clip), rtol=1e-4,
                                 atol=1e-6 * clip, err_msg=str(path))


# --- bf16: every record's contribution stays within C -------------------------


def _contributions(params, batch, clip, method, mode='auto'):
  """Each record's clipped contribution: the clipped sum of a batch of one."""
  fn = dpjax.clipped_grad_sum(bf16_loss, clip, method, ghost_mode=mode)
  one = lambda ex: fn(params, jax.tree.map(lambda x: x[None], ex),
                      jnp.ones(1, bool)).grad_sum.value
  return jax.vmap(one)(batch)


def bf16_loss(params, example):
  """The layers computed in bf16 (a view of float32 weights, or bf16
  weights), from float32 inputs."""
  half = lambda t: jax.tree.map(lambda x: x.astype(jnp.bfloat16)
                                if jnp.issubdtype(x.dtype, jnp.floating)
                                else x, t)
  return layers_loss(half(params), half(example)).astype(jnp.float32)


@jax.jit
def _all_contributions(params32, params16, batch, clip):
  return {'bf16 weights': [_contributions(params16, batch, clip, *v)
                           for v in VARIANTS],
          'bf16 view': [_contributions(params32, batch, clip, *v)
                        for v in VARIANTS]}


@pytest.mark.parametrize('clip', [0.37, 3.3])
def test_bf16_contributions_stay_within_c(clip):
  params32 = layers_params(1)
  params16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params32)
  batch = layers_batch(2, 64, 3.0)
  clips = per_leaf_clip(params32, clip)
  out = _all_contributions(params32, params16, batch, clips)
  for variant, by_method in out.items():
    for method, sums in zip(VARIANTS, by_method):
      for path, leaf in jax.tree_util.tree_leaves_with_path(sums):
        where = (variant, method, jax.tree_util.keystr(path))
        assert leaf.dtype == jnp.float32, where  # never rounded to bf16
        x = np.asarray(leaf, np.float64).reshape(leaf.shape[0], -1)
        norms = np.linalg.norm(x, axis=1)
        assert np.max(norms) <= clip * (1 + 1e-6), (where,
                                                    np.max(norms) / clip)
        assert np.max(norms) >= 0.95 * clip, where  # some records clipped


@jax.jit
def _bf16_add_one(params16, batch, clip):
  """Every method's clipped sums of a bf16 model without and with the last
  record, and the sharded sum (one device) with it."""
  n = batch['x'].shape[0]
  keep, ones = jnp.arange(n) < n - 1, jnp.ones(n, bool)
  mesh = jax.make_mesh((1,), ('data',))
  out = {}
  for method, mode in VARIANTS:
    fn = dpjax.clipped_grad_sum(bf16_loss, clip, method, ghost_mode=mode)
    name = f'{method} {mode}'
    out[name] = (fn(params16, batch, keep).grad_sum.value,
                 fn(params16, batch, ones).grad_sum.value)
    sharded = dpjax.clipping.sharded_clipped_grad_sum(
        bf16_loss, clip, method, mesh=mesh, ghost_mode=mode)
    out[name + ' sharded'] = (sharded(params16, batch, keep).grad_sum.value,
                              out[name][1])
  return out


def test_bf16_clipped_sums_are_float32_and_move_by_at_most_c():
  # 64 records clipped to C = 1 sum to about 64 per table: a bf16 ulp there
  # (0.25 to 0.5) is far above what one record may move the sum.
  params16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), layers_params(3))
  batch = layers_batch(4, 64, 30.0)
  clip = 1.0
  out = _bf16_add_one(params16, batch, per_leaf_clip(params16, clip))
  for method, (without, with_) in out.items():
    for path, x in jax.tree_util.tree_leaves_with_path(without):
      assert x.dtype == jnp.float32, (method, jax.tree_util.keystr(path))
    moved = _group_norms(without, with_)
    for path, dist in jax.tree_util.tree_leaves_with_path(moved):
      assert dist <= clip * (1 + 1e-5), (method, jax.tree_util.keystr(path),
                                         dist)


# --- cancelling positions: the Gram form's rounding is certified -------------


def cancel_loss(params, example):
  """Dense Gram (T = 2, 4 x 4), Dense direct (T = 2, 1 x 2) and conv Gram
  (two output positions of one 1 x 1 patch channel) on cancelling records:
  the output gradient is the record's ``t`` (the loss is linear)."""
  seq, t = example['seq'], example['t']
  out = jnp.sum((seq @ params['gram']) * t)
  out = out + jnp.sum((seq[:, :1] @ params['direct']) * t[:, :2])
  img = seq[None, :, None, :]  # NHWC: H = T = 2 positions, C = 4
  y = lax.conv_general_dilated(img, params['conv'], (1, 1), 'VALID',
                               dimension_numbers=('NHWC', 'HWIO', 'NHWC'))
  return out + jnp.sum(y[0, :, 0] * t)


def cancel_batch():
  """a_1 = a_2 = A e_1, g_1 = big e_1, g_2 = -big e_1 + d e_2: the exact
  gradient has norm A d, the Gram terms are A^2 big^2 and cancel."""
  rows = [(a, big, d) for a in (1.0, 10.0, 100.0) for big in (1e4, 1e5, 1e6)
          for d in (1.0, 100.0)]
  seq = np.zeros((len(rows), 2, 4), np.float32)
  t = np.zeros((len(rows), 2, 4), np.float32)
  for i, (a, big, d) in enumerate(rows):
    seq[i, :, 0] = a
    t[i, 0, 0], t[i, 1, 0], t[i, 1, 1] = big, -big, d
  return {'seq': seq, 't': t}


@jax.jit
def _cancel_contributions(params, batch, clip):
  out = {}
  for mode in GHOST_MODES:
    fn = dpjax.clipped_grad_sum(cancel_loss, clip, 'ghost', ghost_mode=mode)
    one = lambda ex, fn=fn: fn(params, jax.tree.map(lambda x: x[None], ex),
                               jnp.ones(1, bool))
    res = jax.vmap(one)(batch)
    out[mode] = (res.grad_sum.value,
                 jax.tree.map(lambda n: n[:, 0], res.norms))
  return out


def test_cancelling_positions_stay_within_c():
  params = {'gram': jnp.ones((4, 4)), 'direct': jnp.ones((1, 2)),
            'conv': jnp.ones((1, 1, 4, 4))}
  plan = dpjax.clipping.ghost_plan(cancel_loss, params, cancel_batch())
  assert plan["['gram']"] == 'ghost dense (Gram, T=2)', plan
  assert plan["['direct']"].startswith('ghost dense (direct, T=2'), plan
  assert plan["['conv']"] == 'ghost conv (Gram, T=2)', plan
  batch = cancel_batch()
  clip = 1.0
  out = _cancel_contributions(params, batch, {k: clip for k in params})
  seq, t = (batch[k].astype(np.float64) for k in ('seq', 't'))
  exact = {'gram': np.einsum('btk,btn->bkn', seq, t),
           'direct': np.einsum('bt,btn->bn', seq[:, :, 0], t[:, :, :2]),
           'conv': np.einsum('btk,btn->bkn', seq, t)}
  for (sums, norms), (name, g) in itertools.product(out.values(),
                                                    exact.items()):
    true = np.linalg.norm(g.reshape(len(g), -1), axis=1)
    # The ghost norm bounds the exact one (float32 Gram can give 0 for
    # norm A d; the certified bound never falls below it) ...
    ghost = np.asarray(norms[name], np.float64)
    assert np.all(ghost >= true * (1 - 1e-6)), (name, ghost, true)
    # ... so each record's clipped contribution stays within C.
    moved = np.linalg.norm(np.asarray(sums[name], np.float64).reshape(
        len(g), -1), axis=1)
    assert np.max(moved) <= clip * (1 + 1e-5), (name, moved)
