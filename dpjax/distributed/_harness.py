"""Protocol-neutral client harness: per-client keys and exact sums of messages.

A distributed protocol here is a pure function over a leading client (or
agent) axis. Every client i encodes its own input x_i with its own key into a
message; a secure aggregator releases only the sum of the messages, which the
server decodes. This module holds the parts that do not depend on the
protocol:

* the key derivation, ``shared_key(key)`` (public randomness of the round,
  e.g. a shared rotation, known to every client and the server) and
  ``client_keys(key, n)`` (client i's private key), computed from the round
  key's protocol stream (``dpjax._keys``, separated from every other
  consumer of the key) and the client's index only, so that they do not
  depend on how the clients are laid out over devices;
* ``client_sum(encode, keys, xs, shared)``: every client's message
  ``encode(key_i, x_i, shared)``, summed over the client axis, vmapped on one
  device or, given a mesh, with ``jax.shard_map`` over one mesh axis and a
  ``jax.lax.psum`` across it. Integer messages are summed exactly, so both
  paths give bit-identical sums from the same keys.

Protocols (cpSGD, and future secure-sum protocols such as the distributed
discrete Gaussian or Skellam mechanisms, whose modular sums are integer sums
too) supply ``encode`` and their own server-side decoding.

Its other names without an underscore (``round_keys``, ``client_key``,
``indexed_keys``, ``check_mesh``) serve the modules of the two parts,
``protocols`` and ``decentralized``; no namespace exports them.
"""

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from dpjax import _keys
from dpjax import _validate

PyTree = Any
Encoder = Callable[[jax.Array, PyTree, PyTree], jax.Array]
_STREAM = _keys.register('protocol_round', __name__)


def _num_clients(num_clients) -> int:
  _validate.positive_int(num_clients=num_clients)
  return int(num_clients)


def shared_key(key: jax.Array) -> jax.Array:
  """The round's shared (public) key: ``jax.random.split(s)[0]``, s the
  protocol stream ``stream(key, 'protocol_round')`` of the round key.

  Every client and the server derive the same key from the round key, e.g.
  for a shared random rotation. It is independent of every client's key
  (``client_keys``), which come from the other half of the split.

  Args:
    key: the round's PRNG key.

  Returns:
    A PRNG key.

  Example:
    >>> s = _keys.stream(jax.random.key(0), 'protocol_round')
    >>> bool(jnp.all(jax.random.key_data(shared_key(jax.random.key(0)))
    ...              == jax.random.key_data(jax.random.split(s)[0])))
    True
  """
  return jax.random.split(_keys.stream(_validate.key(key), _STREAM))[0]


def client_keys(key: jax.Array, num_clients: int) -> jax.Array:
  """The clients' private keys of a round, one per row of the client axis.

  ``client_root = jax.random.split(s)[1]`` (s as in ``shared_key``); client
  i (i = 0..n-1, its row in the client axis) gets
  ``jax.random.fold_in(client_root, i)``. A key
  depends only on the round key and i, never on how clients are sharded, and
  is independent of ``shared_key(key)``.

  Args:
    key: the round's PRNG key.
    num_clients: n >= 1.

  Returns:
    PRNG keys of shape [n].

  Example:
    >>> ks = client_keys(jax.random.key(0), 3)
    >>> ks.shape
    (3,)
    >>> s = _keys.stream(jax.random.key(0), 'protocol_round')
    >>> root = jax.random.split(s)[1]
    >>> bool(jnp.all(jax.random.key_data(ks[2])
    ...              == jax.random.key_data(jax.random.fold_in(root, 2))))
    True
  """
  return round_keys(_validate.key(key), _num_clients(num_clients))[1]


@functools.partial(jax.jit, static_argnums=1)
def round_keys(key: jax.Array,
               num_clients: int) -> tuple[jax.Array, jax.Array]:
  """(shared_key(key), client_keys(key, n)) in one program (no validation)."""
  shared, client_root = jax.random.split(_keys.stream(key, _STREAM))
  return shared, indexed_keys(client_root, num_clients)


def client_key(key: jax.Array, index: jax.typing.ArrayLike) -> jax.Array:
  """``client_keys(key, n)[index]`` for one (possibly traced) index."""
  client_root = jax.random.split(_keys.stream(key, _STREAM))[1]
  return jax.random.fold_in(client_root, jnp.asarray(index, jnp.uint32))


def indexed_keys(root: jax.Array, num_clients: int) -> jax.Array:
  """``jax.random.fold_in(root, i)`` for i = 0..n-1 (uint32 indices)."""
  ids = jnp.arange(num_clients, dtype=jnp.uint32)
  return jax.vmap(lambda i: jax.random.fold_in(root, i))(ids)


def client_sum(encode: Encoder, keys: jax.Array, xs: PyTree,
               shared: PyTree = None, *,
               mesh: jax.sharding.Mesh | None = None,
               axis_name: str = 'clients') -> jax.Array:
  """Sum over clients of ``encode(key_i, x_i, shared)``, vmapped or sharded.

  Without ``mesh``, the encoder is vmapped over the leading client axis of
  ``keys`` and ``xs`` and the messages are summed with ``jnp.sum``. With a
  mesh, the client axis is split over the mesh axis ``axis_name`` with
  ``jax.shard_map``: each device encodes its block of clients and sums it,
  and ``jax.lax.psum`` adds the blocks; the sum is replicated. ``shared``
  (any pytree, e.g. a shared key or traced hyperparameters) is passed
  unchanged (replicated) to every client.

  Integer messages are summed exactly (int32 wraps modulo 2^32 on overflow;
  protocols check their range or work modulo 2^32 on purpose), so the two
  paths are bit-identical from the same keys. Floating messages are
  accepted only without a mesh, where the sum is a fixed ``jnp.sum`` over
  the vmapped messages; a sharded float sum would depend on the layout.

  Args:
    encode: ``(client_key, x, shared) -> message``, one client's pure
      encoder (jax-traceable; static: a new function recompiles).
    keys: per-client PRNG keys [n] (e.g. ``client_keys(key, n)``).
    xs: the clients' inputs, a pytree whose leaves have leading axis n.
    shared: data every client sees (default: none).
    mesh: a ``jax.sharding.Mesh`` to shard the client axis over, or None
      to vmap on one device.
    axis_name: the mesh axis the clients are sharded over; n must be
      divisible by its size.

  Returns:
    The summed message, the shape of one client's message.

  Raises:
    ValueError: a bad mesh or axis, n not divisible by the axis size, or a
      floating message with a mesh.

  Privacy:
    None by itself: it computes what a secure aggregator releases. The
    protocol's event companion states the guarantee for an observer of the
    sum only.

  Example:
    >>> enc = lambda k, x, t: (x > t).astype(jnp.int32)  # one bit per client
    >>> xs = jnp.array([0.1, 0.7, 0.9, 0.3])
    >>> ks = client_keys(jax.random.key(0), 4)
    >>> client_sum(enc, ks, xs, 0.5)
    Array(2, dtype=int32)
    >>> mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ('clients',))
    >>> client_sum(enc, ks, xs, 0.5, mesh=mesh)
    Array(2, dtype=int32)
  """
  if mesh is None:
    return _vmapped_sum(encode, keys, xs, shared)
  check_mesh(mesh, axis_name, jnp.shape(keys)[0])
  message = jax.eval_shape(lambda k, x: encode(k, x, shared),
                           keys[0], jax.tree.map(lambda a: a[0], xs))
  if not jnp.issubdtype(message.dtype, jnp.integer):
    raise ValueError(f'Expected integer messages for a sharded sum (exact in '
                     f'any layout), got dtype {message.dtype}.')
  return _sharded_sum(encode, keys, xs, shared, mesh, axis_name)


def check_mesh(mesh, axis_name, num_clients: int) -> None:
  """Raises ValueError unless n clients can be sharded over the mesh axis."""
  if not isinstance(mesh, jax.sharding.Mesh):
    raise ValueError(f'Expected mesh to be a jax.sharding.Mesh, got '
                     f'{type(mesh).__name__}.')
  if axis_name not in mesh.shape:
    raise ValueError(f'Expected axis_name={axis_name!r} to be one of the mesh '
                     f'axes {tuple(mesh.axis_names)}.')
  if num_clients % mesh.shape[axis_name]:
    raise ValueError(f'Expected the number of clients n={num_clients} to be '
                     f'divisible by the size {mesh.shape[axis_name]} of mesh '
                     f'axis {axis_name!r}.')


def _encode_all(encode: Encoder, keys: jax.Array, xs: PyTree,
                shared: PyTree) -> jax.Array:
  return jax.vmap(lambda k, x: encode(k, x, shared))(keys, xs)


@functools.partial(jax.jit, static_argnums=0)
def _vmapped_sum(encode: Encoder, keys: jax.Array, xs: PyTree,
                 shared: PyTree) -> jax.Array:
  return jnp.sum(_encode_all(encode, keys, xs, shared), axis=0)


@functools.partial(jax.jit, static_argnums=(0, 4, 5))
def _sharded_sum(encode: Encoder, keys: jax.Array, xs: PyTree, shared: PyTree,
                 mesh: jax.sharding.Mesh, axis_name: str) -> jax.Array:
  spec = jax.sharding.PartitionSpec

  def local_sum(local_keys, local_xs, local_shared):
    summed = jnp.sum(_encode_all(encode, local_keys, local_xs, local_shared),
                     axis=0)
    return jax.lax.psum(summed, axis_name)

  # check_vma=False: samplers' loop carries (e.g. the Binomial sampler's
  # fori_loop) are not annotated as varying over the mesh axis; the psum
  # makes the output replicated.
  return jax.shard_map(
      local_sum, mesh=mesh,
      in_specs=(spec(axis_name), spec(axis_name), spec()),
      out_specs=spec(), check_vma=False)(keys, xs, shared)
