"""Domain-separated key streams: one per consumer of randomness.

A consumer (a transform's noise, a sampler, a protocol, a release) never draws
from the user's key itself: it draws from ``stream(key, name)`` =
``fold_in(key, crc32(name))`` with its own registered ``name``, before any
``fold_in`` of the step. One user key given to a sampler and to a noise
transform then yields independent draws (a key shared by two consumers
otherwise correlates them: Poisson selection bits and DP-SGD noise of one
``fold_in(key, t)`` let the noise encode the batch). Names are registered once
per module at import; two modules cannot claim one name, and no two names
share a constant.

A privatizer also folds its public parameters into its key (``fold_public``:
the noise multiplier, the bound of the sum it noises), so two privatizers
that differ in them draw independent noise from one user key: otherwise the
releases S_1 + sigma_1 C_1 z and S_2 + sigma_2 C_2 z of one draw z give a
combination of the sums without noise.

Example:
  >>> k = jax.random.key(0)
  >>> a = stream(k, 'poisson_sampler')
  >>> b = stream(k, 'dpsgd_noise')
  >>> bool(jnp.any(jax.random.key_data(a) != jax.random.key_data(b)))
  True
"""

import zlib

import jax
import jax.numpy as jnp
import numpy as np

_REGISTRY: dict[str, tuple[int, str]] = {}


def constant(name: str) -> int:
  """The fixed 32-bit constant of ``name``: CRC-32 of its UTF-8 bytes.

  Example:
    >>> constant('dpsgd_noise') == zlib.crc32(b'dpsgd_noise')
    True
  """
  return zlib.crc32(name.encode('utf-8'))


def register(name: str, owner: str) -> str:
  """Claims ``name`` for the module ``owner``; returns ``name``.

  Re-registering by the same owner is a no-op (a module reload).

  Raises:
    ValueError: ``name`` is claimed by another module, or its constant
      collides with another name's.

  Example:
    >>> register('poisson_sampler', 'dpjax.sampling._poisson')
    'poisson_sampler'
  """
  if not isinstance(name, str) or not name:
    raise ValueError(f'Expected name= a non-empty string, got {name!r}.')
  c = constant(name)
  if name in _REGISTRY:
    if _REGISTRY[name][1] != owner:
      raise ValueError(f'Key stream name {name!r} is already used by '
                       f'{_REGISTRY[name][1]}: two consumers of one stream '
                       'draw correlated randomness.')
    return name
  for other, (oc, _) in _REGISTRY.items():
    if oc == c:
      raise ValueError(f'Key stream name {name!r} has the constant of '
                       f'{other!r}; choose another name.')
  _REGISTRY[name] = (c, owner)
  return name


def registered() -> dict[str, int]:
  """The registered names and their constants.

  Example:
    >>> registered()['dpsgd_noise'] == constant('dpsgd_noise')
    True
  """
  return {name: c for name, (c, _) in _REGISTRY.items()}


def stream(key: jax.Array, name: str) -> jax.Array:
  """The key of consumer ``name``: ``fold_in(key, constant(name))``.

  Jittable (the constant is static); the key keeps its type (typed or raw).

  Args:
    key: the user's PRNG key.
    name: a registered stream name.

  Returns:
    The consumer's key, independent of every other name's.

  Raises:
    ValueError: ``name`` is not registered.

  Example:
    >>> k = jax.random.key(0)
    >>> s = stream(k, 'dpsgd_noise')
    >>> bool(jnp.all(jax.random.key_data(s) == jax.random.key_data(
    ...     jax.random.fold_in(k, np.uint32(constant('dpsgd_noise'))))))
    True
  """
  if name not in _REGISTRY:
    raise ValueError(f'Expected name= a registered key stream, got {name!r}.')
  return jax.random.fold_in(key, np.uint32(_REGISTRY[name][0]))


def fold_public(key: jax.Array, *values: jax.typing.ArrayLike) -> jax.Array:
  """``key`` with the float32 bits of each public scalar folded in, in order.

  Jittable and vmappable (the values may be traced). Only public values
  (hyperparameters, bounds) may be folded: the key would otherwise depend
  on the data.

  Example:
    >>> k = jax.random.key(0)
    >>> a, b = fold_public(k, 1.0), fold_public(k, 2.0)
    >>> bool(jnp.any(jax.random.key_data(a) != jax.random.key_data(b)))
    True
  """
  for value in values:
    bits = jax.lax.bitcast_convert_type(
        jnp.asarray(value, jnp.float32), jnp.uint32)
    key = jax.random.fold_in(key, bits)
  return key
