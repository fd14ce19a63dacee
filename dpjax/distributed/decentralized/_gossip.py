"""Gossip over a leading agent axis, vmapped or sharded over a mesh axis.

Decentralized algorithms here are pure functions of pytrees whose leaves
carry a leading agent axis n. Agent i mixes what its neighbours broadcast
with the weights of row i of the mixing matrix W: ``mix(z)_i = sum_j w_ij
z_j`` (``gossip``: W @ z per leaf).

``run_agents`` is the agent harness. It calls a round's body on blocks of
agents: on one device the block is every agent; with a mesh, the agent axis
is split over the mesh axis with ``jax.shard_map`` and each device runs the
body on its block, exchanging broadcasts by ``jax.lax.all_gather`` (the
neighbour exchange; W is dense, so every device receives every broadcast,
and rows of W outside the graph are zero). Both paths compute each agent's
mix with the same dot over the full agent axis, so the results agree bit for
bit (tested on 4 host CPU devices).
"""

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.distributed import _harness

PyTree = Any


def _as_mixing(mixing) -> jax.Array:
  w = jnp.asarray(mixing, jnp.float32)
  if w.ndim != 2 or w.shape[0] != w.shape[1]:
    raise ValueError(f'Expected a square mixing matrix [n, n], got shape '
                     f'{w.shape}.')
  return w


def _mix_rows(rows_w: jax.Array, z_all: PyTree) -> PyTree:
  """rows_w [r, n] @ z_all per leaf (leaves [n, ...]) -> leaves [r, ...]."""
  def leaf(z):
    flat = z.reshape(z.shape[0], -1).astype(jnp.float32)
    out = jnp.dot(rows_w, flat, precision=jax.lax.Precision.HIGHEST)
    return out.reshape((rows_w.shape[0],) + z.shape[1:]).astype(z.dtype)
  return jax.tree.map(leaf, z_all)


def gossip(mixing: jax.typing.ArrayLike, x: PyTree) -> PyTree:
  """One gossip step W @ x, per leaf over the leading agent axis.

  Args:
    mixing: W [n, n] (e.g. ``mixing_matrix(adjacency)``).
    x: pytree of leaves [n, ...].

  Returns:
    The mixed pytree, same shapes and dtypes.

  References:
    Ding et al., Q-DPSGD, Alg. 1 line 8 (the sum over neighbours).

  Example:
    >>> w = jnp.full((2, 2), 0.5)
    >>> gossip(w, jnp.array([[0.0], [2.0]])).tolist()
    [[1.0], [1.0]]
  """
  w = _as_mixing(mixing)
  for leaf in jax.tree.leaves(x):
    if jnp.shape(leaf)[:1] != (w.shape[0],):
      raise ValueError(f'Expected a leading agent axis of size {w.shape[0]} '
                       f'on every leaf, got shape {jnp.shape(leaf)}.')
  return _mix_rows(w, x)


# A round body: body(rows, rows_w, mix, shared, *blocks) -> outputs. ``rows``
# are the block's agent indices (int32 [r]), ``rows_w`` = W[rows],
# ``mix(z_block)`` returns W[rows] @ z over all agents' broadcasts and
# ``shared`` is replicated to every block.
Body = Callable[..., Any]


def run_agents(body: Body, mixing: jax.typing.ArrayLike, shared: PyTree,
               *args: PyTree,
               mesh: jax.sharding.Mesh | None = None,
               axis_name: str = 'agents') -> Any:
  """Runs a round body on every agent, vmapped or sharded; see the module.

  Args:
    body: ``body(rows, rows_w, mix, shared, *blocks) -> outputs``; every
      output leaf has a leading agent axis (the block's). Static: a new
      function recompiles.
    mixing: W [n, n].
    shared: a pytree every block sees whole (e.g. traced step sizes).
    *args: pytrees whose leaves have the leading agent axis n.
    mesh: a ``jax.sharding.Mesh`` to shard agents over, or None.
    axis_name: the mesh axis; n must be divisible by its size.

  Returns:
    The body's outputs for all agents (leading axis n).

  Example:
    >>> def body(rows, rows_w, mix, shared, x):
    ...   return mix(x) * shared
    >>> w = jnp.full((2, 2), 0.5)
    >>> run_agents(body, w, 2.0, jnp.array([0.0, 2.0])).tolist()
    [2.0, 2.0]
  """
  w = _as_mixing(mixing)
  n = w.shape[0]
  if mesh is None:
    return _vmapped(body, w, shared, args)
  _harness.check_mesh(mesh, axis_name, n)
  return _sharded(body, w, shared, args, mesh, axis_name)


def _all_rows(body: Body, w: jax.Array, shared: PyTree, args: tuple) -> Any:
  rows = jnp.arange(w.shape[0], dtype=jnp.int32)
  return body(rows, w, lambda z: _mix_rows(w, z), shared, *args)


_vmapped = jax.jit(_all_rows, static_argnums=0)


@functools.partial(jax.jit, static_argnums=(0, 4, 5))
def _sharded(body: Body, w: jax.Array, shared: PyTree, args: tuple,
             mesh: jax.sharding.Mesh, axis_name: str) -> Any:
  spec = jax.sharding.PartitionSpec
  n = w.shape[0]
  block = n // mesh.shape[axis_name]

  def local(w_full, shared_, *blocks):
    start = jax.lax.axis_index(axis_name) * block
    rows = start + jnp.arange(block, dtype=jnp.int32)
    rows_w = jax.lax.dynamic_slice_in_dim(w_full, start, block, 0)

    def mix(z_block):
      z_all = jax.tree.map(
          lambda z: jax.lax.all_gather(z, axis_name, tiled=True), z_block)
      # The full product, then this block's rows: the same dot as the
      # vmapped path, so the sum over j runs in the same order.
      return jax.tree.map(
          lambda m: jax.lax.dynamic_slice_in_dim(m, start, block, 0),
          _mix_rows(w_full, z_all))

    return body(rows, rows_w, mix, shared_, *blocks)

  in_specs = (spec(), jax.tree.map(lambda _: spec(), shared)) + tuple(
      jax.tree.map(lambda _: spec(axis_name), a) for a in args)
  out_shape = jax.eval_shape(lambda s, *a: _all_rows(body, w, s, a), shared,
                             *args)
  out_specs = jax.tree.map(lambda _: spec(axis_name), out_shape)
  return jax.shard_map(local, mesh=mesh, in_specs=in_specs,
                       out_specs=out_specs, check_vma=False)(w, shared, *args)


def agent_mesh(num_devices: int | None = None,
               axis_name: str = 'agents') -> jax.sharding.Mesh:
  """A 1-D mesh over the first ``num_devices`` devices (default: all)."""
  devices = jax.devices()
  k = len(devices) if num_devices is None else int(num_devices)
  if not 1 <= k <= len(devices):
    raise ValueError(f'Expected num_devices={num_devices} in [1, '
                     f'{len(devices)}].')
  return jax.sharding.Mesh(np.array(devices[:k]), (axis_name,))
