"""cpSGD: k-level quantization plus the Binomial mechanism, over many clients.

The protocol of Agarwal et al. (2018, Sec. 4.2-4.3) for differentially private,
communication-efficient distributed mean estimation, written as pure functions
over a leading client axis on the client harness (``_harness``), so the same
code runs vmapped on one device or sharded over a mesh with ``jax.shard_map``:

1. Client i clips its flat vector X_i (length d) to L2 norm D.
2. Optionally (``rotate=True``) it zero-pads X_i to the next power of two d'
   and applies the randomized Hadamard rotation R = H A / sqrt(d') with
   *shared* randomness: the rotation key is the same for every client and the
   server.
3. It quantizes every coordinate with the k-level stochastic quantizer onto
   B(r) = -X_max + r s, s = 2 X_max / (k - 1), r = 0..k-1 (coordinates outside
   [-X_max, X_max] are clamped first), giving codes U_i in {0..k-1}.
4. It adds T_i ~ Bin(m, p)^d' and sends the integer message
   Y_i = U_i + T_i in {0, ..., k - 1 + m} (int32): log2(k + m) bits per
   coordinate.
5. The server (or a secure aggregator) sums the messages exactly in int32 and
   estimates the mean of the clipped (rotated) vectors by
   X_hat' = -X_max + s (sum_i Y_i / n - m p), then returns R^-1 X_hat'
   cropped back to d.

Paper equation (8) writes the message in real units, Y = U + s T with U a bin
value; here both the bins and the noise are sent as integers (bin index r plus
the Binomial count), which is the same message up to the affine map
B(r) = -X_max + r s, and which makes aggregation exact.

Keys: a round key gives the shared rotation key ``shared_key(key)`` and
client i's key ``client_keys(key, n)[i]``, which ``client_encode`` splits into
its quantization and Binomial keys.
"""

import functools

import dp_accounting
import jax
import jax.numpy as jnp

from dpjax import _validate
from dpjax._composition import repeated
from dpjax import accounting
from dpjax import noise
from dpjax.compression import inverse_randomized_hadamard
from dpjax.compression import next_power_of_two
from dpjax.compression import randomized_hadamard
from dpjax.distributed import _harness
from dpjax.distributed.protocols import _inputs
from dpjax.distributed.protocols._cpsgd_config import CpsgdConfig


# --- Privacy -----------------------------------------------------------------


def cpsgd_event(config: CpsgdConfig, dimension: int, num_clients: int,
                delta: float, *, steps: int = 1) -> dp_accounting.DpEvent:
  """The (epsilon, delta) of ``steps`` rounds, seen through the summed messages.

  Theorem 1 with N = n m trials (the clients' Bin(m, p) noises sum to
  Bin(n m, p)), lattice spacing s, dimension d' =
  ``config.message_length(dimension)`` and the replace-one sensitivities of
  ``accounting.cpsgd_sensitivities`` on d' coordinates (they hold with and
  without rotation: a rotation keeps ||X - X'||_2, and clamping to
  [-X_max, X_max] is 1-Lipschitz). p is the probability the sampler
  actually uses (``config.binomial_p``).

  Args:
    config: the protocol.
    dimension: d, the length of each client's vector.
    num_clients: n >= 1 clients per round, all participating.
    delta: in (0, 1).
    steps: rounds (default 1).

  Returns:
    One round: ``EpsilonDeltaDpEvent(epsilon, delta)``, epsilon =
    ``accounting.binomial_epsilon(n m, p', s, delta, d', l1, l2, linf)``;
    ``steps`` rounds: its ``SelfComposedDpEvent``. Or compose rounds in a
    ``PrivacyLedger`` (the PLD accountant composes it optimally for a
    generic (epsilon, delta) mechanism).

  Raises:
    ValueError: bad input, or n m p (1 - p) below Theorem 1's condition.

  Privacy:
    Replace-one client, for an observer of the SUM of the messages only
    (secure aggregation); a single client's message alone carries Bin(m, p)
    noise and much weaker privacy.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 1 and Sec. 4.3.

  Example:
    >>> cfg = CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=2000)
    >>> ev = cpsgd_event(cfg, 10, 100, 1e-5)
    >>> round(ev.epsilon, 3), ev.delta
    (0.515, 1e-05)
  """
  check_config(config)
  dprime = config.message_length(dimension)
  num_clients = _inputs.check_int('num_clients', num_clients, 1)
  l1, l2, linf = accounting.cpsgd_sensitivities(
      dprime, config.levels, config.linf_clip, config.l2_norm_clip)
  return repeated(accounting.EpsilonDeltaDpEvent(accounting.binomial_epsilon(
      num_clients * config.trials, config.binomial_p, config.spacing,
      delta, dprime, l1, l2, linf), float(delta)), steps)


# --- Protocol ----------------------------------------------------------------


def check_config(config) -> None:
  if not isinstance(config, CpsgdConfig):
    raise ValueError(f'Expected config to be a CpsgdConfig, got '
                     f'{type(config).__name__}.')


def checked_rotation_key(config: CpsgdConfig, rotation_key) -> jax.Array | None:
  if not config.rotate:
    return None
  return _validate.key(rotation_key, 'rotation_key')


def prepare(config: CpsgdConfig, x: jax.Array,
            rotation_key: jax.Array | None) -> jax.Array:
  """Clips and (optionally) pads and rotates one client's vector."""
  x = _inputs.clip(x, config.l2_norm_clip)
  if config.rotate:
    d = x.shape[-1]
    x = jnp.pad(x, (0, next_power_of_two(d) - d))
    x = randomized_hadamard(x, key=rotation_key)
  return x


def client_encode(config: CpsgdConfig, key: jax.Array,
                  x: jax.typing.ArrayLike, *,
                  rotation_key: jax.Array | None = None) -> jax.Array:
  """One client's cpSGD message: clip, rotate, quantize, add Bin(m, p).

  The client key is split as ``quant_key, binomial_key =
  jax.random.split(key)``: the first drives the stochastic rounding, the
  second the Binomial noise. Both must be private to the client; the
  ``rotation_key`` is the shared (public) randomness of the rotation.

  Args:
    config: a ``CpsgdConfig``.
    key: the client's own PRNG key (``client_keys(round_key, n)[i]`` in
      ``distributed_mean``).
    x: the client's flat vector [d] (flatten a pytree first, e.g. with
      ``jax.flatten_util.ravel_pytree``); non-floating input is cast to
      float32; a non-finite vector is replaced by zeros.
    rotation_key: the shared rotation key (required iff ``config.rotate``;
      ``shared_key(round_key)`` in ``distributed_mean``).

  Returns:
    int32 message [``config.message_length(d)``] with entries in
    {0, ..., k - 1 + m}.

  Privacy:
    A single message carries only Bin(m, p) noise; the privacy guarantee is
    for the *sum* of the n messages (aggregate noise Bin(n m, p), Theorem 1
    with N = n m, ``cpsgd_event``), e.g. under secure aggregation.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2, eq. (8); Sec. 4.3.

  Example:
    >>> cfg = CpsgdConfig(l2_norm_clip=1.0, levels=4, trials=8)
    >>> y = client_encode(cfg, jax.random.key(0), jnp.array([0.6, -0.8, 0.0]))
    >>> y.dtype, y.shape, bool(jnp.all((y >= 0) & (y <= cfg.max_message)))
    (dtype('int32'), (3,), True)
  """
  check_config(config)
  key = _validate.key(key)
  rkey = checked_rotation_key(config, rotation_key)
  x = _inputs.as_float_vector(x, 'x', 1)
  return encode(config, key, x, rkey)


@functools.partial(jax.jit, static_argnums=0)
def encode(config: CpsgdConfig, key: jax.Array, x: jax.Array,
           rotation_key: jax.Array | None) -> jax.Array:
  quant_key, binomial_key = jax.random.split(key)
  codes = config.quantizer.quantize(prepare(config, x, rotation_key),
                                    key=quant_key)
  t = noise.binomial(binomial_key, codes.shape, trials=config.trials,
                     p=config.p)
  return codes + t


@functools.cache
def _encoder(config: CpsgdConfig) -> _harness.Encoder:
  """One client's encoder for the harness (cached: one function per config,
  so the harness's jit cache is reused)."""
  return lambda key, x, rotation_key: encode(config, key, x, rotation_key)


def server_decode(config: CpsgdConfig, rotation_key: jax.Array | None,
                  summed_messages: jax.typing.ArrayLike, num_clients: int, *,
                  dimension: int | None = None) -> jax.Array:
  """The server's mean estimate from the sum of n client messages.

  X_hat' = -X_max + s (sum_i Y_i / n - m p'), with p' = ``config.binomial_p``:
  E[Y_i] = r_i + m p' with E[-X_max + s r_i] = X_i' (the quantizer is unbiased
  inside [-X_max, X_max]), so X_hat' is unbiased for the mean of the clipped
  (rotated) vectors. With rotation, the estimate is mapped back with R^-1 and
  cropped to ``dimension``. Computed in float32 from the exact int32 sum.

  Args:
    config: a ``CpsgdConfig``.
    rotation_key: the shared rotation key (ignored unless ``config.rotate``).
    summed_messages: int sum of the n messages [d or d'].
    num_clients: n >= 1.
    dimension: crop the result to the first ``dimension`` coordinates
      (needed with rotation to undo the padding; default: no crop).

  Returns:
    float32 mean estimate [dimension].

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2 (estimator after eq. (8)).

  Example:
    >>> cfg = CpsgdConfig(l2_norm_clip=1.0, levels=3, trials=4)  # s=1, m p=2
    >>> # codes [2, 0] and [1, 1] (sum [3, 1]) plus Binomial sums [4, 4]
    >>> server_decode(cfg, None, jnp.array([7, 5]), 2)
    Array([ 0.5, -0.5], dtype=float32)
  """
  check_config(config)
  rkey = checked_rotation_key(config, rotation_key)
  num_clients = _inputs.check_int('num_clients', num_clients, 1)
  s = jnp.asarray(summed_messages)
  if s.ndim != 1 or not jnp.issubdtype(s.dtype, jnp.integer):
    raise ValueError(f'Expected summed_messages to be a 1-D integer array, '
                     f'got shape {s.shape} and dtype {s.dtype}.')
  if dimension is None:
    dimension = s.shape[0]
  dimension = _inputs.check_int('dimension', dimension, 1)
  want = config.message_length(dimension)
  if s.shape[0] != want:
    raise ValueError(f'Expected summed_messages of length {want} for '
                     f'dimension={dimension}, got {s.shape[0]}.')
  return decode(config, rkey, s, num_clients, dimension)


@functools.partial(jax.jit, static_argnums=(0, 3, 4))
def decode(config: CpsgdConfig, rotation_key: jax.Array | None,
           summed: jax.Array, num_clients: int,
           dimension: int) -> jax.Array:
  barrier = jax.lax.optimization_barrier
  f32 = jnp.float32
  centered = summed.astype(f32) - jnp.asarray(
      num_clients * config.trials * config.binomial_p, f32)
  mean_codes = barrier(centered / jnp.asarray(num_clients, f32))
  # Fenced so XLA cannot contract the affine map into an FMA in one program
  # and not in another (same key => bit-identical output, jit or not).
  est = barrier(jnp.asarray(config.spacing, f32) * mean_codes)
  est = barrier(est + jnp.asarray(-config.linf_clip, f32))
  if config.rotate:
    est = inverse_randomized_hadamard(est, key=rotation_key)
  return est[:dimension]


def _check_sum_fits(config: CpsgdConfig, num_clients: int) -> None:
  if num_clients * config.max_message >= 2**31:
    raise ValueError(
        f'Expected num_clients * (levels - 1 + trials) = '
        f'{num_clients * config.max_message} < 2^31 (int32 sum).')


def distributed_mean(config: CpsgdConfig, key: jax.Array,
                     xs: jax.typing.ArrayLike) -> jax.Array:
  """cpSGD mean estimate of n client vectors, vmapped over the client axis.

  The rotation key is ``shared_key(key)`` and client i's key
  ``client_keys(key, n)[i]``; every client runs ``client_encode``, the
  harness sums the messages exactly in int32 (``client_sum``) and
  ``server_decode`` returns the estimate.

  Args:
    config: a ``CpsgdConfig``.
    key: the round's PRNG key.
    xs: client vectors [n, d] (float; non-floating is cast to float32).

  Returns:
    float32 estimate [d] of the mean of the clipped vectors: unbiased when no
    coordinate is clamped (always without rotation and X_max >= D), with
    MSE ``cpsgd_expected_mse(config, xs, ...)`` <= ``cpsgd_mse_bound``.

  Privacy:
    The server sees only sum_i Y_i, whose noise is Bin(n m, p): Theorem 1 of
    Agarwal et al. with N = n m, step s = 2 X_max / (k - 1) and the
    protocol's sensitivities (replace-one neighbours, ||X_i|| <= D), assuming
    the individual messages are hidden (secure aggregation). The companion
    event is ``cpsgd_event(config, d, n, delta)``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2-4.3, Thm. 3-4.

  Example:
    >>> cfg = CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=32)
    >>> xs = jnp.array([[0.5, 0.5], [0.1, -0.3]])
    >>> distributed_mean(cfg, jax.random.key(0), xs).shape
    (2,)
  """
  check_config(config)
  key = _validate.key(key)
  xs = _inputs.as_float_vector(xs, 'xs', 2)
  _check_sum_fits(config, xs.shape[0])
  return _distributed_mean(config, key, xs, None, 'clients')


def distributed_mean_sharded(config: CpsgdConfig, key: jax.Array,
                             xs: jax.typing.ArrayLike, mesh: jax.sharding.Mesh,
                             axis_name: str = 'clients') -> jax.Array:
  """``distributed_mean`` with the client axis sharded over a mesh axis.

  Client keys are derived exactly as in ``distributed_mean`` (by client index,
  before sharding) and passed in sharded with the clients; every device
  encodes its block of clients, the int32 messages are summed locally and
  across devices with ``jax.lax.psum`` (exact), and the server decodes the
  replicated sum (``client_sum`` with a mesh). The result is bit-identical
  to ``distributed_mean`` from the same key.

  Args:
    config: a ``CpsgdConfig``.
    key: the round's PRNG key.
    xs: client vectors [n, d]; n must be divisible by the size of
      ``axis_name``.
    mesh: a ``jax.sharding.Mesh``.
    axis_name: the mesh axis the clients are sharded over.

  Returns:
    float32 estimate [d] (replicated).

  Privacy:
    As ``distributed_mean`` (companion event ``cpsgd_event``).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2-4.3.

  Example:
    >>> mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ('clients',))
    >>> cfg = CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=32)
    >>> xs = jnp.array([[0.5, 0.5], [0.1, -0.3]])
    >>> a = distributed_mean_sharded(cfg, jax.random.key(0), xs, mesh)
    >>> bool(jnp.all(a == distributed_mean(cfg, jax.random.key(0), xs)))
    True
  """
  check_config(config)
  key = _validate.key(key)
  xs = _inputs.as_float_vector(xs, 'xs', 2)
  n = xs.shape[0]
  _harness.check_mesh(mesh, axis_name, n)
  _check_sum_fits(config, n)
  return _distributed_mean(config, key, xs, mesh, axis_name)


@functools.partial(jax.jit, static_argnums=(0, 3, 4))
def _distributed_mean(config: CpsgdConfig, key: jax.Array, xs: jax.Array,
                      mesh: jax.sharding.Mesh | None,
                      axis_name: str) -> jax.Array:
  n, d = xs.shape
  rotation_key, keys = _harness.round_keys(key, n)
  rkey = rotation_key if config.rotate else None
  summed = _harness.client_sum(_encoder(config), keys, xs, rkey, mesh=mesh,
                               axis_name=axis_name)
  return decode(config, rkey, summed, n, d)
