"""Per-example gradients and clipped sums (the vmap and ghost paths).

A per-example gradient g_i is clipped to g_i * min(1, C / ||g_i||) and the
clipped gradients are summed (Abadi et al. 2016, eqs. (2)-(4) of Zhu &
Blaschko). With per-layer clipping, ``l2_norm_clip`` is a pytree of bounds C_l
(a prefix of the gradient tree) and each group is clipped on its own; one
clipped gradient then has L2 norm at most sqrt(sum_l C_l^2).

Three rules keep the sum's sensitivity honest:

* Padded rows (``mask`` False) contribute exactly zero.
* A per-example gradient with a non-finite norm (NaN or inf anywhere) is
  *dropped*: it contributes exactly zero, like a padded row. Zero is inside the
  clipping ball, so the sensitivity bound still holds. The returned norms keep
  the non-finite value, so callers can count drops with ``count_nonfinite``.
  That count depends on the data and is not privatized.
* Norms, clip weights and the weighted sum are float32 for a leaf in bf16 or
  f16, and the sum is RETURNED in float32 (``_numerics.wide`` of the leaf's
  dtype): rounding a batch sum to bf16 would move it by up to half an ulp of
  the sum, far more than C for a sum of many records. The noise is then
  added in float32; ``optax.apply_updates`` casts the update to the
  parameter's dtype, post-processing that costs no privacy.

``clipped_grad_sum(..., method='ghost')`` gives the same clipped sum without
materializing per-example gradients (``ghost_grads``, ``_ghost.py``); both
methods share the clipping rule (``_clip_factored``), so padding, per-layer
bounds and the non-finite rule behave identically.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _clipped_sum
from dpjax.clipping import _ghost
from dpjax.clipping import _ghost_plan
from dpjax.clipping import _microbatch
from dpjax.clipping import _ghost_two_pass
from dpjax.clipping import _sharding
from dpjax import _numerics
from dpjax import _validate

PyTree = Any
ClippedSum = _clipped_sum.ClippedSum
LossFn = Callable[[PyTree, PyTree], jax.Array]

# Ways ``clipped_grad_sum`` computes the clipped sum (``method=``).
METHODS = ('vmap', 'ghost')


class ClippedGradSum(NamedTuple):
  """Sum of clipped per-example gradients and the per-example norms.

  Attributes:
    grad_sum: a ``ClippedSum``: ``.value`` is the pytree shaped like params,
      sum_i clip(g_i) over unmasked rows; ``.l2_norm_clip`` its bound
      ``clipped_norm_bound(l2_norm_clip)``. Feed it as it is to
      ``add_dpsgd_noise`` (``dpsgd(learning_rate, None, sigma,
      sampler, per_example=False, key=...)``), which
      calibrates its noise to that bound.
    norms: per-example L2 norms before clipping, shape [B] (flat clipping) or
      a pytree of [B] arrays shaped like ``l2_norm_clip`` (per-layer).
  """
  grad_sum: PyTree
  norms: PyTree


def per_example_grads(loss_fn: LossFn) -> Callable[[PyTree, PyTree], PyTree]:
  """Returns ``fn(params, batch)``: gradients of ``loss_fn`` per example.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example; the batch
      passed to the returned function has a leading axis B on every leaf.

  Returns:
    A function giving a pytree shaped like params with a leading axis B.
    Under ``jax.jit`` with a batch sharded over a mesh, the batch is
    replicated first (automatic partitioning of per-example conv gradients is
    wrong; ``_sharding.py``): exact, not parallel. For data parallelism use
    ``sharded_clipped_grad_sum``.

  Example:
    >>> loss = lambda w, x: jnp.sum(w * x)
    >>> per_example_grads(loss)(jnp.ones(2), jnp.arange(6.).reshape(3, 2))
    Array([[0., 1.],
           [2., 3.],
           [4., 5.]], dtype=float32)
  """
  grads_fn = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0))

  def fn(params, batch):
    return _sharding.replicate_on_mesh(
        grads_fn(params, _sharding.replicate_on_mesh(batch)))

  return fn


def clipped_norm_bound(l2_norm_clip: Any) -> Any:
  """L2 bound on one clipped per-example gradient: C, or sqrt(sum_l C_l^2).

  A float for concrete bounds; a traced scalar when a bound is traced.

  The clipped sum then has L2 sensitivity ``clipped_norm_bound`` under
  add/remove-one neighbours and twice that under replace-one.

  Example:
    >>> clipped_norm_bound({'a': 3.0, 'b': 4.0})
    5.0
  """
  leaves = jax.tree.leaves(l2_norm_clip)
  if any(isinstance(c, jax.core.Tracer) for c in leaves):  # traced C
    return leaves[0] if len(leaves) == 1 else jnp.sqrt(
        sum(jnp.square(c) for c in leaves))
  bounds = np.asarray(leaves, dtype=np.float64)
  return float(np.sqrt(np.sum(bounds**2)))


validate_l2_norm_clip = _validate.l2_norm_clip
check_per_example = _validate.per_example_grads
_keep = _validate.row_mask
_weighted_sum = _numerics.weighted_row_sum


def _leaf_sq_norm(x: jax.Array) -> jax.Array:
  return jnp.sum(jnp.square(x.astype(jnp.float32)),
                 axis=tuple(range(1, x.ndim)))


def _clip_weight(clip: Any, norm: jax.Array, valid: jax.Array) -> jax.Array:
  """min(1, C / norm) in float32 on valid rows, else 0."""
  clip = jnp.asarray(clip, jnp.float32)
  return jnp.where(valid, jnp.minimum(1.0, clip / norm.astype(jnp.float32)),
                   0.0)


def _clip_factored(sq_norms: list[jax.Array],
                   weighted_sums: Callable[[list[jax.Array], jax.Array], list],
                   l2_norm_clip: Any, treedef: Any,
                   keep: jax.Array,
                   safe_norms: (list[jax.Array]
                                | Callable[[], list[jax.Array]]) = None
                   ) -> ClippedGradSum:
  """The clipping rule on per-leaf squared norms; shared by vmap and ghost.

  Args:
    sq_norms: per parameter leaf, the per-example squared norms [B].
    weighted_sums: ``(per-leaf weights [B], valid [B]) -> per-leaf sums
      sum_i w_i g_i`` over valid rows (invalid rows exactly zero).
    l2_norm_clip: scalar or pytree prefix of ``treedef``'s tree.
    treedef: the parameter tree structure.
    keep: bool [B], False for padded rows.
    safe_norms: overflow-safe per-leaf norms [B], or a function returning
      them (then called, under ``lax.cond``, only when some kept row's sum of
      squared norms overflows); used where that sum overflows float32, so
      finite gradients are clipped, not dropped. Elsewhere the norm is
      exactly sqrt(sum of squared norms).
  """
  weights, valid, norms, clip_def = _clip_weights(
      sq_norms, l2_norm_clip, treedef, keep, safe_norms)
  grad_sum = jax.tree.unflatten(treedef, weighted_sums(weights, valid))
  return ClippedGradSum(
      _clipped_sum.make(grad_sum, clipped_norm_bound(l2_norm_clip)),
      jax.tree.unflatten(clip_def, norms))


def _clip_weights(sq_norms, l2_norm_clip, treedef, keep, safe_norms):
  """(per-leaf weights [B], valid [B], per-group norms, clip treedef): the
  rule of ``_clip_factored`` before the sum."""
  clips, clip_def = jax.tree.flatten(l2_norm_clip)
  index_tree = jax.tree.unflatten(treedef, list(range(treedef.num_leaves)))
  groups = [jax.tree.leaves(sub) for sub in clip_def.flatten_up_to(index_tree)]
  totals = [sum((sq_norms[i] for i in group[1:]), sq_norms[group[0]])
            if group else jnp.zeros(keep.shape, jnp.float32)
            for group in groups]
  plain = [jnp.sqrt(total) for total in totals]

  def rescued(safe):
    return [jnp.where(jnp.isfinite(total), norm, _numerics.combine_norms(
        [safe[i] for i in group])) if group else norm
            for total, norm, group in zip(totals, plain, groups)]

  if safe_norms is None:
    norms = plain
  elif callable(safe_norms):
    overflow = jnp.zeros(keep.shape, bool)
    for total in totals:
      overflow = overflow | ~jnp.isfinite(total)
    norms = jax.lax.cond(jnp.any(overflow & keep),
                         lambda: rescued(safe_norms()), lambda: plain)
  else:
    norms = rescued(safe_norms)
  # A non-finite norm in any group drops the whole example, so one example's
  # contribution stays inside the product of the group balls.
  valid = keep
  for n in norms:
    valid = valid & jnp.isfinite(n)
  weights = [None] * treedef.num_leaves
  for clip, norm, group in zip(clips, norms, groups):
    weight = _clip_weight(clip, norm, valid)
    for i in group:
      weights[i] = weight
  return weights, valid, norms, clip_def


def _two_pass(plan, params_flat, batch_flat, masks, l2_norm_clip, treedef,
              keep) -> ClippedGradSum:
  """The clipping rule on the two-pass form (``_ghost_two_pass``): its norms
  are overflow-safe, so they are also the rule's safe norms."""
  def rule(norms):
    weights, valid, _, _ = _clip_weights(
        [jnp.square(n) for n in norms], l2_norm_clip, treedef, keep, norms)
    return weights, valid

  sums, norms = _ghost_two_pass.two_pass_sums(plan, params_flat, batch_flat,
                                              masks, rule)
  _, _, group_norms, clip_def = _clip_weights(
      [jnp.square(n) for n in norms], l2_norm_clip, treedef, keep, norms)
  return ClippedGradSum(
      _clipped_sum.make(jax.tree.unflatten(treedef, sums),
                        clipped_norm_bound(l2_norm_clip)),
      jax.tree.unflatten(clip_def, group_norms))


def clip_and_sum(grads: PyTree, l2_norm_clip: Any,
                 mask: jax.typing.ArrayLike) -> ClippedGradSum:
  """Clips per-example gradients (leading axis B) and sums them.

  Args:
    grads: pytree of per-example gradients, leading axis B on every leaf.
    l2_norm_clip: a positive scalar C (flat clipping) or a pytree of positive
      bounds that is a prefix of ``grads`` (per-layer clipping: each subtree
      is clipped to its own bound).
    mask: bool [B] (required); False marks padded rows, which contribute
      zero. ``jnp.ones(B, bool)`` for a batch without padding.

  Returns:
    ``ClippedGradSum(grad_sum, norms)``.

  Example:
    >>> g = {'w': jnp.array([[3., 4.], [0.3, 0.4]])}
    >>> out = clip_and_sum(g, 1.0, jnp.ones(2, bool))
    >>> out.grad_sum.value['w'], out.norms
    (Array([0.90000004, 1.2       ], dtype=float32), Array([5. , 0.5], dtype=float32))
  """
  validate_l2_norm_clip(l2_norm_clip)
  batch = check_per_example(grads)
  leaves, treedef = jax.tree.flatten(grads)
  keep = _keep(mask, batch)
  return _clip_factored(
      [_leaf_sq_norm(g) for g in leaves],
      lambda weights, valid: [_weighted_sum(g, w, valid)
                              for g, w in zip(leaves, weights)],
      l2_norm_clip, treedef, keep,
      [_numerics.l2_norm(g, tuple(range(1, g.ndim))) for g in leaves])


def unclipped_sum(grad_sum: PyTree, l2_norm_clip: Any) -> ClippedSum:
  """A gradient sum that was NOT clipped, for the noisy-SGD ablation.

  The noise transforms take only a ``ClippedSum``; this one has unit
  ``'unclipped'`` and the nominal bound ``clipped_norm_bound(l2_norm_clip)``,
  so the noise adds sigma times it (Zhu & Blaschko Alg. 2), and
  ``dpjax.accounting.step_event`` refuses to record such a step: it has no
  privacy guarantee.

  Example:
    >>> s = unclipped_sum({'w': jnp.array([3., 4.])}, 1.0)
    >>> s.unit, s.l2_norm_clip
    ('unclipped', 1.0)
  """
  validate_l2_norm_clip(l2_norm_clip)
  return _clipped_sum.make(grad_sum, clipped_norm_bound(l2_norm_clip),
                           'unclipped')


def count_nonfinite(norms: PyTree,
                    mask: jax.typing.ArrayLike | None = None) -> jax.Array:
  """Number of (unmasked) examples dropped for a non-finite gradient norm.

  Not private: report it as a diagnostic only.
  """
  leaves = jax.tree.leaves(norms)
  bad = jnp.zeros(leaves[0].shape, bool)
  for n in leaves:
    bad = bad | ~jnp.isfinite(n)
  if mask is not None:
    bad = bad & jnp.asarray(mask, bool)
  return jnp.sum(bad, dtype=jnp.int32)


def _coordinate_mask_leaves(coordinate_mask: PyTree, treedef: Any) -> list:
  try:
    return treedef.flatten_up_to(coordinate_mask)
  except (ValueError, TypeError) as e:
    raise ValueError('Expected coordinate_mask to be a pytree shaped like '
                     f'params ({treedef}).') from e


def _batch_size(batch: PyTree) -> int:
  leaves = jax.tree.leaves(batch)
  if not leaves or jnp.ndim(leaves[0]) < 1:
    raise ValueError('Expected a batch with a leading example axis.')
  return jnp.shape(leaves[0])[0]


def clipped_grad_sum(loss_fn: LossFn, l2_norm_clip: Any,
                     method: str = 'vmap', *,
                     fallback: str = 'per_example',
                     ghost_mode: str = 'auto',
                     layer_norms: str = 'auto',
                     microbatch_size: int | None = None
                     ) -> Callable[..., ClippedGradSum]:
  """Returns ``fn(params, batch, mask, coordinate_mask=None)``.

  ``fn`` returns ``ClippedGradSum(grad_sum, norms)``: the sum over unmasked
  rows of clip(m * g_i), g_i the gradient of ``loss_fn`` at example i, and the
  norms ||m * g_i|| before clipping. ``m`` (``coordinate_mask``, a pytree
  shaped like params, usually 0/1, e.g. a random-sparsification mask of Zhu &
  Blaschko Alg. 1) defaults to all ones.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for one example.
    l2_norm_clip: scalar C or a pytree prefix of per-layer bounds (see
      ``clip_and_sum``).
    method: ``'vmap'`` materializes per-example gradients with ``jax.vmap``;
      ``'ghost'`` computes the same result from layer inputs and output
      gradients without per-example gradients (ghost norms + book-keeping,
      ``dpjax.clipping.ghost_grads``): one forward and one backward pass.
    fallback: ghost only. Parameters the ghost path cannot factor (used
      twice, e.g. tied weights, or by an unsupported op) get exact
      per-example gradients (``'per_example'``, default) or raise a
      ``ValueError`` naming them (``'error'``). See ``dpjax.clipping.ghost_plan``.
    ghost_mode: ghost only. ``'bookkeeping'``: one backward pass that keeps
      every tapped layer's output gradient until the norms are known (Bu et
      al. 2023); ``'two_pass'``: a first backward reduces each layer to its
      norms at once, a second forms the clipped sum (about twice the time,
      memory of one layer at a time; ``docs/ghost_clipping.md``);
      ``'auto'`` (default): two_pass when book-keeping's output gradients
      would exceed both 2x the parameter bytes and 64 MiB.
    layer_norms: ghost only; how a layer applied at T > 1 positions (a
      sequence, a conv) gets its norms: ``'auto'`` (default) the Gram
      (ghost) form iff T^2 <= K N for its K x N weight (Bu et al. 2022),
      else the layer's instantiated per-example gradient; ``'ghost'`` or
      ``'per_example'`` force one form on every such layer.
    microbatch_size: None (default: the whole batch at once) or m, a
      positive int dividing B: the sum is computed in B / m micro-batches of
      m rows under a ``lax.scan`` (``_microbatch.py``), with the per-example
      memory of m rows. The same clipped sum (to float summation order) and
      bound C: the micro-batches partition the batch, so the noise is added
      once and the step is recorded once (gradient accumulation).

  Returns:
    A jittable function of ``(params, batch, mask, coordinate_mask=None)``;
    ``mask`` (bool [B], required) is False on padded rows. A DP-SGD step
    feeds its ``grad_sum`` (a ``ClippedSum`` carrying its bound) to
    ``dpsgd(learning_rate, None, sigma, sampler,
    per_example=False, key=...)``, which takes no ``l2_norm_clip``: the
    noise is calibrated to the bound the sum carries.

  Privacy:
    The returned sum has L2 sensitivity ``clipped_norm_bound(l2_norm_clip)``
    under add/remove-one and twice that under replace-one, whatever the data
    (padded and non-finite rows contribute zero). ``coordinate_mask`` must not
    depend on the data. Both methods compute the same norms up to float
    rounding.

  References:
    Abadi et al. 2016, "Deep Learning with Differential Privacy", Alg. 1.
    Bu et al. 2023, "Differentially Private Optimization on Large Model at
    Small Cost", Alg. 1 (book-keeping ghost clipping).

  Example:
    >>> loss = lambda w, x: jnp.sum(w * x)
    >>> fn = clipped_grad_sum(loss, l2_norm_clip=1.0)
    >>> x = jnp.array([[3., 4.], [0., 0.5]])
    >>> fn(jnp.ones(2), x, jnp.ones(2, bool)).grad_sum.value
    Array([0.6, 1.3], dtype=float32)
    >>> dense = lambda w, x: jnp.sum(jnp.tanh(x @ w))
    >>> x, w = jnp.array([[3., 4.], [0., 0.5]]), jnp.ones((2, 3))
    >>> ghost = clipped_grad_sum(dense, 1.0, method='ghost')(w, x, jnp.ones(2, bool))
    >>> exact = clipped_grad_sum(dense, 1.0)(w, x, jnp.ones(2, bool))
    >>> bool(jnp.allclose(ghost.grad_sum.value, exact.grad_sum.value,
    ...                   atol=1e-6))
    True
  """
  validate_l2_norm_clip(l2_norm_clip)
  if method not in METHODS:
    raise ValueError(f'Expected method={method!r} in {METHODS}.')
  if fallback not in _ghost_plan.FALLBACKS:
    raise ValueError(
        f'Expected fallback={fallback!r} in {_ghost_plan.FALLBACKS}.')
  if ghost_mode not in _ghost_two_pass.GHOST_MODES:
    raise ValueError(f'Expected ghost_mode={ghost_mode!r} in '
                     f'{_ghost_two_pass.GHOST_MODES}.')
  if layer_norms not in _ghost_plan.LAYER_NORMS:
    raise ValueError(f'Expected layer_norms={layer_norms!r} in '
                     f'{_ghost_plan.LAYER_NORMS}.')
  _microbatch.check_microbatch_size(microbatch_size)
  grads_fn = per_example_grads(loss_fn)

  def empty(params, mask):
    _keep(mask, 0)
    return ClippedGradSum(
        _clipped_sum.make(jax.tree.map(
            lambda p: jnp.zeros(jnp.shape(p), _numerics.wide(
                jnp.result_type(p))), params),
                          clipped_norm_bound(l2_norm_clip)),
        jax.tree.map(lambda _: jnp.zeros((0,), jnp.float32), l2_norm_clip))

  def vmap_fn(params, batch, mask, coordinate_mask=None):
    mask = _sharding.replicate_on_mesh(mask)
    if _batch_size(batch) == 0:
      return empty(params, mask)
    grads = grads_fn(params, batch)
    if coordinate_mask is not None:
      treedef = jax.tree.structure(grads)
      masks = _coordinate_mask_leaves(coordinate_mask, treedef)
      grads = jax.tree.unflatten(treedef, [
          g * jnp.asarray(m).astype(g.dtype)
          for g, m in zip(jax.tree.leaves(grads), masks)])
    return clip_and_sum(grads, l2_norm_clip, mask)

  def ghost_fn(params, batch, mask, coordinate_mask=None):
    mask = _sharding.replicate_on_mesh(mask)
    if _batch_size(batch) == 0:
      return empty(params, mask)
    treedef = jax.tree.structure(params)
    masks = (None if coordinate_mask is None
             else _coordinate_mask_leaves(coordinate_mask, treedef))
    batch = _sharding.replicate_on_mesh(jax.tree.map(jnp.asarray, batch))
    params_flat = [jnp.asarray(p) for p in jax.tree.leaves(params)]
    plan = _ghost_plan.make_plan(loss_fn, params, batch, fallback,
                                 layer_norms)
    keep = _keep(mask, _batch_size(batch))
    if _ghost_two_pass.choose_mode(plan, params_flat, _batch_size(batch),
                                   ghost_mode) == 'two_pass':
      return _two_pass(plan, params_flat, jax.tree.leaves(batch), masks,
                       l2_norm_clip, treedef, keep)
    grads = _ghost.ghost_grads_from_plan(plan, params_flat, batch)
    return _clip_factored(
        grads.sq_norms(masks),
        lambda weights, valid: grads.weighted_sums(weights, valid, masks),
        l2_norm_clip, treedef, keep, lambda: grads.norms(masks))

  fn = vmap_fn if method == 'vmap' else ghost_fn
  if microbatch_size is None:
    return fn
  return _microbatch.microbatched(fn, microbatch_size,
                                  clipped_norm_bound(l2_norm_clip),
                                  ClippedGradSum)
