"""Ghost norms of a shared leaf: one parameter with several tapped uses.

A decoder language model ties its input embedding E [V, D] to its output
projection (``logits = h @ E.T``, Press & Wolf 2017, "Using the Output
Embedding to Improve Language Models"): the leaf's per-example gradient is
the sum of its uses' gradients, ``G = sum_u G_u``, and its norm is not a
function of the per-use norms (``||G_1 + G_2||`` lies anywhere between
``| ||G_1|| - ||G_2|| |`` and their sum). Here the norm comes from the
factors each use records, as the single-use rules of ``_ghost_rules.py`` do:

* Gram form (Li et al. 2022, eq. 4, over all uses' positions at once). When
  every use writes its gradient as ``G_u = sum_t x_t y_t^T`` in one layout of
  the leaf as rows x columns (R x C), ``||G||^2 = sum_{u,v} sum_{t,s} (x_t .
  x_s)(y_t . y_s)``: the cross terms ``<G_u, G_v>`` are the off-diagonal
  blocks. A Dense use ``a @ W`` (no batch dimension) has x = a, y = g; the
  transposed use ``h @ E.T`` has x = g (a row of the logits' gradient per
  position, length V) and y = h; a row lookup has x = the one-hot row r_t and
  y = the lookup's gradient summed per row (``_ghost_rules._gather_per_row``),
  so its x-dots are exact: ``e_r . x_s = x_s[r]``, ``e_r . e_q = [r = q]``.
  For the tied embedding the cross term is ``sum_{t,s} g_s[r_t] (h_s . y_t)``.
  The bound is ``_ghost_norms.gram_bound`` with zero error on exact entries.
* Direct form: each use's per-example gradient transposed to the leaf and
  summed, ``[B, *leaf]`` (what the fallback materializes, from the same
  factors). Certified as ``_ghost_norms.direct_bound``: an entry of a dot
  use is ``_ghost_norms.outer_sum``'s (depth d_u ~ 2 sqrt(T_u)), a lookup's
  per-row sum is its gradient, and U - 1 additions join the uses, so the
  error is at most ``gamma(max_u d_u + U - 1) sum_u S_u``.

Each leaf takes the form that needs less memory per example, Gram iff
``(sum_u T_u)^2 <= R C`` (``layer_norms=`` forces either), the direct form
under a coordinate mask or when the uses share no R x C layout (a batched
dot, a view that permutes the leaf otherwise). A conv kernel used twice is
materialized by the plan. Book-keeping is the sum of the uses'
book-keeping sums (Bu et al. 2023, Alg. 1). With one use everything here is
the single-use rule of ``_ghost_rules.py``.

Example:
  >>> loss = lambda w, x: jnp.sum(jnp.tanh(jnp.tanh(x @ w) @ w))
  >>> w, x = jnp.eye(3), jnp.ones((2, 3))
  >>> plan = _ghost_plan.make_plan(loss, w, x, 'error')
  >>> describe([plan.taps[p] for p in plan.leaf_taps[0]], w.shape)
  'ghost shared, 2 uses (Gram, T=2)'
"""
# pylint: disable=protected-access

import math

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

from dpjax import _numerics
from dpjax.clipping import _ghost_norms
from dpjax.clipping import _ghost_plan
from dpjax.clipping import _ghost_rules

_P = jex.primitives


def _index_view(chain, shape):
  """Leaf entry indices [view shape]: where each view entry comes from, or
  None for a view step this does not follow."""
  x = np.arange(math.prod(shape)).reshape(shape)
  for primitive, params in chain:
    if primitive is _P.reshape_p:
      if params.get('dimensions') is not None:
        x = x.transpose(params['dimensions'])
      x = x.reshape(params['new_sizes'])
    elif primitive is _P.transpose_p:
      x = x.transpose(params['permutation'])
    elif primitive is _P.squeeze_p:
      x = x.squeeze(tuple(params['dimensions']))
    elif primitive is _P.broadcast_in_dim_p:  # size-preserving: unit axes
      x = x.reshape(params['shape'])
    elif primitive not in (_P.convert_element_type_p, _P.copy_p,
                           _P.sharding_constraint_p):
      return None
  return x


def _split(tap: _ghost_plan.Tap, shape) -> tuple[str, int] | None:
  """(which factor holds the leaf's rows: 'a', 'g' or 'rows', R) when the
  use's gradient is ``sum_t x_t y_t^T`` in the leaf's row-major R x C
  layout, else None."""
  idx = _index_view(tap.chain, shape)
  if idx is None:
    return None
  flat = np.arange(idx.size)
  if tap.kind == 'gather':
    return ('rows', idx.shape[0]) if np.array_equal(idx.ravel(), flat) else None
  h, _, k, n = _ghost_rules._dims(tap)
  if tap.kind != 'dot' or h != 1:
    return None
  _, vb, vc, vfree = _ghost_rules._dot_view_dims(tap)
  canon = idx.transpose((*vb, *vc, *vfree)).reshape(k, n)
  if np.array_equal(canon.ravel(), flat):
    return 'a', k
  if np.array_equal(canon.T.ravel(), flat):
    return 'g', n
  return None


def _splits(taps, shape):
  """Per use ``_split``, or None unless all uses share one R."""
  splits = [_split(tap, shape) for tap in taps]
  if any(s is None for s in splits) or len({s[1] for s in splits}) != 1:
    return None
  return splits


def _steps(taps) -> list[int]:
  return [_ghost_rules._dims(t)[1] if t.kind != 'gather' else
          math.prod(t.eqn.invars[1].aval.shape[:-1]) for t in taps]


def _use_gram(taps, shape, masked: bool) -> bool:
  """Gram form iff possible and it needs less memory per example than the
  direct form (or ``layer_norms='ghost'``)."""
  forms = {t.norm_form for t in taps}
  if masked or 'per_example' in forms or _splits(taps, shape) is None:
    return False
  return 'ghost' in forms or sum(_steps(taps)) ** 2 <= math.prod(shape)


def _factors(tap, split, a, g):
  """(x [B, T, R] or one-hot row ids [B, T], first lookups [B, T] or None,
  y [B, T, C]) in float32."""
  if split[0] == 'rows':
    rows, first, per_row = _ghost_rules._gather_per_row(tap, a, g)
    return rows, first, jnp.where(first[..., None], per_row, 0.0)
  big_a, big_g, _ = _ghost_rules._dot_factors(tap, a, g, None)
  big_a, big_g = (x[:, 0].astype(jnp.float32) for x in (big_a, big_g))
  return (big_a, None, big_g) if split[0] == 'a' else (big_g, None, big_a)


def _x_gram(x_u, first_u, x_v, first_v):
  """(x_t . x_s [B, T_u, T_v], rounding depth) for dense or one-hot row
  factors (a one-hot row's dots are exact: depth 0)."""
  if first_u is None and first_v is None:
    return _ghost_norms.row_dots(x_u, x_v)
  if first_u is not None and first_v is not None:
    same = x_u[:, :, None] == x_v[:, None, :]
    both = first_u[:, :, None] & first_v[:, None, :]
    return (same & both).astype(jnp.float32), 0
  if first_u is not None:
    return jnp.swapaxes(_x_gram(x_v, first_v, x_u, first_u)[0], 1, 2), 0
  ids = jnp.broadcast_to(x_v[:, None, :], x_u.shape[:2] + x_v.shape[1:])
  return jnp.where(first_v[:, None, :],
                   jnp.take_along_axis(x_u, ids, axis=2), 0.0), 0


def _gram_sq_norm(taps, shape, a_list, g_list):
  """Certified ||sum_u G_u||^2 from all uses' factors (module doc)."""
  splits = _splits(taps, shape)
  facs = [_factors(t, s, a, g)
          for t, s, a, g in zip(taps, splits, a_list, g_list)]
  steps = [f[2].shape[1] for f in facs]
  aa_rows, gg_rows, gamma_a = [], [], np.zeros((sum(steps),) * 2)
  starts, depth_g = np.cumsum([0] + steps), 0
  for u, (x_u, f_u, y_u) in enumerate(facs):
    aa_row, gg_row = [], []
    for v, (x_v, f_v, y_v) in enumerate(facs):
      aa, depth = _x_gram(x_u, f_u, x_v, f_v)
      gg, depth_g = _ghost_norms.row_dots(y_u, y_v)
      aa_row.append(aa)
      gg_row.append(gg)
      gamma_a[starts[u]:starts[u + 1], starts[v]:starts[v + 1]] = (
          _ghost_norms.gamma(depth))
    aa_rows.append(jnp.concatenate(aa_row, axis=2))
    gg_rows.append(jnp.concatenate(gg_row, axis=2))
  aa = jnp.concatenate(aa_rows, axis=1)[:, None]
  gg = jnp.concatenate(gg_rows, axis=1)[:, None]
  alpha = jnp.concatenate(
      [jnp.where(f, 1.0, 0.0) if f is not None else _ghost_norms._row_norms(x)
       for x, f, _ in facs], axis=1)[:, None]
  beta = jnp.concatenate([_ghost_norms._row_norms(y) for _, _, y in facs],
                         axis=1)[:, None]
  return _ghost_norms.gram_bound(aa, gg, alpha, beta, gamma_a,
                                 _ghost_norms.gamma(depth_g))


def _leaf_grad(tap, shape, view_grads):
  """Per-example view gradients [B, *view] transposed to the leaf."""
  struct = jax.ShapeDtypeStruct(shape, view_grads.dtype)
  transpose = jax.linear_transpose(
      lambda p: _ghost_plan.replay(tap.chain, p, keep_dtype=True), struct)
  return jax.vmap(lambda v: transpose(v)[0])(view_grads)


def _direct(taps, shape, a_list, g_list):
  """(per-example leaf gradients [B, *leaf] f32, sum_u S_u [B], the most
  roundings behind an entry)."""
  per, terms, depths = None, 0.0, []
  for tap, a, g in zip(taps, a_list, g_list):
    if tap.kind == 'gather':  # its per-row sums are the gradient (exact)
      rows, first, per_row = _ghost_rules._gather_per_row(tap, a, g)
      upd = jnp.where(first[..., None], per_row, 0.0)
      view = tap.eqn.invars[0].aval.shape
      b = jnp.arange(upd.shape[0])[:, None]
      grads = jnp.zeros((upd.shape[0], view[0], upd.shape[-1]), jnp.float32)
      grads = grads.at[b, rows].add(upd).reshape((-1, *view))
      term, depth = _numerics.l2_norm(upd, (1, 2)), 0
    else:  # the canonical [B, H, K, N] sum in the view's layout
      big_a, big_g, _ = _ghost_rules._dot_factors(tap, a, g, None)
      canon, depth = _ghost_norms.outer_sum(big_a, big_g)
      _, vb, vc, vfree = _ghost_rules._dot_view_dims(tap)
      order = (*vb, *vc, *vfree)
      view = tap.eqn.invars[tap.operand].aval.shape
      grads = canon.reshape((-1, *[view[d] for d in order]))
      grads = jnp.transpose(grads, (0, *(1 + np.argsort(order))))
      alpha = _numerics.l2_norm(big_a, -1)  # overflow-safe (``leaf_norm``)
      beta = _numerics.l2_norm(big_g, -1)
      term = _numerics.l2_norm(jnp.sum(alpha * beta, axis=2), 1)
    grads = _leaf_grad(tap, shape, grads)
    per = grads if per is None else per + grads
    terms, depths = terms + term, depths + [depth]
  return per, terms, max(depths) + len(taps) - 1


def _direct_masked(taps, shape, a_list, g_list, mask):
  """(M * per [B, *leaf], the certified bound on its distance from M * G
  [B]) of the direct form."""
  per, terms, steps = _direct(taps, shape, a_list, g_list)
  mask_max = 1.0
  if mask is not None:
    per = per * mask
    mask_max = jnp.max(jnp.abs(mask))
  return per, 2.0 * _ghost_norms.gamma(steps) * mask_max * terms


def _direct_sq_norm(taps, shape, a_list, g_list, mask):
  per, margin = _direct_masked(taps, shape, a_list, g_list, mask)
  n2 = jnp.sum(jnp.square(per), axis=tuple(range(1, per.ndim)))
  return jnp.square(jnp.sqrt(n2) + margin)


def leaf_sq_norm(taps, shape, a_list, g_list, mask) -> jax.Array:
  """Certified squared per-example norms [B] f32 of a ghost leaf's gradients.

  Args:
    taps: the leaf's taps, one per use.
    shape: the leaf's shape.
    a_list, g_list: per use, the recorded data operands and output grads.
    mask: None, or the coordinate mask (f32): for one use replayed onto its
      view, for several in the leaf's own layout.
  """
  if len(taps) == 1:
    return _ghost_rules.tap_sq_norm(taps[0], a_list[0], g_list[0], mask)
  if _use_gram(taps, shape, mask is not None):
    return _gram_sq_norm(taps, shape, a_list, g_list)
  return _direct_sq_norm(taps, shape, a_list, g_list, mask)


def leaf_norm(taps, shape, a_list, g_list, mask) -> jax.Array:
  """Per-example norms [B] f32, overflow-safe (``_ghost_rules.tap_norm``).

  For several uses: the root of ``leaf_sq_norm`` where that is finite, else
  the direct form's norm (``_numerics.l2_norm``) plus its margin, finite
  unless a single product a_tk g_tn overflows.
  """
  if len(taps) == 1:
    return _ghost_rules.tap_norm(taps[0], a_list[0], g_list[0], mask)
  sq = leaf_sq_norm(taps, shape, a_list, g_list, mask)
  per, margin = _direct_masked(taps, shape, a_list, g_list, mask)
  safe = _numerics.l2_norm(per, tuple(range(1, per.ndim))) + margin
  return jnp.where(jnp.isfinite(sq), jnp.sqrt(sq), safe)


def leaf_weighted_sum(taps, param, a_list, g_list, w, valid) -> jax.Array:
  """Book-keeping ``sum_i w_i G_i``: the sum of the uses' sums
  (``_ghost_rules.tap_weighted_sum``), in ``_numerics.wide`` dtype."""
  total = None
  for tap, a, g in zip(taps, a_list, g_list):
    part = _ghost_rules.tap_weighted_sum(tap, param, a, g, w, valid)
    total = part if total is None else total + part
  return total


def describe(taps, shape) -> str:
  """The form ``leaf_sq_norm`` takes, as ``ghost_plan`` says it."""
  if len(taps) == 1:
    return _ghost_rules.describe(taps[0])
  t = sum(_steps(taps))
  form = (f'Gram, T={t}' if _use_gram(taps, shape, masked=False) else
          f'direct, {math.prod(shape)} per example')
  return f'ghost shared, {len(taps)} uses ({form})'
