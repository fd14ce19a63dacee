"""Ghost clipping of decoder language models: tied (shared) parameters.

A GPT-style decoder (``experiments.bench.ghost_margin.TiedDecoder``: tied
input / output embedding, learned positions, LayerNorm, causal attention)
against the vmap path, under both ghost modes, and shared leaves whose uses
cancel: their norm is the norm of the sum (``_ghost_shared.py``), a
certified upper bound, never the per-use triangle bound.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax.clipping import _ghost_plan
from experiments.bench import ghost_margin

B, T = 3, 16
TABLE = "['params']['Embed_0']['embedding']"


def decoder():
  model, params, tokens = ghost_margin.setup(
      T, B, max_len=T, vocab=32, width=16, blocks=1, heads=2)
  return ghost_margin.example_loss(model), params, tokens


def run_all(loss, params, batch, clip, cmask=None, **kwargs):
  """(vmap, book-keeping, two-pass) results of one jitted call (the clip
  bound an argument: one program per coordinate mask or none)."""
  mask = jnp.ones(jax.tree.leaves(batch)[0].shape[0], bool)
  kinds = ({}, dict(method='ghost', ghost_mode='bookkeeping', **kwargs),
           dict(method='ghost', ghost_mode='two_pass', **kwargs))

  def run(p, x, m, clip):
    return [dpjax.clipped_grad_sum(loss, clip, **k)(p, x, mask, m)
            for k in kinds]

  return jax.jit(run)(params, batch, cmask, jnp.float32(clip))


def flat(tree):
  return np.concatenate([np.ravel(x) for x in jax.tree.leaves(tree)]).astype(
      np.float64)


def test_tied_embedding_is_ghost_and_fallback_error_accepts_it():
  loss, params, tokens = decoder()
  plan = dpjax.clipping.ghost_plan(loss, params, tokens)
  assert plan[TABLE] == 'ghost shared, 2 uses (direct, 512 per example)'
  assert plan["['params']['pos']"].startswith('per-example (elementwise')
  forced = dpjax.clipping.ghost_plan(loss, params, tokens, layer_norms='ghost')
  assert forced[TABLE] == 'ghost shared, 2 uses (Gram, T=32)'
  _ghost_plan.make_plan(loss, params, tokens, 'error')  # no ValueError


@pytest.mark.parametrize('layer_norms', ['auto', 'ghost'])
def test_tied_decoder_matches_vmap_with_certified_norms(layer_norms):
  loss, params, tokens = decoder()
  cmask = jax.tree.map(lambda p: jnp.asarray(
      np.random.default_rng(0).random(p.shape) < 0.7, p.dtype), params)
  unclipped = run_all(loss, params, tokens, 1e9, layer_norms=layer_norms)
  clip = float(np.median(unclipped[0].norms))  # some records clipped
  for m, clip in ((None, 1e9), (None, clip), (cmask, clip)):
    vmap, *ghosts = run_all(loss, params, tokens, clip, m,
                            layer_norms=layer_norms)
    for ghost in ghosts:
      rel = np.asarray(ghost.norms) / np.asarray(vmap.norms) - 1
      # Upper bounds: below vmap's only by vmap's own float32 rounding.
      assert np.all(rel >= -1e-6) and np.all(rel <= 1e-3), rel
      want = flat(vmap.grad_sum.value)
      diff = np.linalg.norm(flat(ghost.grad_sum.value) - want)
      assert diff <= 1e-3 * np.linalg.norm(want)


def cancelling_cases():
  """Shared leaves whose uses' gradients cancel in pairs, G_1 = -G_2, and
  the sum of the uses' norms per example (the triangle bound)."""
  rng = np.random.default_rng(1)
  c = rng.normal(size=4).astype(np.float32)

  def tied(p, ids):  # lookup e[r_t] . c, minus the logit (-c) e^T at r_t
    h = -jnp.asarray(c) * (ids >= 0)[:, None].astype(jnp.float32)
    logits = h @ p['e'].T
    return (jnp.sum(p['e'][ids] @ jnp.asarray(c))
            + jnp.sum(jnp.take_along_axis(logits, ids[:, None], 1)))

  def dense(p, x):  # x W and (-x) W, then x W^T against its negation
    return (jnp.sum((x @ p['w']) * c) + jnp.sum((-x @ p['w']) * c)
            + jnp.sum((x @ p['w'].T) * c) - jnp.sum((x @ p['w'].T) * c))

  ids = rng.integers(0, 6, (B, 5)).astype(np.int32)
  counts = np.stack([np.bincount(row, minlength=6) for row in ids])
  x = (rng.normal(size=(B, 5, 4)) * 30).astype(np.float32)
  sums = np.linalg.norm(x.astype(np.float64).sum(1), axis=1)
  return {
      'tied': (tied, {'e': jnp.ones((6, 4))}, jnp.asarray(ids),
               2 * np.linalg.norm(c) * np.linalg.norm(counts, axis=1)),
      'dense': (dense, {'w': jnp.ones((4, 4))}, jnp.asarray(x),
                4 * np.linalg.norm(c) * sums)}


@pytest.mark.parametrize('name', cancelling_cases())
def test_cancelling_uses_give_a_small_certified_norm_not_the_triangle_bound(
    name):
  loss, params, batch, triangle = cancelling_cases()[name]
  assert np.all(triangle > 1.0)
  for layer_norms, share in (('ghost', 1e-2), ('per_example', 1e-5)):
    vmap, *ghosts = run_all(loss, params, batch, 1.0,
                            layer_norms=layer_norms)
    np.testing.assert_allclose(flat(vmap.grad_sum.value), 0, atol=1e-5)
    for ghost in ghosts:
      norms = np.asarray(ghost.norms)
      assert np.all(np.isfinite(norms)) and np.all(norms >= 0)
      assert np.all(norms <= share * triangle), (norms, triangle)
      np.testing.assert_allclose(flat(ghost.grad_sum.value), 0, atol=1e-3)


def test_nearly_cancelling_shared_dense_norm_is_a_certified_upper_bound():
  """G = x^T c - x^T e, e = c + d: float32 sums lose ||x^T d||; the bound
  does not."""
  rng = np.random.default_rng(2)
  x = rng.normal(size=(B, 6, 5)).astype(np.float32) * 100
  c = rng.normal(size=(B, 6, 3)).astype(np.float32)
  e = c + rng.normal(size=(B, 6, 3)).astype(np.float32) * 1e-4

  def loss(p, ex):
    xs, cs, es = ex
    return jnp.sum((xs @ p['w']) * cs) + jnp.sum((-xs @ p['w']) * es)

  # The exact per-example gradient x^T (c - e) of these float32 inputs.
  x64, d64 = x.astype(np.float64), c.astype(np.float64) - e
  exact = np.linalg.norm(np.einsum('btk,btn->bkn', x64, d64), axis=(1, 2))
  each = np.linalg.norm(np.einsum('btk,btn->bkn', x64, c), axis=(1, 2))
  params = {'w': jnp.ones((5, 3))}
  batch = tuple(jnp.asarray(v) for v in (x, c, e))
  # Book-keeping's norms are certified: the Gram form's margin scales with
  # the uses' norms, the direct form's with the norm. Two-pass gets the
  # shared leaf's per-example gradient, the vector it adds, and its norm,
  # as vmap does: float32 rounding of that vector, not a bound on it.
  for layer_norms, most in (('ghost', 1e-2 * each),
                            ('per_example', 1.1 * exact)):
    vmap, ghost, two = run_all(loss, params, batch, 1.0,
                               layer_norms=layer_norms)
    norms = np.asarray(ghost.norms, np.float64)
    assert np.all(norms >= exact), (layer_norms, norms / exact - 1)
    assert np.all(norms <= most), (layer_norms, norms / exact - 1)
    np.testing.assert_allclose(two.norms, vmap.norms, rtol=1e-5)


def test_table_looked_up_twice_matches_vmap():
  """Two lookups of one table: one-hot factors on both sides, exact dots."""
  def loss(p, ids):
    return (jnp.sum(jnp.tanh(p['e'][ids[0]] @ jnp.arange(4.0)))
            + jnp.sum(jnp.sin(p['e'][ids[1]])))

  params = {'e': jnp.asarray(np.random.default_rng(3).normal(size=(7, 4)),
                             jnp.float32)}
  ids = jnp.asarray(np.random.default_rng(4).integers(0, 7, (B, 2, 6)),
                    jnp.int32)
  for layer_norms in ('ghost', 'per_example'):
    vmap, *ghosts = run_all(loss, params, ids, 1.0, layer_norms=layer_norms)
    for ghost in ghosts:
      rel = np.asarray(ghost.norms) / np.asarray(vmap.norms) - 1
      assert np.all(rel >= -1e-6) and np.all(rel <= 1e-4), rel
      np.testing.assert_allclose(ghost.grad_sum.value['e'],
                                 vmap.grad_sum.value['e'], atol=1e-5)


def test_shared_leaf_norm_past_float32_squares_is_finite_and_certified():
  """||G||^2 overflows float32 (||G|| ~ 3e19): the norm stays finite."""
  def loss(p, x):
    return jnp.sum((x @ p['w']) @ p['w'])

  rng = np.random.default_rng(5)
  params = {'w': jnp.asarray(rng.normal(size=(4, 4)), jnp.float32)}
  x = jnp.asarray(rng.normal(size=(B, 5, 4)) * 1e18, jnp.float32)
  vmap, *ghosts = run_all(loss, params, x, 1.0)
  assert np.all(np.isfinite(vmap.norms)) and np.all(vmap.norms > 1e19)
  for ghost in ghosts:
    rel = np.asarray(ghost.norms, np.float64) / np.asarray(vmap.norms) - 1
    assert np.all(rel >= -1e-6) and np.all(rel <= 1e-4), rel
