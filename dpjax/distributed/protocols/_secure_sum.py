"""Secure summation modulo M = 2^b, simulated: modular codes and masks.

A client's integer vector v is sent as v mod M (uint32 in [0, M)); the
aggregator adds the messages modulo M, and the server maps the sum back to
the centred range [-M/2, M/2) (``centered``). Integer addition is exact, so
the modular sum is the same in any order and on any device layout (the
harness adds uint32 messages modulo 2^32, which M divides).

Pairwise additive masks (``pairwise_mask``) show that the server learns only
the sum: client i adds u_i - u_{i-1} (mod M, indices mod n), where u_i is
drawn from a seed that clients i and i+1 share (in a deployment, agreed by a
key exchange; here derived from a mask key that the server never uses).
Each masked message is uniform on Z_M whatever the client's vector (for
n >= 2), and the masks cancel in the sum. This is the ring (2-regular)
instance of pairwise masking; dropout recovery (secret-shared seeds) is not
simulated.

References:
  Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving
  Machine Learning", CCS 2017 (pairwise masks); Bell et al., CCS 2020
  (masks on a sparse graph of neighbours).
"""

import jax
import jax.numpy as jnp

from dpjax import _validate


def _mask(bits: int) -> jax.Array:
  return jnp.asarray((1 << bits) - 1, jnp.uint32)


def to_modular(values: jax.typing.ArrayLike, bits: int) -> jax.Array:
  """int32 values modulo 2^b, as uint32 in [0, 2^b).

  Two's complement makes ``bitcast(v, uint32)`` equal v mod 2^32, and 2^b
  divides 2^32, so masking the low b bits gives v mod 2^b for negative v too.

  Example:
    >>> to_modular(jnp.array([-1, 0, 5, 9], jnp.int32), 3)
    Array([7, 0, 5, 1], dtype=uint32)
  """
  v = jnp.asarray(values)
  if v.dtype != jnp.int32:
    raise ValueError(f'Expected int32 values, got {v.dtype}.')
  return jax.lax.bitcast_convert_type(v, jnp.uint32) & _mask(bits)


def centered(summed: jax.typing.ArrayLike, bits: int) -> jax.Array:
  """A sum modulo 2^b mapped to its representative in [-2^(b-1), 2^(b-1)).

  Shifts the b low bits to the top of a 32-bit word and shifts back
  arithmetically (sign extension): exact for every b in [1, 32].

  Example:
    >>> centered(jnp.array([7, 0, 3, 4], jnp.uint32), 3)
    Array([-1,  0,  3, -4], dtype=int32)
  """
  s = jnp.asarray(summed)
  if s.dtype != jnp.uint32:
    raise ValueError(f'Expected a uint32 modular sum, got {s.dtype}.')
  shift = jnp.asarray(32 - bits, jnp.uint32)
  top = jax.lax.bitcast_convert_type(s << shift, jnp.int32)
  return top >> jnp.asarray(32 - bits, jnp.int32)


def _ring_seed_mask(mask_key: jax.Array, edge: jax.Array, shape,
                    bits: int) -> jax.Array:
  return jax.random.bits(jax.random.fold_in(mask_key, edge), shape,
                         jnp.uint32) & _mask(bits)


def pairwise_mask(mask_key: jax.Array, index: jax.typing.ArrayLike,
                  num_clients: int, shape, bits: int) -> jax.Array:
  """Client ``index``'s mask u_i - u_{i-1} mod 2^b (ring of n clients).

  u_i, the mask shared by clients i and i+1 (mod n), is drawn from
  ``fold_in(mask_key, i)``. Summed over i = 0..n-1 the masks telescope to 0
  mod 2^b. With n = 1 the mask is 0 (nothing to hide from).

  Args:
    mask_key: the round's mask key (never known to the server).
    index: the client's index i in [0, n) (may be traced).
    num_clients: n >= 1.
    shape: the message shape.
    bits: b in [1, 32].

  Returns:
    uint32 mask in [0, 2^b) of ``shape``.

  Example:
    >>> k = jax.random.key(3)
    >>> ms = jnp.stack([pairwise_mask(k, i, 5, (4,), 8) for i in range(5)])
    >>> bool(jnp.all(jnp.sum(ms, axis=0) % 256 == 0))
    True
  """
  _validate.positive_int(num_clients=num_clients)
  index = jnp.asarray(index, jnp.uint32)
  prev = (index + jnp.asarray(num_clients - 1, jnp.uint32)) % jnp.asarray(
      num_clients, jnp.uint32)
  mine = _ring_seed_mask(mask_key, index, shape, bits)
  theirs = _ring_seed_mask(mask_key, prev, shape, bits)
  return (mine - theirs) & _mask(bits)


def add_modular(a: jax.Array, b: jax.Array, bits: int) -> jax.Array:
  """(a + b) mod 2^b for uint32 a, b in [0, 2^b)."""
  return (a + b) & _mask(bits)
