"""cpSGD: k-level quantization plus the Binomial mechanism, over many clients.

The protocol of Agarwal et al. (2018, Sec. 4.2-4.3) for differentially private,
communication-efficient distributed mean estimation, written as pure functions
over a leading client axis so the same code runs vmapped on one device or
sharded over a mesh with ``jax.shard_map``:

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

The Gaussian baseline (each client adds real-valued N(0, sigma^2) noise to its
clipped vector and sends 32-bit floats) runs in the same harness.
"""

import functools
import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate
from dpjax import accounting
from dpjax import noise
from dpjax.distributed import _harness
from dpjax.transforms._quantizing import GridQuantizer
from dpjax.transforms._quantizing import k_level_quantizer
from dpjax.transforms._rotating import inverse_randomized_hadamard
from dpjax.transforms._rotating import next_power_of_two
from dpjax.transforms._rotating import randomized_hadamard

FLOAT32_BITS = 32  # bits per coordinate of the real-valued Gaussian baseline


class CpsgdConfig(NamedTuple):
  """Static parameters of the cpSGD protocol (hashable; build with ``cpsgd``).

  Attributes:
    clip_norm: D, the L2 norm each client's vector is clipped to.
    levels: k, the number of quantization levels (>= 2).
    num_trials: m, the number of Binomial trials each client adds per
      coordinate (>= 1).
    p: the Binomial success probability in (0, 1) as given; the sampler uses
      ``binomial_p`` (p rounded to a multiple of 2^-32, exact for p = 1/2),
      and so does the server's debiasing.
    x_max: X_max, the quantizer's range [-X_max, X_max].
    rotate: whether clients apply the shared randomized Hadamard rotation.
  """
  clip_norm: float
  levels: int
  num_trials: int
  p: float
  x_max: float
  rotate: bool

  @property
  def quantizer(self) -> GridQuantizer:
    """The k-level quantizer on [-X_max, X_max] (codes 0..k-1)."""
    return k_level_quantizer(self.x_max, self.levels)

  @property
  def spacing(self) -> float:
    """Bin width s = 2 X_max / (k - 1)."""
    return self.quantizer.spacing

  @property
  def binomial_p(self) -> float:
    """The exact success probability the Binomial sampler uses (as a float)."""
    return float(noise.binomial_p(self.p))

  @property
  def max_message(self) -> int:
    """Largest message value k - 1 + m (messages lie in {0..k-1+m})."""
    return self.levels - 1 + self.num_trials


def _check_int(name: str, value, minimum: int) -> int:
  _validate.integer_at_least(minimum, **{name: value})
  return int(value)


def _check_positive_finite(name: str, value) -> float:
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    if not (isinstance(value, (np.ndarray, jax.Array))
            and not isinstance(value, jax.core.Tracer)
            and np.ndim(value) == 0):
      raise ValueError(f'Expected {name}={value!r} to be a concrete number.')
  value = float(value)
  if not (value > 0 and math.isfinite(value)):
    raise ValueError(f'Expected {name}={value} > 0 and finite.')
  return value


def rotated_x_max(clip_norm: float, dimension: int, num_clients: int,
                  delta: float) -> float:
  """X_max that keeps all rotated coordinates in range w.p. >= 1 - delta.

  After the randomized Hadamard rotation (padded length d' =
  ``next_power_of_two(dimension)``), each rotated coordinate of a vector of
  norm <= D is sub-Gaussian with variance proxy D^2 / d', so by Hoeffding and
  a union bound over the n d' coordinates of all clients,
  X_max = D sqrt(2 ln(2 n d' / delta) / d') clips none of them with
  probability >= 1 - delta. Because no coordinate can exceed D, the result is
  capped at D (for small d' the formula exceeds D, and D is then exact).

  Args:
    clip_norm: D > 0.
    dimension: d, the unpadded vector length (>= 1).
    num_clients: n >= 1.
    delta: failure probability in (0, 1).

  Returns:
    min(D, D sqrt(2 ln(2 n d' / delta) / d')).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 4 (REFERENCES.md section 4,
    [DERIVED] constant).

  Example:
    >>> round(rotated_x_max(1.0, 1000, 100, 1e-5), 4)
    0.2153
  """
  clip_norm = _check_positive_finite('clip_norm', clip_norm)
  dimension = _check_int('dimension', dimension, 1)
  num_clients = _check_int('num_clients', num_clients, 1)
  _validate.open_unit(delta=delta)
  dp = next_power_of_two(dimension)
  bound = clip_norm * math.sqrt(2 * math.log(2 * num_clients * dp / delta)
                                / dp)
  return min(clip_norm, bound)


def cpsgd(clip_norm: float, levels: int, num_trials: int, p: float = 0.5,
          x_max: float | None = None, rotate: bool = False, *,
          dimension: int | None = None, num_clients: int | None = None,
          delta: float | None = None) -> CpsgdConfig:
  """Builds and validates a cpSGD configuration.

  X_max defaults to D without rotation (no coordinate of a clipped vector
  exceeds D, so the quantizer never clamps and the estimate is unbiased,
  paper Thm. 3). With ``rotate=True`` and no ``x_max``, the keyword arguments
  ``dimension``, ``num_clients`` and ``delta`` are required and X_max is
  ``rotated_x_max(clip_norm, dimension, num_clients, delta)`` (paper Thm. 4:
  bias only on the probability-delta event that a rotated coordinate is
  clamped).

  Args:
    clip_norm: D > 0, the per-client L2 clipping norm.
    levels: k >= 2 quantization levels.
    num_trials: m >= 1 Binomial trials per client and coordinate.
    p: Binomial success probability in (0, 1).
    x_max: quantizer range X_max > 0 (default: see above).
    rotate: apply the shared randomized Hadamard rotation.
    dimension: d, only for the rotated default of ``x_max``.
    num_clients: n, only for the rotated default of ``x_max``.
    delta: failure probability, only for the rotated default of ``x_max``.

  Returns:
    A ``CpsgdConfig``.

  Raises:
    ValueError: naming the offending value.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2 (k, m, p, X_max), Thm. 3-4.

  Example:
    >>> cfg = cpsgd(clip_norm=1.0, levels=16, num_trials=64)
    >>> cfg.x_max, cfg.spacing, cfg.max_message
    (1.0, 0.13333333333333333, 79)
  """
  clip_norm = _check_positive_finite('clip_norm', clip_norm)
  levels = _check_int('levels', levels, 2)
  num_trials = _check_int('num_trials', num_trials, 1)
  if isinstance(p, bool) or not isinstance(p, numbers.Real):
    raise ValueError(f'Expected p={p!r} to be a number in (0, 1).')
  if not 0 < float(p) < 1:
    raise ValueError(f'Expected p={p} in (0, 1).')
  if not 0 < noise.binomial_p(p) < 1:
    raise ValueError(f'Expected p={p} to be at least 2^-33 away from 0 and 1.')
  if not isinstance(rotate, bool):
    raise ValueError(f'Expected rotate={rotate!r} to be a bool.')
  if levels - 1 + num_trials >= 2**31:
    raise ValueError(f'Expected levels + num_trials - 1 = '
                     f'{levels - 1 + num_trials} < 2^31 (int32 messages).')
  if x_max is None:
    if rotate:
      missing = [name for name, v in (('dimension', dimension),
                                      ('num_clients', num_clients),
                                      ('delta', delta)) if v is None]
      if missing:
        raise ValueError(
            f'Expected x_max or all of dimension, num_clients, delta with '
            f'rotate=True; missing {", ".join(missing)}.')
      x_max = rotated_x_max(clip_norm, dimension, num_clients, delta)
    else:
      x_max = clip_norm
  x_max = _check_positive_finite('x_max', x_max)
  return CpsgdConfig(clip_norm, levels, num_trials, float(p), x_max, rotate)


# --- Communication -----------------------------------------------------------


def bits_per_coordinate(levels: int, num_trials: int, *,
                        fixed_width: bool = False) -> float | int:
  """Bits to send one message coordinate in {0, ..., k - 1 + m}.

  The paper's count (Thm. 3-4) is the exact log2(k + m) (reachable with
  entropy/arithmetic coding of a block of coordinates); a fixed-width
  encoding of each coordinate needs ceil(log2(k + m)) bits.

  Args:
    levels: k >= 2.
    num_trials: m >= 1.
    fixed_width: return the integer ceil(log2(k + m)) instead.

  Returns:
    log2(k + m) as a float, or its ceiling as an int.

  Example:
    >>> bits_per_coordinate(16, 64), bits_per_coordinate(16, 50,
    ...                                                  fixed_width=True)
    (6.321928094887363, 7)
  """
  levels = _check_int('levels', levels, 2)
  num_trials = _check_int('num_trials', num_trials, 1)
  if fixed_width:
    return (levels + num_trials - 1).bit_length()  # ceil(log2(k + m))
  return math.log2(levels + num_trials)


def message_length(config: CpsgdConfig, dimension: int) -> int:
  """Coordinates one client sends: d, or the padded d' when rotating.

  Example:
    >>> message_length(cpsgd(1.0, 4, 8, x_max=0.5, rotate=True), 100)
    128
  """
  dimension = _check_int('dimension', dimension, 1)
  return next_power_of_two(dimension) if config.rotate else dimension


def bits_per_client(config: CpsgdConfig, dimension: int, *,
                    fixed_width: bool = False) -> float | int:
  """Bits one client sends per round: message_length * bits_per_coordinate.

  Excludes the O(1) header of the paper's count (and the log2(n) extra bits
  per coordinate that a secure-aggregation modulus would add).

  Example:
    >>> bits_per_client(cpsgd(1.0, 16, 16), 10)
    50.0
  """
  return message_length(config, dimension) * bits_per_coordinate(
      config.levels, config.num_trials, fixed_width=fixed_width)


def gaussian_bits_per_client(dimension: int) -> int:
  """Bits per client per round of the Gaussian baseline: 32 d (float32).

  Example:
    >>> gaussian_bits_per_client(10)
    320
  """
  return FLOAT32_BITS * _check_int('dimension', dimension, 1)


# --- Privacy -----------------------------------------------------------------


def cpsgd_round_event(config: CpsgdConfig, dimension: int, num_clients: int,
                      delta: float) -> accounting.EpsilonDeltaDpEvent:
  """The (epsilon, delta) of one round, seen through the summed messages.

  Theorem 1 with N = n m trials (the clients' Bin(m, p) noises sum to
  Bin(n m, p)), lattice spacing s, dimension d' = ``message_length`` and the
  replace-one sensitivities of ``accounting.cpsgd_sensitivities`` on d'
  coordinates (they hold with and without rotation: a rotation keeps
  ||X - X'||_2, and clamping to [-X_max, X_max] is 1-Lipschitz). p is the
  probability the sampler actually uses (``noise.binomial_p``).

  Args:
    config: the protocol.
    dimension: d, the length of each client's vector.
    num_clients: n >= 1 clients per round, all participating.
    delta: in (0, 1).

  Returns:
    ``EpsilonDeltaDpEvent(epsilon, delta)``; compose rounds in a
    ``PrivacyLedger`` (the PLD accountant composes it optimally for a generic
    (epsilon, delta) mechanism).

  Raises:
    ValueError: bad input, or n m p (1 - p) below Theorem 1's condition.

  Privacy:
    Replace-one client, for an observer of the SUM of the messages only
    (secure aggregation); a single client's message alone carries Bin(m, p)
    noise and much weaker privacy.

  Example:
    >>> ev = cpsgd_round_event(cpsgd(1.0, 16, 2000), 10, 100, 1e-5)
    >>> round(ev.epsilon, 3), ev.delta
    (0.515, 1e-05)
  """
  dprime = message_length(config, dimension)
  num_clients = _check_int('num_clients', num_clients, 1)
  l1, l2, linf = accounting.cpsgd_sensitivities(
      dprime, config.levels, config.x_max, config.clip_norm)
  return accounting.binomial_event(
      num_clients * config.num_trials, config.binomial_p, config.spacing,
      delta, dprime, l1, l2, linf)


# --- Protocol ----------------------------------------------------------------


def _clip(x: jax.Array, clip_norm: jax.typing.ArrayLike) -> jax.Array:
  """x * min(1, D / ||x||); a non-finite vector becomes zero."""
  norm = jnp.sqrt(jnp.sum(jnp.square(x)))
  scale = jnp.minimum(jnp.asarray(1, x.dtype),
                      jnp.asarray(clip_norm, x.dtype) / norm)
  return jnp.where(jnp.isfinite(norm), x * scale, jnp.zeros_like(x))


def _as_float_vector(x: jax.typing.ArrayLike, name: str,
                     ndim: int) -> jax.Array:
  x = jnp.asarray(x)
  if x.ndim != ndim or x.shape[-1] < 1 or (ndim == 2 and x.shape[0] < 1):
    want = '[d]' if ndim == 1 else '[n, d]'
    raise ValueError(f'Expected {name} of shape {want} with n, d >= 1, got '
                     f'shape {x.shape}.')
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.float32)
  return x


def _check_config(config) -> None:
  if not isinstance(config, CpsgdConfig):
    raise ValueError(f'Expected config to be a CpsgdConfig (see cpsgd()), got '
                     f'{type(config).__name__}.')


def _rotation_key(config: CpsgdConfig, rotation_key) -> jax.Array | None:
  if not config.rotate:
    return None
  return _validate.key(rotation_key, 'rotation_key')


def _prepare(config: CpsgdConfig, x: jax.Array,
             rotation_key: jax.Array | None) -> jax.Array:
  """Clips and (optionally) pads and rotates one client's vector."""
  x = _clip(x, config.clip_norm)
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
    key: the client's own PRNG key.
    x: the client's flat vector [d] (flatten a pytree first, e.g. with
      ``jax.flatten_util.ravel_pytree``); non-floating input is cast to
      float32; a non-finite vector is replaced by zeros.
    rotation_key: the shared rotation key (required iff ``config.rotate``).

  Returns:
    int32 message [``message_length(config, d)``] with entries in
    {0, ..., k - 1 + m}.

  Privacy:
    A single message carries only Bin(m, p) noise; the privacy guarantee is
    for the *sum* of the n messages (aggregate noise Bin(n m, p), Theorem 1
    with N = n m), e.g. under secure aggregation.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2, eq. (8); Sec. 4.3.

  Example:
    >>> cfg = cpsgd(clip_norm=1.0, levels=4, num_trials=8)
    >>> y = client_encode(cfg, jax.random.key(0), jnp.array([0.6, -0.8, 0.0]))
    >>> y.dtype, y.shape, bool(jnp.all((y >= 0) & (y <= cfg.max_message)))
    (dtype('int32'), (3,), True)
  """
  _check_config(config)
  key = _validate.key(key)
  rkey = _rotation_key(config, rotation_key)
  x = _as_float_vector(x, 'x', 1)
  return _encode(config, key, x, rkey)


@functools.partial(jax.jit, static_argnums=0)
def _encode(config: CpsgdConfig, key: jax.Array, x: jax.Array,
            rotation_key: jax.Array | None) -> jax.Array:
  quant_key, binomial_key = jax.random.split(key)
  codes = config.quantizer.quantize(_prepare(config, x, rotation_key),
                                    key=quant_key)
  t = noise.binomial(binomial_key, config.num_trials, config.p, codes.shape)
  return codes + t


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
    >>> cfg = cpsgd(clip_norm=1.0, levels=3, num_trials=4)  # s = 1, m p = 2
    >>> # codes [2, 0] and [1, 1] (sum [3, 1]) plus Binomial sums [4, 4]
    >>> server_decode(cfg, None, jnp.array([7, 5]), 2)
    Array([ 0.5, -0.5], dtype=float32)
  """
  _check_config(config)
  rkey = _rotation_key(config, rotation_key)
  num_clients = _check_int('num_clients', num_clients, 1)
  s = jnp.asarray(summed_messages)
  if s.ndim != 1 or not jnp.issubdtype(s.dtype, jnp.integer):
    raise ValueError(f'Expected summed_messages to be a 1-D integer array, '
                     f'got shape {s.shape} and dtype {s.dtype}.')
  if dimension is None:
    dimension = s.shape[0]
  dimension = _check_int('dimension', dimension, 1)
  want = message_length(config, dimension)
  if s.shape[0] != want:
    raise ValueError(f'Expected summed_messages of length {want} for '
                     f'dimension={dimension}, got {s.shape[0]}.')
  return _decode(config, rkey, s, num_clients, dimension)


@functools.partial(jax.jit, static_argnums=(0, 3, 4))
def _decode(config: CpsgdConfig, rotation_key: jax.Array | None,
            summed: jax.Array, num_clients: int,
            dimension: int) -> jax.Array:
  barrier = jax.lax.optimization_barrier
  f32 = jnp.float32
  centered = summed.astype(f32) - jnp.asarray(
      num_clients * config.num_trials * config.binomial_p, f32)
  mean_codes = barrier(centered / jnp.asarray(num_clients, f32))
  # Fenced so XLA cannot contract the affine map into an FMA in one program
  # and not in another (same key => bit-identical output, jit or not).
  est = barrier(jnp.asarray(config.spacing, f32) * mean_codes)
  est = barrier(est + jnp.asarray(-config.x_max, f32))
  if config.rotate:
    est = inverse_randomized_hadamard(est, key=rotation_key)
  return est[:dimension]


def cpsgd_keys(key: jax.Array,
               num_clients: int) -> tuple[jax.Array, jax.Array]:
  """The key derivation of ``distributed_mean``: shared and per-client keys.

  ``rotation_key, client_root = jax.random.split(key)``; client i's key is
  ``jax.random.fold_in(client_root, i)`` (i = 0..n-1, its row in ``xs``),
  which ``client_encode`` splits into its quantization and Binomial keys.
  Client keys depend only on ``key`` and i, never on how clients are sharded.

  Args:
    key: the round's PRNG key.
    num_clients: n >= 1.

  Returns:
    ``(rotation_key, client_keys)`` with ``client_keys`` of shape [n].

  Example:
    >>> rkey, ckeys = cpsgd_keys(jax.random.key(0), 3)
    >>> ckeys.shape
    (3,)
  """
  key = _validate.key(key)
  num_clients = _check_int('num_clients', num_clients, 1)
  return _harness._round_keys(key, num_clients)


def _check_sum_fits(config: CpsgdConfig, num_clients: int) -> None:
  if num_clients * config.max_message >= 2**31:
    raise ValueError(
        f'Expected num_clients * (levels - 1 + num_trials) = '
        f'{num_clients * config.max_message} < 2^31 (int32 sum).')


@functools.cache
def _encoder(config: CpsgdConfig) -> _harness.Encoder:
  """One client's encoder for the harness (cached: one function per config,
  so the harness's jit cache is reused)."""
  return lambda key, x, rotation_key: _encode(config, key, x, rotation_key)


def distributed_mean(config: CpsgdConfig, key: jax.Array,
                     xs: jax.typing.ArrayLike) -> jax.Array:
  """cpSGD mean estimate of n client vectors, vmapped over the client axis.

  Keys come from ``cpsgd_keys(key, n)``; every client runs ``client_encode``
  (vmapped), the messages are summed exactly in int32 and ``server_decode``
  returns the estimate.

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
    the individual messages are hidden (secure aggregation); see the
    Binomial-mechanism accounting in ``dpjax.accounting``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2-4.3, Thm. 3-4.

  Example:
    >>> cfg = cpsgd(clip_norm=1.0, levels=16, num_trials=32)
    >>> xs = jnp.array([[0.5, 0.5], [0.1, -0.3]])
    >>> distributed_mean(cfg, jax.random.key(0), xs).shape
    (2,)
  """
  _check_config(config)
  key = _validate.key(key)
  xs = _as_float_vector(xs, 'xs', 2)
  _check_sum_fits(config, xs.shape[0])
  return _distributed_mean(config, key, xs)


@functools.partial(jax.jit, static_argnums=0)
def _distributed_mean(config: CpsgdConfig, key: jax.Array,
                      xs: jax.Array) -> jax.Array:
  n, d = xs.shape
  rotation_key, keys = _harness._round_keys(key, n)
  rkey = rotation_key if config.rotate else None
  summed = _harness.client_sum(_encoder(config), keys, xs, rkey)
  return _decode(config, rkey, summed, n, d)


def distributed_mean_sharded(config: CpsgdConfig, key: jax.Array,
                             xs: jax.typing.ArrayLike, mesh: jax.sharding.Mesh,
                             axis_name: str = 'clients') -> jax.Array:
  """``distributed_mean`` with the client axis sharded over a mesh axis.

  Client keys are derived exactly as in ``distributed_mean`` (by client index,
  before sharding) and passed in sharded with the clients; every device
  encodes its block of clients, the int32 messages are summed locally and
  across devices with ``jax.lax.psum`` (exact), and the server decodes the
  replicated sum. The result is bit-identical to ``distributed_mean`` from
  the same key.

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
    As ``distributed_mean``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2-4.3.

  Example:
    >>> mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ('clients',))
    >>> cfg = cpsgd(clip_norm=1.0, levels=16, num_trials=32)
    >>> xs = jnp.array([[0.5, 0.5], [0.1, -0.3]])
    >>> a = distributed_mean_sharded(cfg, jax.random.key(0), xs, mesh)
    >>> bool(jnp.all(a == distributed_mean(cfg, jax.random.key(0), xs)))
    True
  """
  _check_config(config)
  key = _validate.key(key)
  xs = _as_float_vector(xs, 'xs', 2)
  n = xs.shape[0]
  _harness._check_mesh(mesh, axis_name, n)
  _check_sum_fits(config, n)
  return _distributed_mean_sharded(config, key, xs, mesh, axis_name)


@functools.partial(jax.jit, static_argnums=(0, 3, 4))
def _distributed_mean_sharded(config: CpsgdConfig, key: jax.Array,
                              xs: jax.Array, mesh: jax.sharding.Mesh,
                              axis_name: str) -> jax.Array:
  n, d = xs.shape
  rotation_key, keys = _harness._round_keys(key, n)
  rkey = rotation_key if config.rotate else None
  summed = _harness.client_sum(_encoder(config), keys, xs, rkey, mesh=mesh,
                               axis_name=axis_name)
  return _decode(config, rkey, summed, n, d)


# --- Gaussian baseline -------------------------------------------------------


def gaussian_distributed_mean(key: jax.Array, xs: jax.typing.ArrayLike,
                              clip_norm: jax.typing.ArrayLike,
                              noise_stddev: jax.typing.ArrayLike) -> jax.Array:
  """Gaussian baseline: clients clip, add N(0, sigma^2 I), server averages.

  Client i draws its noise from ``jax.random.fold_in(key, i)``; it sends d
  float32 values (``gaussian_bits_per_client(d)`` = 32 d bits).

  Args:
    key: the round's PRNG key.
    xs: client vectors [n, d].
    clip_norm: D > 0.
    noise_stddev: each client's sigma >= 0.

  Returns:
    float32 (or xs's floating dtype) estimate [d]: the mean of the clipped
    vectors plus N(0, sigma^2 / n) per coordinate (MSE d sigma^2 / n).

  Privacy:
    The sum carries N(0, n sigma^2) noise per coordinate and has L2
    sensitivity Delta = 2 D under replace-one (D under add/remove-one)
    neighbours: the Gaussian mechanism with noise multiplier
    sqrt(n) sigma / Delta, assuming the server sees only the sum (a single
    client's message alone has noise multiplier sigma / Delta).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.1 and Fig. 1 (baseline).

  Example:
    >>> xs = jnp.array([[3.0, 4.0], [0.6, 0.8]])  # both clip to [0.6, 0.8]
    >>> gaussian_distributed_mean(jax.random.key(0), xs, 1.0, 0.0)
    Array([0.6, 0.8], dtype=float32)
  """
  key = _validate.key(key)
  xs = _as_float_vector(xs, 'xs', 2)
  _validate.positive(clip_norm=clip_norm)
  _validate.non_negative(noise_stddev=noise_stddev)
  return _gaussian_mean(key, xs, jnp.asarray(clip_norm, xs.dtype),
                        jnp.asarray(noise_stddev, xs.dtype))


@jax.jit
def _gaussian_mean(key: jax.Array, xs: jax.Array, clip_norm: jax.Array,
                   noise_stddev: jax.Array) -> jax.Array:
  n = xs.shape[0]
  summed = _harness.client_sum(_gaussian_client, _harness._indexed_keys(key, n),
                               xs, (clip_norm, noise_stddev))
  return summed / jnp.asarray(n, xs.dtype)


def _gaussian_client(key: jax.Array, x: jax.Array,
                     shared: tuple[jax.Array, jax.Array]) -> jax.Array:
  clip_norm, noise_stddev = shared
  z = noise.gaussian(key, x.shape, noise_stddev, x.dtype)
  return _clip(x, clip_norm) + z


# --- Error analysis ----------------------------------------------------------


def cpsgd_mse_bound(dimension: int, num_clients: int, levels: int,
                    num_trials: int, p: float, x_max: float) -> float:
  """The derived MSE bound without rotation (all |X_i(j)| <= X_max).

  Per coordinate, the quantization variance of each client is <= s^2 / 4 and
  its Binomial noise adds s^2 m p (1 - p), s = 2 X_max / (k - 1); averaging n
  independent clients divides by n, so
  E||X_hat - X_bar||^2 <= d s^2 (1/4 + m p (1 - p)) / n
                        = d X_max^2 (1 + 4 m p (1 - p)) / (n (k - 1)^2).

  Args:
    dimension: d >= 1.
    num_clients: n >= 1.
    levels: k >= 2.
    num_trials: m >= 1.
    p: in (0, 1).
    x_max: X_max > 0.

  Returns:
    The bound (a float).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 3 (with X_max = D);
    REFERENCES.md section 4 [DERIVED].

  Example:
    >>> round(cpsgd_mse_bound(10, 100, 16, 64, 0.5, 1.0), 6)
    0.028889
  """
  dimension = _check_int('dimension', dimension, 1)
  num_clients = _check_int('num_clients', num_clients, 1)
  levels = _check_int('levels', levels, 2)
  num_trials = _check_int('num_trials', num_trials, 1)
  _validate.open_unit(p=p)
  x_max = _check_positive_finite('x_max', x_max)
  return (dimension * x_max**2 * (1 + 4 * num_trials * p * (1 - p))
          / (num_clients * (levels - 1)**2))


def cpsgd_expected_mse(config: CpsgdConfig, xs: jax.typing.ArrayLike, *,
                       rotation_key: jax.Array | None = None) -> float:
  """Exact E||X_hat - X_bar||^2 of ``distributed_mean`` for given inputs.

  X_bar is the mean of the clipped vectors. In the quantizer's coordinates
  (rotated ones if ``config.rotate``; x clamped to [-X_max, X_max], in bin
  [B(r), B(r+1)]), each client contributes the independent variance
  (x - B(r)) (B(r+1) - x) + s^2 m p' (1 - p') per coordinate, so the
  estimate's error has diagonal covariance sum_i v_ij / n^2 plus the clamping
  bias b = mean_i(clamp(x_i)) - mean_i(x_i). Without rotation the MSE is
  sum_j Var_j + ||b||^2. With rotation (given ``rotation_key``), the error is
  mapped by R^-1, whose entries are +-1/sqrt(d'), and cropped to d, so the
  variance part is scaled by d / d' and the bias part is ||crop(R^-1 b)||^2.
  Computed in float64 on the host from the float32 clipped (rotated) vectors
  the protocol quantizes; ignores the float32 rounding of the estimate.

  Args:
    config: a ``CpsgdConfig``.
    xs: client vectors [n, d].
    rotation_key: the shared rotation key, required iff ``config.rotate``
      (``cpsgd_keys(key, n)[0]`` for ``distributed_mean(config, key, xs)``).

  Returns:
    The expected squared error (a float).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 3 proof (Appendix D).

  Example:
    >>> cfg = cpsgd(clip_norm=1.0, levels=3, num_trials=4)
    >>> # x = 0.5 sits between bins 0 and 1 (s = 1): variance 0.25, plus
    >>> # Binomial s^2 m p (1 - p) = 1, for one client and one coordinate
    >>> cpsgd_expected_mse(cfg, jnp.array([[0.5]]))
    1.25
  """
  _check_config(config)
  rkey = _rotation_key(config, rotation_key)
  xs = _as_float_vector(xs, 'xs', 2)
  n, d = xs.shape
  prepared = jax.vmap(lambda x: _prepare(config, x, rkey))(xs)
  x = np.asarray(prepared, np.float64)
  q = config.quantizer
  low, high, s = float(q.low), float(q.high), float(q.spacing)
  clamped = np.clip(x, low, high)
  r = np.clip(np.floor((clamped - low) / s), 0, config.levels - 2)
  below = low + r * s
  quant_var = np.maximum((clamped - below) * (below + s - clamped), 0.0)
  p = config.binomial_p
  var = (quant_var.sum(axis=0) / n**2
         + s**2 * config.num_trials * p * (1 - p) / n)
  bias = clamped.mean(axis=0) - x.mean(axis=0)
  if not config.rotate:
    return float(var.sum() + np.sum(bias**2))
  dp = x.shape[1]
  back = np.asarray(inverse_randomized_hadamard(
      jnp.asarray(bias, jnp.float32), key=rkey), np.float64)[:d]
  return float(var.sum() * d / dp + np.sum(back**2))
