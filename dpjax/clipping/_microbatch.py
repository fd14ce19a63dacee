"""A clipped sum computed in micro-batches of rows (gradient accumulation).

``clipped_grad_sum(..., microbatch_size=m)`` splits a logical batch of B rows
(and its row mask) into k = B / m micro-batches of m consecutive rows. A
``lax.scan`` computes each micro-batch's clipped sum with the same method and
adds it to a running total, so the per-example memory (the per-example
gradients of the vmap path, the layer output gradients of the ghost path) is
that of m rows.

Every row lies in exactly one micro-batch, so the total IS the clipped sum
of the batch: a record moves it by at most C, and the total carries the bound
C. It is noised once and recorded as one step of the sampler that drew the
logical batch (Abadi et al. 2016, Sec. 3.1: the noise is added per "lot",
whatever the groups the gradient is computed in). Adding k ``ClippedSum``
values with ``+`` gives the bound k C instead: that operator cannot know its
terms are sums of disjoint rows, so it keeps the triangle inequality's
bound. ``optax.MultiSteps`` cannot accumulate a ``ClippedSum`` (its
accumulator is a bare pytree, which the noise refuses; optax issue #515).

Example:
  >>> loss = lambda w, x: jnp.sum(w * x)
  >>> x = jnp.array([[3., 4.], [0., .5], [6., 8.], [1., 0.]])
  >>> micro = dpjax.clipped_grad_sum(loss, 1.0, microbatch_size=2)
  >>> out = micro(jnp.ones(2), x, jnp.ones(4, bool))
  >>> out.grad_sum.value, out.grad_sum.l2_norm_clip, out.norms.shape
  (Array([2.2, 2.1], dtype=float32), 1.0, (4,))
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _clipped_sum
from dpjax import _validate


def check_microbatch_size(microbatch_size: Any) -> None:
  """None, or a positive Python int (refused: bool, float, arrays, <= 0)."""
  if microbatch_size is None:
    return
  if isinstance(microbatch_size, bool) or not isinstance(
      microbatch_size, (int, np.integer)):
    raise TypeError(f'Expected microbatch_size= None or a positive int, got '
                    f'{microbatch_size!r}: it fixes the scan\'s static shapes.')
  if microbatch_size < 1:
    raise ValueError(f'Expected microbatch_size= a positive int, got '
                     f'{microbatch_size}.')


def _rows(batch: Any) -> int:
  """The batch size B shared by every leaf's leading axis."""
  sizes = {jnp.shape(x)[0] if jnp.ndim(x) else None
           for x in jax.tree.leaves(batch)}
  if not sizes or None in sizes or len(sizes) > 1:
    raise ValueError('Expected a batch whose leaves share a leading example '
                     f'axis, got leading sizes {sorted(map(str, sizes))}.')
  return sizes.pop()


def _zeros(like: jax.ShapeDtypeStruct) -> jax.Array:
  """Zeros of ``like``'s shape and dtype, varying over the manual mesh axes
  it varies over (the scan's carry inside ``shard_map``)."""
  zeros = jnp.zeros(like.shape, like.dtype)
  varying = getattr(like.manual_axis_type, 'varying', ())
  if varying:
    zeros = jax.lax.pcast(zeros, tuple(sorted(varying)), to='varying')
  return zeros


def microbatched(fn: Callable[..., Any], microbatch_size: int,
                 bound: Any, make_output: Callable[[Any, Any], Any]
                 ) -> Callable[..., Any]:
  """``fn`` computed in micro-batches of ``microbatch_size`` rows, summed.

  Args:
    fn: ``fn(params, batch, mask, coordinate_mask)`` returning a
      ``ClippedGradSum`` of one batch.
    microbatch_size: m, a positive int that divides every batch's B.
    bound: the bound of one clipped per-example gradient (C).
    make_output: ``(ClippedSum, norms) -> ClippedGradSum``.

  Returns:
    A function with ``fn``'s signature whose clipped sum is the sum of the
    micro-batches' (the same bound C: their rows are disjoint) and whose
    norms are the micro-batches' norms in row order.
  """

  def fn_in_microbatches(params, batch, mask, coordinate_mask=None):
    size = _rows(batch)
    mask = _validate.row_mask(mask, size)
    if size % microbatch_size:
      raise ValueError(
          f'Expected microbatch_size={microbatch_size} to divide the batch '
          f'size {size}: choose the sampler\'s max_batch_size a multiple of '
          'it (its padded rows are masked).')
    count = size // microbatch_size
    if count <= 1:
      return fn(params, batch, mask, coordinate_mask)
    split = lambda x: jnp.reshape(
        x, (count, microbatch_size) + jnp.shape(x)[1:])
    chunks = (jax.tree.map(split, jax.tree.map(jnp.asarray, batch)),
              split(mask))

    def chunk_sum(chunk):
      out = fn(params, *chunk, coordinate_mask)
      return out.grad_sum.value, out.norms

    value_shape, _ = jax.eval_shape(
        chunk_sum, jax.tree.map(lambda x: x[0], chunks))
    zeros = jax.tree.map(_zeros, value_shape)

    def body(total, chunk):
      value, norms = chunk_sum(chunk)
      return jax.tree.map(jnp.add, total, value), norms

    total, norms = jax.lax.scan(body, zeros, chunks)
    norms = jax.tree.map(lambda n: jnp.reshape(n, (size,)), norms)
    return make_output(_clipped_sum.make(total, bound), norms)

  return fn_in_microbatches
