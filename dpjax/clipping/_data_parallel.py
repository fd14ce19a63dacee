"""Data-parallel clipped sums: the batch split over a device mesh axis.

DP-SGD's per-example work (gradients, norms, clipping) is independent across
examples, so the batch can be split over devices and only the clipped sum
communicated. ``sharded_clipped_grad_sum`` does this with ``jax.shard_map``:

1. The batch (and its row mask) is split over ``axis_name``; a batch whose
   size is not a multiple of the axis size is padded with masked rows, which
   contribute exactly zero.
2. On each device the parameters are cast to varying
   (``jax.lax.pcast(params, axis_name, to='varying')``). Without the cast the
   gradient of a replicated parameter inside ``shard_map`` is summed over the
   axis, so a "per-example" gradient would mix every device's examples.
3. Each device computes its clipped sum with ``clipped_grad_sum`` (vmap or
   ghost, the single-device code), and ONE ``psum`` adds them up. The result
   is replicated.

The noise is not part of this function: the caller feeds the replicated sum
to the same chain a single-device step uses (``dpjax.dpsgd(learning_rate,
None, sigma, sampler, per_example=False, key=...)``, calibrated
to the bound the sum carries), so the noise is drawn once from the replicated key and
the noisy update equals the single-device one for the same key up to the
float rounding of the sum's order. The step's privacy event, and so the
ledger, is the single-device one.

The idiomatic alternative, ``jax.jit`` with a batch-sharded input, is wrong
for per-example conv gradients under XLA's automatic partitioning;
``clipped_grad_sum`` therefore replicates such a batch (``_sharding.py``):
exact but not parallel.

Example:
  >>> mesh = jax.make_mesh((4,), ('data',))
  >>> loss = lambda w, x: jnp.sum(w * x)
  >>> fn = sharded_clipped_grad_sum(loss, 1.0, mesh=mesh, axis_name='data')
  >>> x = jnp.array([[3., 4.], [0., .5], [1., 0.], [0., 0.], [6., 8.]])
  >>> out = fn(jnp.ones(2), x, jnp.ones(5, bool))  # 5 rows on 4 devices: padded
  >>> out.grad_sum.value, out.norms.shape
  (Array([2.2, 2.1], dtype=float32), (5,))
"""

from typing import Any, Callable

import jax
from jax.sharding import AxisType
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import jax.numpy as jnp

from dpjax import _clipped_sum
from dpjax.clipping import _ghost_plan
from dpjax.clipping import _per_example

PyTree = Any


def _pad_rows(x: jax.Array, rows: int) -> jax.Array:
  if not rows:
    return x
  return jnp.concatenate([x, jnp.zeros((rows,) + x.shape[1:], x.dtype)])


def sharded_clipped_grad_sum(loss_fn: _per_example.LossFn, l2_norm_clip: Any,
                             method: str = 'vmap', *, mesh: Mesh,
                             axis_name: str = 'data',
                             fallback: str = 'per_example',
                             ghost_mode: str = 'auto',
                             layer_norms: str = 'auto',
                             microbatch_size: int | None = None
                             ) -> Callable[..., _per_example.ClippedGradSum]:
  """``clipped_grad_sum`` with the batch split over a mesh axis.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for one example.
    l2_norm_clip: scalar C (may be traced) or a pytree prefix of per-layer
      bounds, as for ``clipped_grad_sum``.
    method: ``'vmap'`` or ``'ghost'``, as for ``clipped_grad_sum``.
    mesh: a ``jax.sharding.Mesh`` with an axis ``axis_name``; the batch is
      split over that axis and replicated over any other.
    axis_name: the data-parallel mesh axis.
    fallback: ghost only, as for ``clipped_grad_sum``.
    ghost_mode: ghost only, as for ``clipped_grad_sum`` (chosen per shard).
    layer_norms: ghost only, as for ``clipped_grad_sum``.
    microbatch_size: None or m: each shard sums its rows in micro-batches of
      m rows, as ``clipped_grad_sum`` does (the batch is padded with masked
      rows to a multiple of m x the axis size).

  Returns:
    ``fn(params, batch, mask, coordinate_mask=None) -> ClippedGradSum``,
    jittable, with the result of ``clipped_grad_sum`` up to float rounding:
    ``grad_sum`` replicated over the mesh, ``norms`` per example [B]. A batch
    of any size B is accepted (padded to a multiple of the axis size with
    masked rows). Params are used replicated.

  Privacy:
    The same sum as ``clipped_grad_sum``, so the same sensitivity
    ``clipped_norm_bound(l2_norm_clip)``; add the noise once, after this
    function, with the single-device chain (``dpjax.dpsgd(learning_rate,
    None, sigma, sampler, per_example=False, key=...)``) and
    record the single-device event (``ledger.record_step``).

  Example:
    >>> mesh = jax.make_mesh((4,), ('data',))
    >>> dense = lambda w, x: jnp.sum(jnp.tanh(x @ w))
    >>> x, w, mask = jnp.ones((8, 3)), jnp.ones((3, 2)), jnp.ones(8, bool)
    >>> fn = sharded_clipped_grad_sum(dense, 1.0, 'ghost', mesh=mesh)
    >>> one = dpjax.clipped_grad_sum(dense, 1.0, 'ghost')(w, x, mask)
    >>> bool(jnp.allclose(fn(w, x, mask).grad_sum.value, one.grad_sum.value,
    ...                   atol=1e-6))
    True
  """
  _per_example.validate_l2_norm_clip(l2_norm_clip)
  if method not in _per_example.METHODS:
    raise ValueError(f'Expected method={method!r} in {_per_example.METHODS}.')
  if fallback not in _ghost_plan.FALLBACKS:
    raise ValueError(
        f'Expected fallback={fallback!r} in {_ghost_plan.FALLBACKS}.')
  # The ghost options are checked here, before any tracing.
  _per_example.clipped_grad_sum(loss_fn, l2_norm_clip, method,
                                fallback=fallback, ghost_mode=ghost_mode,
                                layer_norms=layer_norms,
                                microbatch_size=microbatch_size)
  if not isinstance(mesh, Mesh):
    raise ValueError(f'Expected mesh={mesh!r} to be a jax.sharding.Mesh.')
  if axis_name not in mesh.axis_names:
    raise ValueError(f'Expected axis_name={axis_name!r} in the mesh axes '
                     f'{mesh.axis_names}.')
  num_shards = mesh.shape[axis_name]

  def local(clip, params, batch, mask, coordinate_mask):
    params = jax.lax.pcast(params, axis_name, to='varying')
    out = _per_example.clipped_grad_sum(loss_fn, clip, method,
                                        fallback=fallback,
                                        ghost_mode=ghost_mode,
                                        layer_norms=layer_norms,
                                        microbatch_size=microbatch_size)(
                                            params, batch, mask,
                                            coordinate_mask)
    return jax.lax.psum(out.grad_sum.value, axis_name), out.norms

  def fn(params, batch, mask, coordinate_mask=None):
    batch = jax.tree.map(jnp.asarray, batch)
    size = _per_example._batch_size(batch)
    mask = _per_example._keep(mask, size)
    pad = -size % (num_shards * (microbatch_size or 1))
    batch = jax.tree.map(lambda x: _pad_rows(x, pad), batch)
    mask = _pad_rows(mask, pad)
    mapped = jax.shard_map(
        local, mesh=mesh,
        in_specs=(P(), P(), P(axis_name), P(axis_name), P()),
        out_specs=(P(), P(axis_name)))
    args = (l2_norm_clip, params, batch, mask, coordinate_mask)
    if AxisType.Explicit in mesh.axis_types:  # shard_map wants them placed
      specs = (P(), P(), P(axis_name), P(axis_name), P())
      args = tuple(jax.tree.map(
          lambda x, spec=spec: jax.sharding.reshard(x, NamedSharding(mesh,
                                                                     spec)),
          jax.tree.map(jnp.asarray, arg)) for arg, spec in zip(args, specs))
    grad_sum, norms = mapped(*args)
    if pad and AxisType.Explicit in mesh.axis_types:  # slice a whole array
      norms = jax.tree.map(
          lambda n: jax.sharding.reshard(n, NamedSharding(mesh, P())), norms)
    # The shards' sums are of disjoint rows, each clipped to the bound.
    return _per_example.ClippedGradSum(
        _clipped_sum.make(grad_sum,
                          _per_example.clipped_norm_bound(l2_norm_clip)),
        jax.tree.map(lambda n: n[:size], norms))

  return fn
