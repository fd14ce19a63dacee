"""Ghost clipping: clipped sums of per-example gradients, never materialized.

DP-SGD needs ``sum_i c_i g_i`` with ``c_i = min(1, C / ||g_i||)``. The vmap
path builds every g_i (B copies of the model). Ghost clipping gets ||g_i|| from
two small tensors a layer already has in the backward pass, its input ``a`` and
the gradient ``g`` w.r.t. its output (Goodfellow 2015; Li et al. 2022, "Large
Language Models Can Be Strong Differentially Private Learners", Sec. 4), and
book-keeping (Bu et al. 2023, "Differentially Private Optimization on Large
Model at Small Cost", Alg. 1) reuses the same ``a`` and ``g`` for the clipped
sum: a step is ONE forward and ONE backward pass plus cheap reductions. This
module holds the public part: ``ghost_grads`` runs that pass and returns a
``GhostGrads``, whose per-leaf squared norms and weighted sums any clipping
rule can use, and ``ghost_plan`` says how each parameter leaf is handled. The
jaxpr analysis that taps the layers is in ``_ghost_plan.py``; the per-layer
norm and book-keeping formulas (Dense / einsum, conv, embedding) are in
``_ghost_rules.py``, those of a leaf with several uses (tied weights) in
``_ghost_shared.py``.

Memory: book-keeping keeps every ghost layer's input and output gradient until
all norms are known (the inputs a non-private backward keeps anyway, plus the
output gradients), and a coordinate mask or a long sequence may select the
direct form for a layer. ``clipped_grad_sum(..., ghost_mode='two_pass')``
(``_ghost_two_pass.py``) keeps none of the output gradients, at the cost of a
second forward and backward pass. Requirements: ``loss_fn(params, example)`` is a
per-example function (no coupling across examples such as BatchNorm, the same
requirement as the vmap path) returning a real scalar; params are float
arrays.
"""

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from dpjax import _numerics
from dpjax.clipping import _ghost_plan
from dpjax.clipping import _ghost_rules
from dpjax.clipping import _ghost_shared
from dpjax.clipping import _sharding

PyTree = Any


class GhostGrads:
  """Per-example gradients of one batch, kept factored (see module doc).

  Built by ``ghost_grads``; ``sq_norms`` and ``weighted_sums`` (book-keeping)
  work per parameter leaf (in ``jax.tree.leaves(params)`` order) so that any
  clipping rule (flat, per-layer) can be applied on top.
  """

  def __init__(self, plan: _ghost_plan.Plan, params_flat, batch_size: int,
               g_taps, g_leaves, captured):
    self._plan = plan
    self._params = params_flat
    self.batch_size = batch_size
    self._g_taps = g_taps
    self._g_leaves = g_leaves
    self._captured = captured

  def _view_mask(self, leaf, m):
    if m is None:
      return None
    paths = self._plan.leaf_taps[leaf]
    m = jnp.asarray(m).astype(self._params[leaf].dtype)
    if len(paths) > 1:  # a shared leaf's norm sees the leaf's layout
      return m.astype(jnp.float32)
    return _ghost_plan.replay(self._plan.taps[paths[0]].chain,
                              m).astype(jnp.float32)

  def _per_leaf(self, masks, materialized, tap_rule) -> list[jax.Array]:
    """One [B] f32 value per leaf: 0 for unused leaves, ``materialized(g)``
    on a materialized (masked) per-example gradient, else ``tap_rule`` on
    the leaf's tap."""
    plan = self._plan
    out = []
    for leaf in range(len(self._params)):
      m = None if masks is None else masks[leaf]
      if leaf in plan.unused:
        out.append(jnp.zeros((self.batch_size,), jnp.float32))
      elif leaf in plan.materialized:
        g = self._g_leaves[leaf]
        if m is not None:
          g = g * jnp.asarray(m).astype(g.dtype)
        out.append(materialized(g))
      else:
        paths = plan.leaf_taps[leaf]
        out.append(tap_rule(
            [plan.taps[p] for p in paths], jnp.shape(self._params[leaf]),
            [self._captured[p] for p in paths],
            [self._g_taps[p] for p in paths], self._view_mask(leaf, m)))
    return out

  def sq_norms(self, masks: Sequence[Any] | None = None) -> list[jax.Array]:
    """Squared per-example norms ||m * g_i||^2 of every leaf, each [B] f32.

    Args:
      masks: optional per-leaf coordinate masks (same shapes as the leaves).
    """
    def materialized(g):
      g = g.astype(jnp.float32)
      return jnp.sum(jnp.square(g), axis=tuple(range(1, g.ndim)))
    return self._per_leaf(masks, materialized, _ghost_shared.leaf_sq_norm)

  def norms(self, masks: Sequence[Any] | None = None) -> list[jax.Array]:
    """Per-example norms ||m * g_i|| of every leaf, each [B] f32, computed
    without overflow (``_ghost_shared.leaf_norm``, ``_numerics.l2_norm``).

    Where ``sq_norms`` is finite its square root agrees with this to float
    rounding; where it overflows, a finite gradient still has a finite norm
    here. Costs about as much as ``sq_norms`` again.
    """
    return self._per_leaf(
        masks, lambda g: _numerics.l2_norm(g, tuple(range(1, g.ndim))),
        _ghost_shared.leaf_norm)

  def weighted_sums(self, weights: Sequence[jax.Array], valid: jax.Array,
                    masks: Sequence[Any] | None = None) -> list[jax.Array]:
    """``m * sum_i w_i g_i`` per leaf over rows with ``valid`` (book-keeping).

    Rows without ``valid`` contribute exactly zero, even if non-finite. Each
    sum is in float32 for a bf16 / f16 leaf (``_numerics.wide``).
    """
    plan = self._plan
    out = []
    for leaf, param in enumerate(self._params):
      w = weights[leaf]
      if leaf in plan.unused:
        total = jnp.zeros(param.shape, _numerics.wide(param.dtype))
      elif leaf in plan.materialized:
        # A reduction of the scaled rows, not a dot with ``w``: XLA fuses it
        # (no masked copy of the per-example gradients), and for a bias the
        # scaled rows are those the layer's book-keeping forms anyway.
        # In float32 for a bf16 leaf, like ``tap_weighted_sum``.
        g = self._g_leaves[leaf]
        rows = _ghost_rules.row_mask(valid, g)
        g = g.astype(_numerics.wide(g.dtype))
        total = jnp.sum(jnp.where(rows, g * w.astype(g.dtype).reshape(
            rows.shape), 0), axis=0).astype(_numerics.wide(param.dtype))
      else:
        paths = plan.leaf_taps[leaf]
        total = _ghost_shared.leaf_weighted_sum(
            [plan.taps[p] for p in paths], param,
            [self._captured[p] for p in paths],
            [self._g_taps[p] for p in paths], w, valid)
      if masks is not None and masks[leaf] is not None:
        total = total * jnp.asarray(masks[leaf]).astype(total.dtype)
      out.append(total)
    return out


def ghost_grads(loss_fn: Callable[[PyTree, PyTree], jax.Array],
                params: PyTree, batch: PyTree, *,
                fallback: str = 'per_example',
                layer_norms: str = 'auto') -> GhostGrads:
  """Runs the batched forward/backward pass of ghost clipping.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example.
    params: the parameters (float leaves).
    batch: the batch, a leading axis B on every leaf.
    fallback: ``'per_example'`` (default) gives leaves that cannot be factored
      exact per-example gradients; ``'error'`` raises a ``ValueError`` naming
      them instead (elementwise uses such as biases are always allowed).
    layer_norms: ``'auto'``, ``'ghost'`` or ``'per_example'``: the norm form
      of layers applied at several positions (``clipped_grad_sum``).

  Returns:
    A ``GhostGrads``.

  References:
    Bu et al. 2023, "Differentially Private Optimization on Large Model at
    Small Cost" (book-keeping, Alg. 1); Li et al. 2022 (ghost norm, eq. 4).

  Example:
    >>> loss = lambda w, x: jnp.sum(jnp.tanh(x @ w))
    >>> grads = ghost_grads(loss, jnp.ones((3, 2)), jnp.ones((4, 3)))
    >>> grads.batch_size, grads.sq_norms()[0].shape
    (4, (4,))
  """
  # A batch sharded over a mesh is replicated first: automatic partitioning
  # of per-example conv gradients is wrong (see ``_sharding.py``).
  batch = _sharding.replicate_on_mesh(jax.tree.map(jnp.asarray, batch))
  params_flat = [jnp.asarray(p) for p in jax.tree.leaves(params)]
  plan = _ghost_plan.make_plan(loss_fn, params, batch, fallback, layer_norms)
  return ghost_grads_from_plan(plan, params_flat, batch)


def ghost_grads_from_plan(plan: _ghost_plan.Plan, params_flat,
                          batch: PyTree) -> GhostGrads:
  """``ghost_grads`` on a plan made by ``_ghost_plan.make_plan`` (batch
  already replicated on a mesh)."""
  g_taps, g_leaves, captured = _ghost_plan.backprop(plan, params_flat,
                                                    jax.tree.leaves(batch))
  g_taps, g_leaves, captured = _sharding.replicate_on_mesh(
      (g_taps, g_leaves, captured))
  # The norms and the book-keeping sums must read the same values. XLA may
  # keep a bf16 / f16 tap in float32 inside one fusion and round it in
  # another (excess precision), so a record's sum could exceed the bound its
  # norm certifies (measured: 1.00005 C on a bf16 Dense). The barrier
  # materializes every tap once, in its own dtype.
  g_taps, g_leaves, captured = jax.lax.optimization_barrier(
      (g_taps, g_leaves, captured))
  batch_size = jax.tree.leaves(batch)[0].shape[0]
  return GhostGrads(plan, params_flat, batch_size, g_taps, g_leaves, captured)


def ghost_plan(loss_fn: Callable[[PyTree, PyTree], jax.Array],
               params: PyTree, batch: PyTree, *,
               layer_norms: str = 'auto') -> dict[str, str]:
  """How ghost clipping handles each parameter leaf (for inspection).

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example.
    params: the parameters.
    batch: a batch (leading axis B) or any pytree of arrays of that shape.
    layer_norms: as for ``clipped_grad_sum``.

  Returns:
    ``{leaf path: description}``, e.g. ``'ghost dense (T=1, ||a||^2
    ||g||^2)'``, ``'per-example (elementwise use: bias/scale)'`` or
    ``'per-example fallback: ... is used 2 times ...'``.

  Example:
    >>> loss = lambda p, x: jnp.sum(jnp.tanh(x @ p['w'] + p['b']))
    >>> params = {'w': jnp.ones((3, 2)), 'b': jnp.zeros(2)}
    >>> for k, v in ghost_plan(loss, params, jnp.ones((4, 3))).items():
    ...   print(k, '->', v)
    ['b'] -> per-example (elementwise use: bias/scale)
    ['w'] -> ghost dense (T=1, ||a||^2 ||g||^2)
  """
  batch = jax.tree.map(jnp.asarray, batch)
  plan = _ghost_plan.make_plan(loss_fn, params, batch, 'per_example',
                               layer_norms)
  out = {}
  for leaf, name in enumerate(_ghost_plan.leaf_names(params)):
    if leaf in plan.unused:
      out[name] = 'unused (zero gradient)'
    elif leaf in plan.materialized:
      out[name] = plan.materialized[leaf]
    else:
      out[name] = _ghost_shared.describe(
          [plan.taps[p] for p in plan.leaf_taps[leaf]],
          jnp.shape(jax.tree.leaves(params)[leaf]))
  return out
