"""Distributed discrete Gaussian and Skellam: encode, modular sum, decode.

The protocols of Kairouz, Liu, Steinke (ICML 2021, DDG) and Agarwal,
Kairouz, Liu (NeurIPS 2021, Skellam), written as pure functions over a
leading client axis on the client harness, vmapped or sharded with
``jax.shard_map`` bit-identically:

1. client i clips x_i to L2 norm c, zero-pads it to d' (a power of two) and
   rotates it with the randomized Hadamard transform of the shared key;
2. scales by 1/gamma and rounds each coordinate at random (unbiased,
   ``noise.randomized_round``), redrawing the rounding until the rounded
   vector's L2 norm is at most B = ``config.norm_bound(d)`` (at most
   ``max_rounding_attempts`` draws; after that the client sends zeros, so
   the bound always holds);
3. adds its noise share: N_Z(0, sigma^2)^d' from the exact sampler
   (``noise.discrete_gaussian``), or Sk(mu)^d' = Poisson(mu) - Poisson(mu)
   from ``jax.random.poisson``, which is NOT an exact sampler (float32
   arithmetic; rates above 2^16 are split into J
   i.i.d. parts, since its law is visibly wrong from about 1e6 on; its
   distribution is tested against the Poisson and Skellam pmfs, and the
   accounting assumes the ideal distribution);
4. reduces modulo M = 2^b (uint32) and, optionally, adds its pairwise mask;
5. the aggregator adds the messages modulo M; the server centres the sum,
   multiplies by gamma, rotates back and crops (``server_decode``).

The simulation also returns what the server cannot see: the fraction of
coordinates where the true integer sum left [-M/2, M/2) (modular
wrap-around) and the clients whose rounding never met the bound. A round
whose wrap-around rate exceeds ``max_wraparound_rate`` is flagged
(``SecureSumRound.accepted`` False): callers must not average it in.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpjax import _keys
from dpjax import _validate
from dpjax import noise
from dpjax.compression import inverse_randomized_hadamard
from dpjax.compression import randomized_hadamard
from dpjax.distributed import _harness
from dpjax.distributed.protocols import _inputs
from dpjax.distributed.protocols import _secure_sum
from dpjax.distributed.protocols._ddp_config import check_config
from dpjax.distributed.protocols._ddp_config import DistributedDpConfig

_MASKS = _keys.register('secure_sum_masks', __name__)  # the masks' stream
_U = 2.0**-24  # float32 unit roundoff
# Largest Skellam parameter a client may draw (``dpjax.noise.skellam``'s
# range; mu grows as 4^b at a fixed noise).
MAX_SKELLAM_MU = noise.MAX_SKELLAM_MU


def check_sampler_range(config: DistributedDpConfig) -> None:
  if config.mechanism == 'skellam' and config.local_mu > MAX_SKELLAM_MU:
    raise ValueError(
        f'Expected the local Skellam parameter mu = {config.local_mu:.6g} <= '
        f'{MAX_SKELLAM_MU:g} (2^22), the range where the Poisson sampler is '
        f'drawn in tested parts; use fewer bits={config.bits} or more '
        f'clients (mu grows as 4^b / n at a fixed central noise).')


class SecureSumRound(NamedTuple):
  """One simulated round: the estimate and what the server cannot see.

  Attributes:
    estimate: float32 [d], the decoded mean (or sum) estimate.
    wraparound_rate: fraction of the d' coordinates whose true integer sum
      fell outside [-M/2, M/2) (modular wrap-around), float32 scalar.
    rounding_failures: clients whose conditional rounding exhausted its
      attempts and sent zeros, int32 scalar.
    accepted: wraparound_rate <= the round's ``max_wraparound_rate``.
  """
  estimate: jax.Array
  wraparound_rate: jax.Array
  rounding_failures: jax.Array
  accepted: jax.Array


def _prepare(config, x, rotation_key):
  x = _inputs.clip(x, config.l2_norm_clip)
  d = x.shape[-1]
  x = jnp.pad(x, (0, config.message_length(d) - d))
  return randomized_hadamard(x, key=rotation_key)


def conditional_round(config: DistributedDpConfig, key: jax.Array,
                      y: jax.Array, bound: float) -> tuple[jax.Array,
                                                           jax.Array]:
  """Randomized rounding of y redrawn until ||round(y)||_2 <= bound.

  The test is on fl(sum z_j^2) computed in float32; since any summation
  order's relative error is at most g = (d' + 2) u / (1 - (d' + 2) u)
  (u = 2^-24, Higham 2002, Sec. 3.1), accepting fl(...) <= bound^2 (1 - g)
  guarantees the exact norm is <= bound. Draw t uses ``fold_in(key, t)``.

  Returns:
    (int32 codes, failed): after ``config.max_rounding_attempts`` failing
    draws the codes are zeros and failed is True.
  """
  dp = y.shape[-1]
  g = (dp + 2) * _U / (1 - (dp + 2) * _U)
  limit = jnp.asarray(bound**2 * (1 - g), jnp.float32)

  def draw(t):
    z = noise.randomized_round(jax.random.fold_in(key, t), y)
    zf = z.astype(jnp.float32)
    return z, jnp.sum(zf * zf) <= limit

  def cond(carry):
    t, _, ok = carry
    return (~ok) & (t < config.max_rounding_attempts)

  def body(carry):
    t, _, _ = carry
    z, ok = draw(t)
    return t + 1, z, ok

  z0, ok0 = draw(jnp.asarray(0, jnp.int32))
  _, z, ok = jax.lax.while_loop(cond, body,
                                (jnp.asarray(1, jnp.int32), z0, ok0))
  return jnp.where(ok, z, jnp.zeros_like(z)), ~ok


def _noise(config: DistributedDpConfig, key: jax.Array,
           length: int) -> jax.Array:
  if config.stddev == 0:
    return jnp.zeros((length,), jnp.int32)
  if config.mechanism == 'ddg':
    return noise.discrete_gaussian(key, (length,), sigma=config.local_sigma)
  return noise.skellam(key, (length,), mu=config.local_mu)


def client_values(config, key, x, rotation_key):
  """(integer vector before the modular reduction, rounding failed)."""
  round_key, noise_key = jax.random.split(key)
  y = _prepare(config, x, rotation_key) / jnp.asarray(config.gamma,
                                                      jnp.float32)
  bound = config.norm_bound(x.shape[-1])
  z, failed = conditional_round(config, round_key, y, bound)
  return z + _noise(config, noise_key, y.shape[-1]), failed


def client_encode_modular(config: DistributedDpConfig, key: jax.Array,
                          x: jax.typing.ArrayLike, *,
                          rotation_key: jax.Array) -> jax.Array:
  """One client's DDG or Skellam message: uint32 in [0, 2^b)^d'.

  Clip, pad, rotate (shared ``rotation_key``), scale by 1/gamma, round
  conditionally, add the noise share, reduce modulo 2^b (unmasked; the
  masked messages are built inside ``secure_sum_round``). The client key is
  split into the rounding key and the noise key.

  Args:
    config: a ``DistributedDpConfig``.
    key: the client's private key.
    x: the client's flat vector [d].
    rotation_key: the round's shared key.

  Returns:
    uint32 message [d'].

  Privacy:
    One message carries only one noise share; the guarantee is for the
    modular sum of n messages (``distributed_dp_event``).

  References:
    Kairouz, Liu, Steinke, ICML 2021, Alg. 1; Agarwal, Kairouz, Liu, NeurIPS
    2021, Alg. 1.

  Example:
    >>> cfg = DistributedDpConfig(mechanism='ddg', l2_norm_clip=1.0, bits=8,
    ...                           gamma=0.05, stddev=0.0, num_clients=1)
    >>> m = client_encode_modular(cfg, jax.random.key(0), jnp.ones(3) / 2,
    ...                           rotation_key=jax.random.key(1))
    >>> m.dtype, m.shape
    (dtype('uint32'), (4,))
  """
  check_config(config)
  check_sampler_range(config)
  key = _validate.key(key)
  rotation_key = _validate.key(rotation_key, 'rotation_key')
  x = _inputs.as_float_vector(x, 'x', 1)
  v, _ = client_values(config, key, x, rotation_key)
  return _secure_sum.to_modular(v, config.bits)


def server_decode_modular(config: DistributedDpConfig,
                          rotation_key: jax.Array,
                          summed: jax.typing.ArrayLike,
                          dimension: int) -> jax.Array:
  """The server's estimate of the SUM of the clipped vectors.

  Centres the modular sum into [-M/2, M/2), multiplies by gamma, applies
  the inverse rotation and crops to d. Divide by n for the mean.

  Args:
    config: a ``DistributedDpConfig``.
    rotation_key: the round's shared key.
    summed: uint32 sum of the messages modulo 2^b [d'].
    dimension: d.

  Returns:
    float32 [d].

  Example:
    >>> cfg = DistributedDpConfig(mechanism='ddg', l2_norm_clip=1.0, bits=8,
    ...                           gamma=0.5, stddev=0.0, num_clients=1)
    >>> k = jax.random.key(1)
    >>> s = _secure_sum.to_modular(jnp.array([2, -2], jnp.int32), 8)
    >>> est = server_decode_modular(cfg, k, s, 2)
    >>> bool(jnp.allclose(randomized_hadamard(est, key=k), jnp.array([1., -1.])))
    True
  """
  check_config(config)
  rotation_key = _validate.key(rotation_key, 'rotation_key')
  dimension = _inputs.check_int('dimension', dimension, 1)
  s = jnp.asarray(summed)
  if s.dtype != jnp.uint32 or s.shape != (config.message_length(dimension),):
    raise ValueError(f'Expected summed to be uint32 of shape '
                     f'({config.message_length(dimension)},), got {s.dtype} '
                     f'{s.shape}.')
  return decode(config, rotation_key, s, dimension)


@functools.partial(jax.jit, static_argnums=(0, 3))
def decode(config, rotation_key, summed, dimension):
  c = _secure_sum.centered(summed, config.bits).astype(jnp.float32)
  est = jax.lax.optimization_barrier(c * jnp.asarray(config.gamma,
                                                     jnp.float32))
  return inverse_randomized_hadamard(est, key=rotation_key)[:dimension]


@functools.cache
def _encoder(config: DistributedDpConfig, masked: bool):
  """Harness encoder: message and simulation-only diagnostics, stacked.

  Row 0: the (masked) message bit-cast to int32, plus a 0; row 1: the value
  before reduction, plus the rounding-failure flag. The harness sums int32
  modulo 2^32, so row 0 sums to the modular sum and row 1 to the true sum
  (exact while it fits int32).
  """
  n, bits = config.num_clients, config.bits

  def encode(key, inputs, shared):
    x, index = inputs
    rotation_key, mask_key = shared
    v, failed = client_values(config, key, x, rotation_key)
    message = _secure_sum.to_modular(v, bits)
    if masked:
      message = _secure_sum.add_modular(
          message, _secure_sum.pairwise_mask(mask_key, index, n, v.shape,
                                             bits), bits)
    message = jax.lax.bitcast_convert_type(message, jnp.int32)
    return jnp.stack([jnp.append(message, 0),
                      jnp.append(v, failed.astype(jnp.int32))])
  return encode


def secure_sum_round(config: DistributedDpConfig, key: jax.Array,
                     xs: jax.typing.ArrayLike, *, masked: bool = False,
                     max_wraparound_rate: float = 0.0,
                     mesh: jax.sharding.Mesh | None = None,
                     axis_name: str = 'clients') -> SecureSumRound:
  """One round of distributed mean estimation with a modular secure sum.

  Keys: ``shared_key(key)`` rotates; client i uses ``client_keys(key, n)[i]``;
  masks use ``fold_in(key, tag)``, which the server never uses. Vmapped, or
  sharded over ``mesh`` (bit-identical: integer sums).

  Args:
    config: a ``DistributedDpConfig``; n = ``config.num_clients`` must equal
      the number of rows of ``xs``.
    key: the round's PRNG key.
    xs: client vectors [n, d].
    masked: add pairwise masks (the sum, hence the result, is unchanged).
    max_wraparound_rate: a round with a larger wrap-around rate is flagged
      (``accepted`` False).
    mesh: optional ``jax.sharding.Mesh`` to shard the clients over.
    axis_name: the mesh axis of the clients.

  Returns:
    ``SecureSumRound`` with the mean estimate [d] (decoded sum / n).

  Privacy:
    The server sees only the modular sum; companion event
    ``distributed_dp_event(config, d)``.

  References:
    Kairouz, Liu, Steinke, ICML 2021, Alg. 1-2; Agarwal, Kairouz, Liu,
    NeurIPS 2021, Alg. 1.

  Example:
    >>> cfg = DistributedDpConfig(mechanism='ddg', l2_norm_clip=1.0, bits=12,
    ...                           gamma=0.01, stddev=0.1, num_clients=4)
    >>> r = secure_sum_round(cfg, jax.random.key(0), jnp.ones((4, 3)) / 2)
    >>> r.estimate.shape, bool(r.accepted)
    ((3,), True)
  """
  key, xs = _checked_round_inputs(config, key, xs)
  if not isinstance(masked, bool):
    raise ValueError(f'Expected masked={masked!r} to be a bool.')
  if not 0 <= max_wraparound_rate <= 1:
    raise ValueError(f'Expected max_wraparound_rate={max_wraparound_rate} '
                     'in [0, 1].')
  if mesh is not None:
    _harness.check_mesh(mesh, axis_name, xs.shape[0])
  modular, true_sum, failures = _parts(config, key, xs, masked, mesh,
                                       axis_name)
  return _finish(config, key, modular, true_sum, failures, xs.shape[1],
                 jnp.asarray(max_wraparound_rate, jnp.float32))


@functools.partial(jax.jit, static_argnums=(0, 3, 4, 5))
def _parts(config, key, xs, masked, mesh, axis_name):
  """(modular sum, true integer sum, rounding failures) of one round."""
  n = xs.shape[0]
  rotation_key, keys = _harness.round_keys(key, n)
  mask_key = _keys.stream(key, _MASKS)
  both = _harness.client_sum(_encoder(config, masked), keys,
                             (xs, jnp.arange(n, dtype=jnp.int32)),
                             (rotation_key, mask_key), mesh=mesh,
                             axis_name=axis_name)
  modular = jax.lax.bitcast_convert_type(both[0, :-1], jnp.uint32)
  modular = modular & jnp.asarray(config.modulus - 1, jnp.uint32)
  return modular, both[1, :-1], both[1, -1]


@functools.partial(jax.jit, static_argnums=(0, 5))
def _finish(config, key, modular, true_sum, failures, dimension, max_rate):
  wrapped = _secure_sum.centered(modular, config.bits) != true_sum
  rate = jnp.mean(wrapped.astype(jnp.float32))
  estimate = decode(config, _harness.shared_key(key), modular,
                    dimension) / jnp.asarray(config.num_clients, jnp.float32)
  return SecureSumRound(estimate, rate, failures, rate <= max_rate)


def secure_sum(config: DistributedDpConfig, key: jax.Array,
               xs: jax.typing.ArrayLike, *, masked: bool = False,
               mesh: jax.sharding.Mesh | None = None,
               axis_name: str = 'clients') -> jax.Array:
  """What the aggregator releases: the uint32 sum of the messages mod 2^b.

  Same keys as ``secure_sum_round``; with ``masked`` the result is
  unchanged (the masks cancel), which the tests check.

  Privacy:
    Companion event ``distributed_dp_event(config, d)``.

  Example:
    >>> cfg = DistributedDpConfig(mechanism='ddg', l2_norm_clip=1.0, bits=12,
    ...                           gamma=0.01, stddev=0.1, num_clients=4)
    >>> xs = jnp.ones((4, 3)) / 2
    >>> a = secure_sum(cfg, jax.random.key(0), xs)
    >>> bool(jnp.all(a == secure_sum(cfg, jax.random.key(0), xs, masked=True)))
    True
  """
  key, xs = _checked_round_inputs(config, key, xs)
  if mesh is not None:
    _harness.check_mesh(mesh, axis_name, xs.shape[0])
  return _parts(config, key, xs, bool(masked), mesh, axis_name)[0]


def _checked_round_inputs(config, key, xs):
  """Validates a round's config, key and client vectors [n, d] (float)."""
  check_config(config)
  check_sampler_range(config)
  key = _validate.key(key)
  xs = _inputs.as_float_vector(xs, 'xs', 2)
  if xs.shape[0] != config.num_clients:
    raise ValueError(f'Expected xs with num_clients={config.num_clients} '
                     f'rows, got {xs.shape[0]}.')
  return key, xs
