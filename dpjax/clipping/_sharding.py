"""Keeps per-example gradients away from automatic batch partitioning.

Under ``jax.jit`` with a batch sharded over a device mesh, XLA's partitioner
splits the batch axis of ``jax.vmap``-ed per-example gradients. For
convolutions (whose per-example kernel gradient becomes a grouped
convolution) it does so wrongly: on 4 host CPU devices every shard but the
first gets wrong per-example conv kernel gradients (dense layers stay exact).
A clipped sum built on them would silently be wrong, and so would its
privacy guarantee, which assumes each clipped gradient is the example's own.

The guard: every batch-shaped input of a per-example computation is
constrained to be replicated over the mesh's automatic axes, so the
computation sees the whole batch on every device and matches one device
exactly. Correct, but not parallel: for data-parallel DP-SGD use
``sharded_clipped_grad_sum`` (``_data_parallel.py``), which splits the batch
with ``jax.shard_map`` where per-example gradients are exact. Inside a
``shard_map`` (manual axes) the guard does nothing.

Example:
  >>> replicate_on_mesh({'x': jnp.ones(3)})['x'].shape  # no mesh: unchanged
  (3,)
"""

from typing import Any

import jax
from jax.sharding import AxisType
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec

PyTree = Any


def _replicated(x: Any) -> Any:
  sharding = getattr(jax.typeof(x), 'sharding', None)
  mesh = getattr(sharding, 'mesh', None)
  if mesh is None or mesh.empty:
    return x
  auto = [name for name, kind in zip(mesh.axis_names, mesh.axis_types)
          if kind != AxisType.Manual and mesh.shape[name] > 1]
  if not auto:
    return x
  if AxisType.Explicit in mesh.axis_types:  # sharding in types
    return jax.sharding.reshard(x, NamedSharding(mesh, PartitionSpec()))
  return jax.lax.with_sharding_constraint(x, NamedSharding(mesh,
                                                           PartitionSpec()))


def replicate_on_mesh(tree: PyTree) -> PyTree:
  """Constrains every array leaf to be replicated over its mesh (see module).

  Leaves outside a multi-device mesh, or inside ``jax.shard_map``, pass
  through unchanged.

  Example:
    >>> replicate_on_mesh((jnp.zeros(2), 1.0))[1]
    1.0
  """
  return jax.tree.map(
      lambda x: _replicated(x) if isinstance(x, jax.Array) else x, tree)
