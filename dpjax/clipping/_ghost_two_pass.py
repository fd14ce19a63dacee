"""Ghost clipping in two backward passes: memory of one layer at a time.

Book-keeping (``_ghost.py``; Bu et al. 2023, "Differentially Private
Optimization on Large Model at Small Cost", Alg. 1) keeps the output gradient
``g`` of every tapped layer until all norms are known. The two-pass form
(Lee & Kifer 2021, "Scaling up Differentially Private Deep Learning with Fast
Per-Example Gradient Clipping"; Bu et al. 2022, "Scalable and Efficient
Training of Large Convolutional Neural Networks with Differential Privacy",
Alg. 1) runs the backward pass twice: the first reduces each layer's
``(a, g)`` to the per-example norm contribution as soon as ``g`` exists (a
``custom_vjp`` tap whose backward returns only a [B] vector), the second forms
``sum_i c_i G_i`` with the clip factors ``c_i`` of the first.

Both passes are ONE function (``_pass``), the body of a ``lax.while_loop``:
per tapped layer its backward (a) reads the layer's output gradient through
an optimization barrier, (b) computes the certified norm of ``G_i`` from it
(``_ghost_rules.tap_norm``, overflow-safe, float32) and (c) passes
``where(valid_i, c_i g_i, 0)`` (float32) to the layer's weight gradient, an
ordinary batched transpose of the layer's equation in float32 at
``precision=HIGHEST`` (the weight of the non-private backward, per example
rescaled; no per-example gradient is formed), while the unweighted ``g``
flows on to earlier layers. The clip factors enter only in (c), so the
loop's second iteration recomputes bitwise the same ``g`` and norms as its
first (one compiled body, evaluated deterministically): each record's
contribution is ``c_i G_i`` for the ``G_i`` whose certified norm gave
``c_i``, as in book-keeping. If a norm grows between iterations anyway (a
nondeterministic backend), the larger norm is kept and the sum recomputed, at
most ``MAX_PASSES`` times in all.

Padded rows and rows with a non-finite norm get ``valid`` False: their
cotangent to the weight path is exactly zero and their layer inputs are
zeroed there (rematerialized in the backward, ``jax.checkpoint``), so they
contribute exactly zero even when non-finite. Materialized leaves (biases,
fallbacks) and shared ones (tied weights, ``_ghost_shared.py``: their norm
needs every use's output gradient at once) get their per-example gradient
in the backward, reduced there to its norm and its weighted row.

Cost: two forward and two backward passes (the first also forms a weight
gradient with zero weights), against one of each for book-keeping; memory:
the non-private backward's plus one layer's norm temporaries.

Example:
  >>> loss = lambda w, x: jnp.sum(jnp.tanh(x @ w))
  >>> w, x, mask = jnp.ones((3, 2)), jnp.ones((4, 3)), jnp.ones(4, bool)
  >>> plan = _ghost_plan.make_plan(loss, w, x, 'per_example')
  >>> choose_mode(plan, [w], 4, 'auto')  # 4 x 2 output gradients: small
  'bookkeeping'
  >>> two = dpjax.clipped_grad_sum(loss, 0.5, 'ghost', ghost_mode='two_pass')
  >>> one = dpjax.clipped_grad_sum(loss, 0.5, 'ghost')
  >>> bool(jnp.allclose(two(w, x, mask).grad_sum.value,
  ...                   one(w, x, mask).grad_sum.value, rtol=1e-6))
  True
"""

import math

import jax
from jax import lax
import jax.numpy as jnp

from dpjax import _numerics
from dpjax.clipping import _ghost_plan
from dpjax.clipping import _ghost_rules

GHOST_MODES = ('auto', 'bookkeeping', 'two_pass')
MAX_PASSES = 3
# ``ghost_mode='auto'`` picks two_pass when book-keeping's extra memory (the
# output gradients it keeps) exceeds both this many parameter bytes and
# ``TWO_PASS_MIN_BYTES``: below that it is cheap, and one pass is faster.
TWO_PASS_PARAM_RATIO = 2.0
TWO_PASS_MIN_BYTES = 64 * 2**20


def bookkeeping_extra_bytes(plan: _ghost_plan.Plan, batch_size: int) -> int:
  """Bytes of the output gradients book-keeping keeps alive at once (one
  per tapped layer, [B, *output]): its memory model."""
  return sum(batch_size * math.prod(t.eqn.outvars[0].aval.shape)
             * jnp.dtype(t.eqn.outvars[0].aval.dtype).itemsize
             for t in plan.taps.values())


def choose_mode(plan: _ghost_plan.Plan, params_flat, batch_size: int,
                ghost_mode: str) -> str:
  """'bookkeeping' or 'two_pass' for ``ghost_mode`` (see the constants)."""
  if ghost_mode != 'auto':
    return ghost_mode
  param_bytes = sum(math.prod(jnp.shape(p)) * jnp.dtype(p.dtype).itemsize
                    for p in params_flat)
  extra = bookkeeping_extra_bytes(plan, batch_size)
  if extra > max(TWO_PASS_PARAM_RATIO * param_bytes, TWO_PASS_MIN_BYTES):
    return 'two_pass'
  return 'bookkeeping'


def _norm_tap(tap, has_mask: bool):
  """Identity on the layer output ``y``; its backward returns ``g`` (read
  once, barrier) and, as the cotangent of the sink ``s``, the certified norm
  of the example's gradient of the tapped leaf."""

  @jax.custom_vjp
  def f(y, s, a, mask):
    del s, a, mask
    return y

  def fwd(y, s, a, mask):
    del s
    return y, (a, mask)

  def bwd(res, g):
    a, mask = res
    g = lax.optimization_barrier(g)
    norm = _ghost_rules.tap_norm(tap, a[None], g[None],
                                 mask if has_mask else None)[0]
    return g, norm, None, None

  f.defvjp(fwd, bwd)
  return f


def _gather_cotangent(tap, idx, g, w, ok):
  """A row lookup's weighted cotangent, summed per row first: the example's
  lookups of a row add up (and cancel) before its weight and the batch enter,
  as in book-keeping (``_ghost_rules._gather_sum``). The sum sits at the
  row's first lookup that the transposed scatter counts; others get 0."""
  rows, counted = _ghost_rules._gather_rows(tap, idx[None])  # pylint: disable=protected-access
  big_g = g.reshape(rows.shape + (-1,)).astype(jnp.float32)
  big_g = jnp.where(counted[..., None], big_g, 0.0)
  same = rows[:, :, None] == rows[:, None, :]
  per_row = jnp.einsum('bts,bsd->btd', same.astype(jnp.float32), big_g,
                       precision=_ghost_rules._HIGHEST)  # pylint: disable=protected-access
  both = same & counted[:, :, None] & counted[:, None, :]
  order = jnp.arange(rows.shape[1])
  first = counted & ~jnp.any(both & (order[:, None] > order[None, :]), axis=2)
  ct = jnp.where(first[..., None] & ok, per_row * w, 0.0)
  return ct.reshape(g.shape)


def _weight_path(dtype, tap):
  """Zeros of ``dtype`` in the forward; the backward sends ``where(ok, w g,
  0)`` in float32 to ``x``, the layer recomputed on the zero weights (for
  a row lookup, summed per row first, ``_gather_cotangent``)."""

  @jax.custom_vjp
  def f(x, w, ok, idx):
    del ok, idx
    # Zeros that vary with the example (under vmap a constant would be one
    # shared value, whose cotangent is the batch sum); w is finite.
    return jnp.broadcast_to((w * 0).astype(dtype), x.shape)

  def fwd(x, w, ok, idx):
    return f(x, w, ok, idx), (w, ok, idx)

  def bwd(res, g):
    w, ok, idx = res
    if tap.kind == 'gather':
      ct = _gather_cotangent(tap, idx, g, w, ok)
    else:
      ct = jnp.where(ok, g.astype(jnp.float32) * w, 0.0)
    return ct, None, None, None

  f.defvjp(fwd, bwd)
  return f


def _leaf_tap(has_mask: bool):
  """Identity on a materialized leaf ``p``; its backward reduces the
  example's gradient to its norm (sink ``s``) and its weighted row (``d``)."""

  @jax.custom_vjp
  def f(p, d, s, w, ok, mask):
    del d, w, ok, mask
    return p + (s * 0).astype(p.dtype)  # one copy per example (see above)

  def fwd(p, d, s, w, ok, mask):
    return f(p, d, s, w, ok, mask), (d, w, ok, mask)

  def bwd(res, ct):
    d, w, ok, mask = res
    ct = lax.optimization_barrier(ct)
    g = ct.astype(jnp.float32)
    masked = g * mask.astype(jnp.float32) if has_mask else g
    norm = _numerics.l2_norm(masked, tuple(range(masked.ndim)))
    row = jnp.where(ok, g * w, 0.0).astype(d.dtype)
    return None, row, norm, None, None, None

  f.defvjp(fwd, bwd)
  return f


def _masked_layer(tap):
  """The tapped equation on float32 views and rows zeroed where not ``ok``
  (recomputed in the backward, not kept from the forward)."""

  @jax.checkpoint
  def f(a, view, ok):
    if tap.kind != 'gather':  # gather data are indices: nothing to zero
      a = jnp.where(ok, a, jnp.zeros((), a.dtype))
      a = a.astype(_numerics.wide(a.dtype))
      return _ghost_rules._bind_view(tap, a, view)  # pylint: disable=protected-access
    ins = [view, a] if tap.operand == 0 else [a, view]
    return _ghost_plan.bind(tap.eqn, ins)[0]

  return f


def run_pass(plan: _ghost_plan.Plan, params_flat, batch_flat, weights, valid,
             masks):
  """One forward and backward pass of the two-pass form.

  Args:
    plan: the ghost plan.
    params_flat: parameter leaves.
    batch_flat: batch leaves (leading axis B).
    weights: per leaf, the clip factors [B] f32.
    valid: bool [B]; other rows contribute exactly zero.
    masks: None or per-leaf coordinate masks.

  Returns:
    (per-leaf sums ``sum_i w_i g_i`` over valid rows, in ``wide`` dtype and
    masked like ``GhostGrads.weighted_sums``; per-leaf certified norms [B]).
  """
  closed = plan.jaxpr
  n = len(params_flat)
  wide = [_numerics.wide(jnp.result_type(p)) for p in params_flat]
  used = [i for i in range(n) if i not in plan.unused]
  # Zeros varying over the mesh axes their reference varies over (inside
  # ``shard_map``), like ``_ghost_plan._zeros``.
  d0 = {i: _ghost_plan._zeros(jax.typeof(params_flat[i]).update(  # pylint: disable=protected-access
      dtype=wide[i])) for i in used}
  batch_size = jnp.shape(batch_flat[0])[0]
  s0 = {i: _ghost_plan._zeros(jax.typeof(batch_flat[0]).update(  # pylint: disable=protected-access
      shape=(batch_size,), dtype=jnp.float32)) for i in used}
  has_mask = {i: masks is not None and masks[i] is not None for i in used}
  # A shared leaf (several taps) gets its per-example gradient, as a
  # materialized one does (module doc).
  per_leaf = set(plan.materialized) | {
      i for i, paths in plan.leaf_taps.items() if len(paths) > 1}
  mask_view = {}
  for i in used:
    if not has_mask[i]:
      mask_view[i] = jnp.zeros((), jnp.float32)
    elif i in per_leaf:
      mask_view[i] = jnp.asarray(masks[i]).astype(jnp.float32)
    else:
      tap = plan.taps[plan.leaf_taps[i][0]]
      m = jnp.asarray(masks[i]).astype(params_flat[i].dtype)
      mask_view[i] = _ghost_plan.replay(tap.chain, m).astype(jnp.float32)
  w = {i: weights[i].astype(jnp.float32) for i in used}

  def per_example(d, s, example, w, ok):
    args = list(params_flat)
    for i in per_leaf:
      args[i] = _leaf_tap(has_mask[i])(
          lax.stop_gradient(args[i]), d[i], s[i], w[i], ok, mask_view[i])

    def on_tap(path, tap, invals, outs):
      del path
      i = tap.leaf
      if i in per_leaf:
        return outs
      a = lax.stop_gradient(invals[tap.data_operand])
      y = outs[0]
      view = _ghost_plan.replay(tap.chain, d[i], keep_dtype=True)
      x = _masked_layer(tap)(a, view, ok)
      idx = a if tap.kind == 'gather' else jnp.zeros((), jnp.int32)
      y = y + _weight_path(y.dtype, tap)(x, w[i], ok, idx)
      return [_norm_tap(tap, has_mask[i])(y, s[i], a, mask_view[i])]

    out = _ghost_plan._evaluate(  # pylint: disable=protected-access
        closed.jaxpr, closed.consts, args + list(example), (), plan,
        on_tap)[0]
    return out.astype(jnp.float32)

  def total(d, s):
    losses = jax.vmap(per_example, in_axes=(None, 0, 0, 0, 0))(
        d, s, list(batch_flat), w, valid)
    return jnp.sum(losses)

  sums, norms = jax.grad(total, argnums=(0, 1))(d0, s0)
  out_sums, out_norms = [], []
  for i in range(n):
    if i in plan.unused:
      out_sums.append(jnp.zeros(jnp.shape(params_flat[i]), wide[i]))
      out_norms.append(jnp.zeros((batch_size,), jnp.float32))
      continue
    total_i = sums[i]
    if has_mask[i]:
      total_i = total_i * jnp.asarray(masks[i]).astype(total_i.dtype)
    out_sums.append(total_i)
    out_norms.append(norms[i])
  return out_sums, out_norms


def two_pass_sums(plan, params_flat, batch_flat, masks, rule):
  """The loop of the module doc.

  Args:
    plan, params_flat, batch_flat, masks: as for ``run_pass``.
    rule: ``per-leaf norms [B] -> (per-leaf weights [B], valid [B])``, the
      clipping rule.

  Returns:
    (per-leaf sums, per-leaf norms the weights were computed from).
  """
  n = len(params_flat)
  batch_size = jnp.shape(batch_flat[0])[0]

  def body(state):
    k, ref, _, _ = state
    weights, valid = rule(ref)
    first = k == 0
    valid = valid & ~first
    weights = [jnp.where(first, 0.0, wt) for wt in weights]
    sums, new = run_pass(plan, params_flat, batch_flat, weights, valid, masks)
    grew = jnp.zeros((batch_size,), bool)
    for r, x in zip(ref, new):
      grew = grew | ~(x <= r)  # larger or not finite
    done = ~first & ~jnp.any(grew & valid)
    ref = [jnp.where(first | ~(x <= r), x, r) for r, x in zip(ref, new)]
    return k + 1, ref, sums, done

  def cond(state):
    k, _, _, done = state
    return ~done & (k < MAX_PASSES)

  wide = [_numerics.wide(jnp.result_type(p)) for p in params_flat]
  init = (jnp.int32(0), [jnp.zeros((batch_size,), jnp.float32)] * n,
          [jnp.zeros(jnp.shape(p), t) for p, t in zip(params_flat, wide)],
          jnp.bool_(False))
  # Inside ``shard_map`` the carry varies over the batch's mesh axes.
  mat = getattr(jax.typeof(batch_flat[0]), 'mat', None)
  axes = tuple(sorted(mat.varying)) if mat is not None else ()
  if axes:
    init = jax.tree.map(lambda x: lax.pcast(x, axes, to='varying'), init)
  _, ref, sums, _ = lax.while_loop(cond, body, init)
  return sums, ref
