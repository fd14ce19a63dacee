"""Ghost clipping's jaxpr plan: which parameter leaf is tapped where, and how.

This module holds the analysis behind ``ghost_grads`` (``_ghost.py``): it
traces ``loss_fn`` for one example, decides per parameter leaf whether its
per-example gradient norm can be factored from a layer's input ``a`` and the
gradient ``g`` w.r.t. its output (Li et al. 2022, "Large Language Models Can
Be Strong Differentially Private Learners", Sec. 4) and its clipped sum
book-kept from the same ``a`` and ``g`` (Bu et al. 2023, "Differentially
Private Optimization on Large Model at Small Cost", Alg. 1), or must get exact
per-example gradients, and it runs the one batched forward and backward pass
that records every ``a`` and returns every ``g``. The per-layer formulas that
consume them are in ``_ghost_rules.py``.

Capture mechanism: a jaxpr tap, one mechanism for flax linen, flax nnx used
functionally (``nnx.split`` / ``nnx.merge`` inside ``loss_fn``) and plain JAX.

1. ``jax.make_jaxpr`` traces ``loss_fn(params, example)`` for ONE example.
   Nested ``jit`` / ``closed_call`` / ``call`` jaxprs are inlined, as is a
   ``remat`` (``jax.checkpoint``) that mixes parameters and data (which is
   then not rematerialized); ``custom_jvp`` / ``custom_vjp`` calls are never
   inlined, so their rules stay in force.
2. A forward analysis marks every value as constant, parameter-only (a
   function of params alone; a reshape / transpose / squeeze / float convert /
   size-preserving broadcast of ONE leaf is remembered as a *view* of it) or
   data-dependent. An equation combining a parameter-only operand with data is
   a *use* of the leaves behind that operand.
3. A leaf is *ghost* when each of its uses has a view of it as the
   weight operand of a ``dot_general`` (Dense, DenseGeneral, einsum, any
   contraction and batch dimensions), the kernel of a ``conv_general_dilated``
   (no feature or batch groups) or the table of a row ``gather`` (Embed). A
   leaf with several such uses (weight tying: an embedding lookup and the
   output projection ``h @ E.T``; a shared layer) is *shared*: its norm sums
   the per-use factors' cross terms (``_ghost_shared.py``). The
   jaxpr is re-evaluated with a zero perturbation added to the output of each
   such equation and its data operand recorded; ``jax.vmap`` of ``jax.grad``
   w.r.t. the perturbations yields every ``g`` in one batched backward pass
   that forms no weight gradient.
4. Every other used leaf is *materialized*: a zero per-example perturbation is
   added to the leaf itself, so the same backward pass also returns its exact
   per-example gradients [B, *leaf.shape]. Biases and scales (only elementwise
   uses, such as the bias ``add``; the cost of one activation) go this way by
   design. So, as the fallback, does a leaf with a use that is not a tap (a
   penalty on the weights inside the loss), used by an unsupported
   op (scan, while, cond, a custom_jvp / custom_vjp call, ...) or through a
   non-view (``x @ (W1 + W2)``). The fallback is exact, so a norm is never
   silently wrong; with ``fallback='error'`` such a non-elementwise fallback
   raises a ``ValueError`` naming the parameter path instead. ``ghost_plan``
   says which leaf went which way.

Example:
  >>> loss = lambda p, x: jnp.sum(jnp.tanh(x @ p['w'] + p['b']))
  >>> params = {'w': jnp.ones((3, 2)), 'b': jnp.zeros(2)}  # leaves: b, w
  >>> plan = make_plan(loss, params, jnp.ones((4, 3)), 'per_example')
  >>> [(tap.leaf, tap.kind) for tap in plan.taps.values()]
  [(1, 'dot')]
  >>> plan.materialized
  {0: 'per-example (elementwise use: bias/scale)'}
"""

import dataclasses
import math
from typing import Any

import jax
from jax import lax
import jax.extend.core as jex
import jax.numpy as jnp

PyTree = Any
FALLBACKS = ('per_example', 'error')
# Per-layer norm form of a multi-position tap (``layer_norms=``): the cost
# model of ``_ghost_rules._use_gram``, or forced.
LAYER_NORMS = ('auto', 'ghost', 'per_example')

_P = jex.primitives
# Call-like primitives whose body is inlined (the nested jaxpr lives in the
# named parameter; 'call' holds an open jaxpr, the others closed ones).
_INLINE = {_P.jit_p: 'jaxpr', _P.closed_call_p: 'call_jaxpr',
           _P.call_p: 'call_jaxpr'}
_REMAT = {_P.remat_p: 'jaxpr'}
# Linear, norm-preserving views of a parameter.
_VIEW = {_P.convert_element_type_p, _P.reshape_p, _P.transpose_p,
         _P.squeeze_p, _P.broadcast_in_dim_p, _P.copy_p,
         _P.sharding_constraint_p}
# Uses that make a materialized leaf cost no more than one activation.
_ELEMENTWISE = {_P.add_p, _P.sub_p, _P.mul_p, _P.div_p, _P.max_p, _P.min_p,
                _P.pow_p, _P.select_n_p, _P.add_jaxvals_p, _P.atan2_p,
                _P.rem_p}
_DATA = 'data'  # kind of a value that depends on the example


@dataclasses.dataclass(frozen=True)
class _ParamKind:
  """A parameter-only value: the leaves behind it, and its view if any."""
  leaves: frozenset
  view: tuple | None = None  # (leaf, chain of (primitive, params)) or None


@dataclasses.dataclass(frozen=True)
class _Use:
  path: tuple  # equation indices through inlined jaxprs; () = the output
  eqn: Any
  operand: int
  kind: _ParamKind


@dataclasses.dataclass(frozen=True)
class Tap:
  """A ghost leaf's single use: the equation whose output gets ``g``."""
  leaf: int
  kind: str  # 'dot', 'conv' or 'gather'
  eqn: Any
  operand: int  # position of the parameter view among the equation inputs
  chain: tuple  # (primitive, params) from the leaf to the view
  norm_form: str = 'auto'  # one of LAYER_NORMS

  @property
  def data_operand(self) -> int:
    return 1 - self.operand


@dataclasses.dataclass
class Plan:
  """Per leaf: tapped (``taps``, ``leaf_taps``), materialized or unused."""
  jaxpr: Any  # ClosedJaxpr of loss_fn(params, example)
  taps: dict  # path -> Tap
  materialized: dict  # leaf -> reason
  unused: set
  remat_inlined: set
  leaf_taps: dict  # leaf -> paths of its taps, one per use


def _bind_params(eqn) -> tuple[tuple, dict]:
  params = eqn.primitive.get_bind_params(eqn.params)
  if isinstance(params, tuple):  # older jax: (subfuns, params)
    return params
  return (), params


def bind(eqn, invals, **overrides):
  """Binds ``eqn``'s primitive on ``invals`` (``overrides`` replace params)."""
  subfuns, params = _bind_params(eqn)
  params = {**params, **overrides}
  ctx = getattr(getattr(eqn, 'ctx', None), 'manager', None)
  if ctx is None:
    out = eqn.primitive.bind(*subfuns, *invals, **params)
  else:
    with ctx:
      out = eqn.primitive.bind(*subfuns, *invals, **params)
  return list(out) if eqn.primitive.multiple_results else [out]


def _inner(eqn, inline_remat: bool):
  """(jaxpr, consts) of a call-like equation to inline, else None."""
  name = _INLINE.get(eqn.primitive)
  if name is None and inline_remat:
    name = _REMAT.get(eqn.primitive)
  if name is None:
    return None
  inner = eqn.params[name]
  if isinstance(inner, jex.ClosedJaxpr):
    return inner.jaxpr, inner.consts
  return inner, []


def _is_view(eqn) -> bool:
  if eqn.primitive not in _VIEW or len(eqn.invars) != 1:
    return False
  in_aval, out_aval = eqn.invars[0].aval, eqn.outvars[0].aval
  if eqn.primitive is _P.convert_element_type_p:
    return (jnp.issubdtype(in_aval.dtype, jnp.inexact)
            and jnp.issubdtype(out_aval.dtype, jnp.inexact))
  return math.prod(in_aval.shape) == math.prod(out_aval.shape)


def _analyze(jaxpr, in_kinds, prefix, uses, remat_inlined):
  """Propagates kinds (None, ``_ParamKind`` or ``_DATA``); records uses."""
  kinds = {}  # constvars are absent, hence constant (None)

  def read(v):
    return None if isinstance(v, jex.Literal) else kinds.get(v)

  for v, k in zip(jaxpr.invars, in_kinds):
    kinds[v] = k
  for i, eqn in enumerate(jaxpr.eqns):
    path = prefix + (i,)
    ins = [read(v) for v in eqn.invars]
    has_data = any(k is _DATA for k in ins)
    params_in = [k for k in ins if isinstance(k, _ParamKind)]
    mixing = has_data and bool(params_in)
    inner = _inner(eqn, inline_remat=mixing)
    if inner is not None:
      if eqn.primitive in _REMAT:
        remat_inlined.add(path)
      outs = _analyze(inner[0], ins, path, uses, remat_inlined)
    elif mixing:
      for j, k in enumerate(ins):
        if isinstance(k, _ParamKind):
          for leaf in k.leaves:
            uses.setdefault(leaf, []).append(_Use(path, eqn, j, k))
      outs = [_DATA] * len(eqn.outvars)
    elif has_data:
      outs = [_DATA] * len(eqn.outvars)
    elif params_in:
      leaves = frozenset().union(*(k.leaves for k in params_in))
      view = None
      if _is_view(eqn) and params_in[0].view is not None:
        leaf, chain = params_in[0].view
        view = (leaf, chain + ((eqn.primitive, _bind_params(eqn)[1]),))
      outs = [_ParamKind(leaves, view) for _ in eqn.outvars]
    else:
      outs = [None] * len(eqn.outvars)
    for v, k in zip(eqn.outvars, outs):
      if not isinstance(v, jex.DropVar):
        kinds[v] = k
  return [read(v) for v in jaxpr.outvars]


def _evaluate(jaxpr, consts, args, prefix, plan, on_tap):
  """Evaluates like ``jax.core.eval_jaxpr``; a tapped equation's outputs
  become ``on_tap(path, tap, invals, outs)``."""
  env = {}

  def read(v):
    return v.val if isinstance(v, jex.Literal) else env[v]

  for v, x in zip(jaxpr.constvars, consts):
    env[v] = x
  for v, x in zip(jaxpr.invars, args):
    env[v] = x
  for i, eqn in enumerate(jaxpr.eqns):
    path = prefix + (i,)
    invals = [read(v) for v in eqn.invars]
    inner = _inner(eqn, inline_remat=path in plan.remat_inlined)
    if inner is not None:
      outs = _evaluate(inner[0], inner[1], invals, path, plan, on_tap)
    else:
      outs = bind(eqn, invals)
      tap = plan.taps.get(path)
      if tap is not None:
        outs = on_tap(path, tap, invals, outs)
    for v, x in zip(eqn.outvars, outs):
      if not isinstance(v, jex.DropVar):
        env[v] = x
  return [read(v) for v in jaxpr.outvars]


def replay(chain, x, keep_dtype: bool = False):
  """Applies a view chain to ``x``; with ``keep_dtype`` its float converts
  are skipped (the same view in ``x``'s dtype, e.g. float32 for bf16)."""
  for primitive, params in chain:
    if not (keep_dtype and primitive is _P.convert_element_type_p):
      x = primitive.bind(x, **params)
  return x


_GATHER_MODES = (lax.GatherScatterMode.CLIP,
                 lax.GatherScatterMode.FILL_OR_DROP,
                 lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _supported(use: _Use, leaf: int) -> tuple[str | None, str]:
  """(tap kind or None, reason) for a leaf's single use."""
  if use.eqn is None:
    return None, 'is part of the loss value itself'
  name = use.eqn.primitive.name
  if use.kind.view is None or use.kind.view[0] != leaf:
    return None, f"enters '{name}' through a computation that is not a view"
  eqn, params = use.eqn, use.eqn.params
  if eqn.primitive is _P.dot_general_p:
    return 'dot', ''
  if eqn.primitive is _P.conv_general_dilated_p:
    spatial = list(params['dimension_numbers'].rhs_spec[2:])
    if (use.operand == 1 and params['feature_group_count'] == 1
        and params['batch_group_count'] == 1 and spatial == sorted(spatial)):
      return 'conv', ''
    return None, "is used by a 'conv_general_dilated' with groups or as input"
  if eqn.primitive is _P.gather_p and use.operand == 0:
    dn = params['dimension_numbers']
    table = eqn.invars[0].aval.shape
    out_ndim = eqn.outvars[0].aval.ndim
    rest = tuple(table[1:])
    if (tuple(dn.collapsed_slice_dims) == (0,)
        and tuple(dn.start_index_map) == (0,)
        and not dn.operand_batching_dims and not dn.start_indices_batching_dims
        and tuple(params['slice_sizes']) == (1,) + rest
        and eqn.invars[1].aval.shape[-1:] == (1,)
        and tuple(dn.offset_dims) == tuple(range(out_ndim - len(rest),
                                                 out_ndim))
        and params['mode'] in _GATHER_MODES):
      return 'gather', ''
    return None, "is used by a 'gather' that is not a row lookup"
  return None, f"is used by '{name}'"


def _elementwise(use: _Use) -> bool:
  if use.eqn is None or use.eqn.primitive not in _ELEMENTWISE:
    return False
  operand = use.eqn.invars[use.operand].aval
  return math.prod(operand.shape) <= math.prod(use.eqn.outvars[0].aval.shape)


def leaf_names(params: PyTree) -> list[str]:
  paths = jax.tree_util.tree_flatten_with_path(params)[0]
  return [jax.tree_util.keystr(p) or '<root>' for p, _ in paths]


def shape_struct(aval, drop: int = 0,
                 weak_type: bool = False) -> jax.ShapeDtypeStruct:
  """``aval`` without its first ``drop`` axes, as a ShapeDtypeStruct.

  Inside ``shard_map`` it keeps the value's varying mesh axes, so a trace or
  transpose on it inserts the same casts to varying as the batched replay.
  """
  mat = getattr(aval, 'mat', None)
  if mat is None or mat.empty:
    return jax.ShapeDtypeStruct(aval.shape[drop:], aval.dtype,
                                weak_type=weak_type)
  sharding = jax.sharding.NamedSharding(
      aval.sharding.mesh, jax.sharding.PartitionSpec(*aval.sharding.spec[drop:]))
  return jax.ShapeDtypeStruct(aval.shape[drop:], aval.dtype,
                              weak_type=weak_type, sharding=sharding,
                              manual_axis_type=mat)


def make_plan(loss_fn, params, batch, fallback: str,
              layer_norms: str = 'auto') -> Plan:
  """Traces one example and decides, per parameter leaf, ghost or not."""
  if fallback not in FALLBACKS:
    raise ValueError(f'Expected fallback={fallback!r} in {FALLBACKS}.')
  if layer_norms not in LAYER_NORMS:
    raise ValueError(f'Expected layer_norms={layer_norms!r} in '
                     f'{LAYER_NORMS}.')
  example = jax.tree.map(
      lambda x: shape_struct(jax.typeof(x), 1, jax.typeof(x).weak_type), batch)
  closed = jax.make_jaxpr(loss_fn)(params, example)
  outs = closed.out_avals
  if (len(outs) != 1 or outs[0].shape != ()
      or not jnp.issubdtype(outs[0].dtype, jnp.floating)):
    raise ValueError('Expected loss_fn(params, example) to return one real '
                     f'scalar, got {outs}.')
  n = len(jax.tree.leaves(params))
  in_kinds = [_ParamKind(frozenset({i}), (i, ())) for i in range(n)]
  in_kinds += [_DATA] * (len(closed.jaxpr.invars) - n)
  uses, remat_inlined = {}, set()
  for k in _analyze(closed.jaxpr, in_kinds, (), uses, remat_inlined):
    if isinstance(k, _ParamKind):
      for leaf in k.leaves:
        uses.setdefault(leaf, []).append(_Use((), None, 0, k))
  taps, materialized, unused, leaf_taps, errors = {}, {}, set(), {}, []
  names = leaf_names(params)
  for leaf in range(n):
    leaf_uses = uses.get(leaf, [])
    if not leaf_uses:
      unused.add(leaf)
      continue
    kinds = [_supported(use, leaf) for use in leaf_uses]
    if len(leaf_uses) > 1:  # _ghost_shared factors dots and lookups
      kinds = [(None, "is a 'conv_general_dilated' kernel")
               if kind == 'conv' else (kind, r) for kind, r in kinds]
    if all(kind is not None for kind, _ in kinds):
      for use, (kind, _) in zip(leaf_uses, kinds):
        taps[use.path] = Tap(leaf, kind, use.eqn, use.operand,
                             use.kind.view[1], layer_norms)
      leaf_taps[leaf] = tuple(use.path for use in leaf_uses)
      continue
    reason = next(r for kind, r in kinds if kind is None)
    if len(leaf_uses) > 1:
      reason = f'is used {len(leaf_uses)} times and one use {reason}'
    if all(_elementwise(u) for u in leaf_uses):
      materialized[leaf] = 'per-example (elementwise use: bias/scale)'
    else:
      materialized[leaf] = f'per-example fallback: {reason}'
      errors.append(f'{names[leaf]} {reason}')
  if errors and fallback == 'error':
    raise ValueError(
        "Ghost clipping cannot factor these parameters (pass fallback="
        "'per_example' to use their exact per-example gradients): "
        + '; '.join(errors) + '.')
  return Plan(closed, taps, materialized, unused, remat_inlined, leaf_taps)


def _zeros(aval) -> jax.Array:
  """Zeros of ``aval``'s shape, varying over the mesh axes ``aval`` varies
  over (inside ``shard_map``): the gradient w.r.t. an invariant value would be
  summed over the axis, mixing the devices' examples."""
  zeros = jnp.zeros(aval.shape, aval.dtype)
  mat = getattr(aval, 'mat', None)
  axes = tuple(sorted(mat.varying)) if mat is not None else ()
  return jax.lax.pcast(zeros, axes, to='varying') if axes else zeros


def backprop(plan: Plan, params_flat, batch_flat):
  """One batched forward + backward: output gradients at the taps, recorded
  tap inputs, and per-example gradients of the materialized leaves."""
  closed = plan.jaxpr

  def loss_with_taps(z_taps, z_leaves, example):
    args = list(params_flat)
    for leaf, z in z_leaves.items():
      args[leaf] = args[leaf] + z
    captured = {}

    def on_tap(path, tap, invals, outs):
      captured[path] = invals[tap.data_operand]
      return [outs[0] + z_taps[path]]

    out = _evaluate(closed.jaxpr, closed.consts, args + list(example), (),
                    plan, on_tap)[0]
    return out, captured

  def per_example(example):
    z_taps = {p: _zeros(t.eqn.outvars[0].aval)
              for p, t in plan.taps.items()}
    z_leaves = {leaf: _zeros(jax.typeof(params_flat[leaf]))
                for leaf in plan.materialized}
    return jax.grad(loss_with_taps, argnums=(0, 1), has_aux=True)(
        z_taps, z_leaves, example)

  (g_taps, g_leaves), captured = jax.vmap(per_example)(list(batch_flat))
  return g_taps, g_leaves, captured
