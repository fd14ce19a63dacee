"""Ghost clipping's per-layer rules: one tapped layer's norms and clipped sum.

This module holds, for one tapped layer (a ``Tap`` of ``_ghost_plan.py``), the
squared per-example gradient norms and the book-keeping sum ``sum_i c_i G_i``,
both computed from the layer's input ``a`` and the gradient ``g`` w.r.t. its
output (Goodfellow 2015; Li et al. 2022, "Large Language Models Can Be Strong
Differentially Private Learners", Sec. 4, eq. 4; Bu et al. 2023,
"Differentially Private Optimization on Large Model at Small Cost", Sec. 3.2
and Alg. 1), without forming the per-example gradients ``G_i`` unless that is
the cheaper form. For a Dense layer ``y_t = a_t W`` (positions t = 1..T of one
example):

* per-example gradient ``G_i = sum_t a_t^T g_t``;
* norm, Gram form (Li et al. eq. 4): ``||G_i||^2 = sum_{t,s} (a_t . a_s)
  (g_t . g_s)``, for T = 1 simply ``||a||^2 ||g||^2``; T^2 floats per example.
  The direct form builds ``G_i`` (d_in d_out floats per example). Each layer
  takes the one that needs less memory, Gram iff T^2 <= d_in d_out (the
  mixed ghost norm of Bu et al. 2022 and 2023, Sec. 3.2; ``layer_norms=``
  overrides it). A coordinate mask M (random
  sparsification) needs ``||M * G_i||``: ``(a^2)^T M (g^2)`` for T = 1, else
  the direct form;
* book-keeping: ``sum_i c_i G_i = einsum('bti,b,bto->io', a, c, g)``, the
  ordinary weight gradient with ``g`` rescaled per example.

Conv layers are Dense layers on patches (T = output positions, d_in = C_in *
prod(kernel)): the Gram form accumulates the patch Gram matrix over kernel
offsets from strided slices of the input (the im2col matrix of
``lax.conv_general_dilated_patches`` is never built), the direct form is a
per-example filter gradient, and book-keeping is one filter-gradient
convolution. An embedding lookup (a row ``gather``) has ``||G_i||^2 =
sum_r ||sum_{t: r_t = r} g_t||^2`` over the lookups whose gradient lands in
a row r_t (repeated rows accumulate before the norm), and a scatter-add of
the same lookups as book-keeping. Where a
lookup's gradient lands follows the gather's transposed scatter, not its
forward (``_gather_rows``): an out-of-range id is clamped both ways in clip
mode, and dropped in fill mode and by plain ``table[ids]``, whose forward
clamps it while its scatter drops it.

Precision: norms, clip weights and book-keeping sums are computed in float32
whatever the dtype of a leaf or of its view in the layer (bf16, f16), and
the sum is returned in float32 (``_numerics.wide`` of the leaf's dtype).
Every contraction asks for ``precision=HIGHEST`` (no TF32 on GPUs). The
multi-position Dense and conv norms are certified upper bounds under float32
rounding (``_ghost_norms.py``: the Gram form can cancel to 0 for a large
gradient). The other rules cannot cancel: one position is one outer product
(norm |a||g|, a product of sums of squares), a bias is materialized and its
norm is that of the gradient summed, and an embedding's norm is that of the
per-row sums its book-keeping scatters (``_gather_per_row``).

Overflow: the squared forms overflow float32 for a finite gradient of norm
above about 1.8e19 (or when one factor's square does, e.g. ||a||^2 for
inputs of magnitude 1e20). ``tap_norm`` then gives the norm from factors
divided by per-example powers of two (exact), and the clipping rule uses it
wherever the plain sum of squares is not finite (``_per_example``).

Example:
  >>> w = jnp.ones((4, 5))
  >>> loss = lambda w, x: jnp.sum(x @ w)  # x: [T, 4], T = 3 positions
  >>> plan = _ghost_plan.make_plan(loss, w, jnp.ones((2, 3, 4)), 'per_example')
  >>> tap, = plan.taps.values()
  >>> describe(tap), _dims(tap)  # (H, T, K, N)
  ('ghost dense (Gram, T=3)', (1, 3, 4, 5))
"""

import math

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from dpjax import _numerics
from dpjax.clipping import _ghost_norms
from dpjax.clipping import _ghost_plan

_HIGHEST = _ghost_norms.HIGHEST
# The ``precision`` parameter of a bound conv / dot primitive.
_HIGHEST_PAIR = (_HIGHEST, _HIGHEST)


def _dims(tap: _ghost_plan.Tap) -> tuple[int, int, int, int]:
  """(H, T, K, N) of the per-example factorization of a dot or conv tap."""
  eqn = tap.eqn
  a_shape = eqn.invars[tap.data_operand].aval.shape
  v_shape = eqn.invars[tap.operand].aval.shape
  if tap.kind == 'dot':
    ac, ab, vc, vb = _dot_dims(tap)
    afree = [d for d in range(len(a_shape)) if d not in ac and d not in ab]
    vfree = [d for d in range(len(v_shape)) if d not in vc and d not in vb]
    return (math.prod(a_shape[d] for d in ab),
            math.prod(a_shape[d] for d in afree),
            math.prod(a_shape[d] for d in ac),
            math.prod(v_shape[d] for d in vfree))
  lhs_spec, rhs_spec, out_spec = eqn.params['dimension_numbers']
  out_shape = eqn.outvars[0].aval.shape
  return (1, math.prod(out_shape[d] for d in (out_spec[0], *out_spec[2:])),
          math.prod(v_shape[d] for d in rhs_spec[1:]), v_shape[rhs_spec[0]])


def _dot_dims(tap: _ghost_plan.Tap):
  (lc, rc), (lb, rb) = tap.eqn.params['dimension_numbers']
  lc, rc, lb, rb = (tuple(int(d) for d in x) for x in (lc, rc, lb, rb))
  return (lc, lb, rc, rb) if tap.operand == 1 else (rc, rb, lc, lb)


def _use_gram(tap: _ghost_plan.Tap, masked: bool) -> bool:
  """Gram (ghost) form iff it needs less memory per example than the direct
  form (instantiated per-example gradient), unless ``tap.norm_form`` forces.

  Cost model after Bu et al. 2022 ("Scalable and Efficient Training of
  Large Convolutional Neural Networks with Differential Privacy", Sec. 3):
  the Gram form needs T x T inner products per example, the direct form
  the K x N per-example gradient; ghost iff T^2 <= K N. (Bu et al. count
  both Gram matrices, 2 T^2 < K N; here the product of the two is reduced
  over s as it is formed, and conv patches are never materialized, see
  ``_ghost_norms.conv_gram_sq_norm``.) One position (T = 1) is always
  ``||a||^2 ||g||^2``; a coordinate mask needs the direct form unless
  T = 1.
  """
  _, t, k, n = _dims(tap)
  if t == 1:
    return True
  if masked or tap.norm_form == 'per_example':
    return False
  return tap.norm_form == 'ghost' or t * t <= k * n


def _dot_view_dims(tap: _ghost_plan.Tap):
  """(view ndim, view batch dims, view contracting dims, view free dims)."""
  _, _, vc, vb = _dot_dims(tap)
  nd_v = tap.eqn.invars[tap.operand].aval.ndim
  vfree = [d for d in range(nd_v) if d not in vc and d not in vb]
  return nd_v, vb, vc, vfree


def _dot_factors(tap: _ghost_plan.Tap, a, g, m):
  """Canonical A [B,H,T,K], G [B,H,T,N], mask [H,K,N] of a dot_general tap."""
  ac, ab, vc, vb = _dot_dims(tap)
  nd_a = a.ndim - 1
  nd_v = tap.eqn.invars[tap.operand].aval.ndim
  afree = [d for d in range(nd_a) if d not in ac and d not in ab]
  vfree = [d for d in range(nd_v) if d not in vc and d not in vb]
  nb = len(ab)
  first, second = (afree, vfree) if tap.operand == 1 else (vfree, afree)
  out_first = list(range(nb, nb + len(first)))
  out_second = list(range(nb + len(first), nb + len(first) + len(second)))
  out_a, out_v = ((out_first, out_second) if tap.operand == 1
                  else (out_second, out_first))
  h, t, k, n = _dims(tap)
  b = a.shape[0]
  big_a = jnp.transpose(a, [0] + [1 + d for d in (*ab, *afree, *ac)])
  big_g = jnp.transpose(g, [0] + [1 + d for d in (*range(nb), *out_a,
                                                  *out_v)])
  mask = None
  if m is not None:
    mask = jnp.transpose(m, (*vb, *vc, *vfree)).reshape(h, k, n)
  return big_a.reshape(b, h, t, k), big_g.reshape(b, h, t, n), mask


def _widen(x):
  """A bf16 / f16 array in float32 (``_numerics.wide``); others unchanged."""
  return x.astype(_numerics.wide(x.dtype))


def _view_struct(tap: _ghost_plan.Tap, dtype) -> jax.ShapeDtypeStruct:
  """The tapped view's ShapeDtypeStruct in ``dtype``."""
  return _ghost_plan.shape_struct(
      tap.eqn.invars[tap.operand].aval.update(dtype=dtype))


def _bind_view(tap: _ghost_plan.Tap, a_i, view):
  """The tapped equation on data ``a_i`` and view ``view``, in their dtype
  (float32 where the layer computes in bf16: no rounding to bf16), at
  ``precision=HIGHEST`` (no TF32)."""
  ins = [a_i, view] if tap.operand == 1 else [view, a_i]
  if all(x.dtype == v.aval.dtype for x, v in zip(ins, tap.eqn.invars)):
    return _ghost_plan.bind(tap.eqn, ins, precision=_HIGHEST_PAIR)[0]
  return _ghost_plan.bind(tap.eqn, ins, preferred_element_type=None,
                          precision=_HIGHEST_PAIR)[0]


def _per_example_view_grads(tap: _ghost_plan.Tap, a, g):
  """Per-example gradients of the tapped view [B, *view] (direct form), in
  float32 for a bf16 / f16 layer."""
  a, g = _widen(a), _widen(g)
  view = _view_struct(tap, g.dtype)

  def one(a_i, g_i):
    return jax.linear_transpose(lambda v: _bind_view(tap, a_i, v), view)(
        g_i)[0]

  return jax.vmap(one)(a, g)


def _gather_rows(tap: _ghost_plan.Tap, idx):
  """(row [B, T], counted [B, T]): where each lookup's gradient lands.

  The row gradient of a lookup is what the gather's transpose, a
  scatter-add in the same mode, does with its output gradient (not what the
  forward read): ``CLIP`` clamps the id into [0, rows - 1] in both
  directions, so every lookup counts at its clamped row; ``FILL_OR_DROP``
  reads zeros and drops the update for an id outside [0, rows - 1];
  ``PROMISE_IN_BOUNDS`` (``table[ids]``) reads the clamped row but its
  scatter drops the update, so such a lookup counts nowhere. Negative ids
  are out of range here: ``table[ids]`` has already wrapped [-rows, -1].
  """
  rows = tap.eqn.invars[0].aval.shape[0]
  idx = idx[..., 0].reshape(idx.shape[0], -1)
  top = min(rows - 1, int(jnp.iinfo(idx.dtype).max))  # in idx's dtype
  row = jnp.clip(idx, 0, top)
  if tap.eqn.params['mode'] == lax.GatherScatterMode.CLIP:
    return row, jnp.ones(idx.shape, bool)
  return row, (idx >= 0) & (idx <= top)


def _gather_per_row(tap: _ghost_plan.Tap, idx, g, m=None):
  """(rows, first, per_row): lookup t's row, whether no earlier lookup of the
  example has that row, and the sum [B, T, D] f32 of the example's counted
  output gradients at that row (masked by the row's coordinate mask ``m``).

  The per-example row gradients are these sums at first lookups: the norm
  and the book-keeping both use them, so a record's lookups cancel inside
  its own gradient before any weight or any other record enters.
  """
  rows, counted = _gather_rows(tap, idx)
  big_g = g.reshape(rows.shape + (-1,)).astype(jnp.float32)
  big_g = jnp.where(counted[..., None], big_g, 0.0)
  if m is not None:
    table = m.reshape(m.shape[0], -1).astype(jnp.float32)
    big_g = big_g * table[rows]
  same = rows[:, :, None] == rows[:, None, :]
  per_row = jnp.einsum('bts,bsd->btd', same.astype(jnp.float32), big_g,
                       precision=_HIGHEST)
  order = np.arange(rows.shape[1])
  first = ~jnp.any(same & (order[:, None] > order[None, :]), axis=2)
  return rows, first, per_row


def _gather_sq_norm(tap: _ghost_plan.Tap, idx, g, m) -> jax.Array:
  """||G_i||^2 = sum over rows of ||sum of that row's g_t||^2.

  Repeated rows accumulate before squaring, as the scatter adds them: the
  value of ``sum_{t,s} [r_t = r_s] (g_t . g_s)`` without that Gram sum's
  cancellation when repeated ids carry opposite gradients (its rounding
  error is the square of the gradients', whose root can exceed C when the
  true norm is 0).
  """
  _, first, per_row = _gather_per_row(tap, idx, g, m)
  return jnp.sum(jnp.where(first[..., None], jnp.square(per_row), 0.0),
                 axis=(1, 2))


def _gather_sum(tap: _ghost_plan.Tap, idx, g, w, valid) -> jax.Array:
  """Book-keeping of a row lookup: ``sum_i w_i G_i``, the scatter-add of
  each valid example's weighted row gradients (``_gather_per_row``, the
  vectors ``_gather_sq_norm`` measured), in float32."""
  g = jnp.where(row_mask(valid, g), g, 0)
  rows, first, per_row = _gather_per_row(tap, idx, g)
  keep = (first & valid[:, None])[..., None]
  upd = jnp.where(keep, per_row * w.astype(jnp.float32)[:, None, None], 0.0)
  view = tap.eqn.invars[0].aval.shape
  total = jnp.zeros((view[0], upd.shape[-1]), jnp.float32)
  total = total.at[rows.reshape(-1)].add(upd.reshape(-1, upd.shape[-1]),
                                         mode='promise_in_bounds')
  return total.reshape(view)


def row_mask(valid, x):
  """``valid`` [B] shaped to broadcast against the rows of ``x`` [B, ...]."""
  return valid.reshape((-1,) + (1,) * (x.ndim - 1))


def tap_sq_norm(tap: _ghost_plan.Tap, a, g, mask) -> jax.Array:
  """Squared per-example norms [B] f32 of a tapped leaf's gradients.

  Args:
    tap: the layer.
    a: its recorded data operands [B, ...].
    g: the gradients w.r.t. its output [B, ...].
    mask: None, or the coordinate mask replayed onto the tapped view (f32).
  """
  if tap.kind == 'gather':
    return _gather_sq_norm(tap, a, g, mask)
  gram = _use_gram(tap, mask is not None)
  if tap.kind == 'dot':
    big_a, big_g, big_mask = _dot_factors(tap, a, g, mask)
    return _ghost_norms.factored_sq_norm(big_a, big_g, big_mask, gram)
  if gram:
    return _ghost_norms.conv_gram_sq_norm(tap, a, g)
  per = _per_example_view_grads(tap, a, g).astype(jnp.float32)
  mask_max = 1.0
  if mask is not None:
    per = per * mask
    mask_max = jnp.max(jnp.abs(mask))
  n2 = jnp.sum(jnp.square(per), axis=tuple(range(1, per.ndim)))
  return _ghost_norms.conv_direct_bound(tap, a, g, n2, mask_max)


def _pow2(e: jax.Array) -> jax.Array:
  """2^e as float32, exactly, for integer e in [-126, 127] (bit pattern)."""
  return lax.bitcast_convert_type((e + 127) << 23, jnp.float32)


def _pow2_exponent(x, per_example: bool = True) -> jax.Array:
  """e with max|x| / 2^e in [1, 2) (per example, or one scalar), clamped to
  [-100, 127]; 0 where the max is 0 or not finite (non-finite stays so)."""
  x = jnp.abs(x.astype(jnp.float32))
  biggest = jnp.max(x, axis=tuple(range(1 if per_example else 0, x.ndim)))
  e = jnp.frexp(biggest)[1] - 1
  e = jnp.where((biggest > 0) & jnp.isfinite(biggest), e, 0)
  return jnp.clip(e, -100, 127)


def _scaled(x, e):
  """x / 2^e per example (exact: a power of two); float32 for bf16 x."""
  s = _pow2(e).reshape((-1,) + (1,) * (x.ndim - 1))
  return (x.astype(jnp.float32) / s).astype(_numerics.wide(x.dtype))


def tap_norm(tap: _ghost_plan.Tap, a, g, mask) -> jax.Array:
  """Per-example norms [B] f32 of a tapped leaf's gradients, overflow-safe.

  ``tap_sq_norm`` squares the factors, so a finite gradient whose squared
  norm (or a factor's, e.g. ||a||^2 in ||a||^2 ||g||^2) exceeds float32
  overflows. Here the layer input and output gradient of each example and
  the coordinate mask are first divided by powers of two 2^e_a, 2^e_g, 2^e_m
  that bring their largest magnitude to [1, 2) (exact), so the norm, bilinear
  in them, is ``sqrt(tap_sq_norm(scaled)) 2^(e_a + e_g + e_m)``: finite for
  every finite gradient of norm below float32's largest value.
  """
  exps = jnp.zeros((g.shape[0],), jnp.int32)
  if tap.kind != 'gather':  # a gather's a are row indices, not values
    e_a = _pow2_exponent(a)
    a, exps = _scaled(a, e_a), exps + e_a
  e_g = _pow2_exponent(g)
  g, exps = _scaled(g, e_g), exps + e_g
  if mask is not None:
    e_m = _pow2_exponent(mask, per_example=False)
    mask, exps = mask / _pow2(e_m), exps + e_m
  norm = jnp.sqrt(tap_sq_norm(tap, a, g, mask))
  first = jnp.clip(exps, -126, 127)  # 2^exps as two exact factors
  return norm * _pow2(first) * _pow2(jnp.clip(exps - first, -126, 127))


def tap_weighted_sum(tap: _ghost_plan.Tap, param, a, g, w, valid):
  """Book-keeping: ``sum_i w_i G_i`` of a tapped leaf over ``valid`` rows.

  Formed, summed and returned in float32 where the layer's view or the leaf
  is bf16 (``w_i G_i`` then has the norm that ``tap_sq_norm`` measured, and
  the batch sum is not rounded to bf16), at ``precision=HIGHEST``.

  Args:
    tap: the layer.
    param: the leaf (for its shape and dtype).
    a: the layer's recorded data operands [B, ...].
    g: the gradients w.r.t. its output [B, ...].
    w: per-example weights [B].
    valid: bool [B]; other rows contribute exactly zero, even if non-finite.
  """
  rows = row_mask(valid, g)
  g = _widen(g)
  scaled = jnp.where(rows, g * w.astype(g.dtype).reshape(rows.shape), 0)
  a = _widen(a)
  view_aval = tap.eqn.invars[tap.operand].aval

  def contract(a, scaled):
    if tap.kind == 'dot':  # einsum('bhtk,bhtn->hkn'), then the view layout
      dtype = jnp.promote_types(a.dtype, scaled.dtype)
      big_a, big_g, _ = _dot_factors(tap, a.astype(dtype),
                                     scaled.astype(dtype), None)
      b, h, t, k = big_a.shape
      if h == 1:  # a plain matmul over rows (b, t): no batch dimension
        total = jnp.einsum('rk,rn->kn', big_a.reshape(b * t, k),
                           big_g.reshape(b * t, -1), precision=_HIGHEST)[None]
      else:
        total = jnp.einsum('bhtk,bhtn->hkn', big_a, big_g,
                           precision=_HIGHEST)
      _, vb, vc, vfree = _dot_view_dims(tap)
      order = (*vb, *vc, *vfree)
      total = total.reshape([view_aval.shape[d] for d in order])
      return jnp.transpose(total, np.argsort(order)).astype(scaled.dtype)

    def op(view):  # conv: the filter gradient
      return jax.vmap(lambda a_i: _bind_view(tap, a_i, view))(a)

    return jax.linear_transpose(op, _view_struct(tap, scaled.dtype))(
        scaled)[0]

  # Rows without ``valid`` have weight 0, but a non-finite input there makes
  # 0 * inf = NaN, so those rows of ``a`` must not enter the sum. For a dot
  # the plain contraction (no copy of ``a``) is exact unless such a row
  # exists. With one position per example (T = 1, Dense on vectors) a loop
  # then recomputes the sum one valid row at a time (slow, but only for
  # non-finite inputs, i.e. dropped examples); its trip count is 0 otherwise
  # and XLA updates its carry in place, so the common case keeps neither a
  # masked copy of ``a`` nor a second buffer for the sum, as a ``lax.cond``
  # would (on XLA CPU: the 784-512-512-10 MLP step's temp memory falls from
  # 2.0 to 0.25 MiB over the non-private step at B = 64). With T > 1 the loop
  # operands cost more than they save, so a ``lax.cond`` recomputes the sum
  # from a masked copy when it is not finite; for a conv the plain masked
  # copy is the cheaper one.
  if tap.kind == 'gather':
    ct_view = _gather_sum(tap, a, g, w, valid)
  elif tap.kind == 'dot' and _dims(tap)[1] > 1:
    ct_view = contract(a, scaled)
    ct_view = lax.cond(
        jnp.all(jnp.isfinite(ct_view)), lambda: ct_view,
        lambda: contract(jnp.where(row_mask(valid, a), a, 0), scaled))
  elif tap.kind == 'dot':
    ct_view = contract(a, scaled)
    finite_rows = jnp.all(jnp.isfinite(a), axis=tuple(range(1, a.ndim)))
    trips = jnp.where(jnp.any(~valid & ~finite_rows), a.shape[0], 0)

    def masked_row(carry):
      i, total = carry
      a_i = jnp.where(valid[i], a[i], 0)[None]
      total = jnp.where(i == 0, 0, total) + contract(a_i, scaled[i][None])
      return i + 1, total

    ct_view = lax.while_loop(lambda carry: carry[0] < trips, masked_row,
                             (0, ct_view))[1]
  else:
    ct_view = contract(jnp.where(row_mask(valid, a), a, 0), scaled)
  ct_param, = jax.linear_transpose(
      lambda p: _ghost_plan.replay(tap.chain, p, keep_dtype=True),
      _ghost_plan.shape_struct(jax.typeof(param).update(
          dtype=ct_view.dtype)))(ct_view)
  return ct_param.astype(_numerics.wide(param.dtype))


def describe(tap: _ghost_plan.Tap) -> str:
  """The form ``tap_sq_norm`` takes for this tap, as ``ghost_plan`` says it."""
  if tap.kind == 'gather':
    return 'ghost embedding (lookups summed per row)'
  _, t, k, n = _dims(tap)
  label = {'dot': 'dense', 'conv': 'conv'}[tap.kind]
  if t == 1:
    form = 'T=1, ||a||^2 ||g||^2'
  elif _use_gram(tap, masked=False):
    form = f'Gram, T={t}'
  else:
    form = f'direct, T={t}, {k}x{n} per example'
  return f'ghost {label} ({form})'
