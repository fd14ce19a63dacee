"""The Gaussian protocol: clients clip, add real Gaussian noise, send floats.

The baseline of cpSGD (Agarwal et al. 2018, Sec. 4.1, Fig. 1): client i clips
its vector X_i to L2 norm D, adds N(0, sigma^2 I) and sends d float32 values
(32 bits per coordinate); the server averages the messages. It runs on the
client harness (vmapped over the leading client axis). Its event is the
Gaussian mechanism's, ``accounting.gaussian_event(sqrt(n) sigma / (2 D))``
(the sum carries N(0, n sigma^2), replace-one sensitivity 2 D), which
``gaussian_distributed_mean_protocol`` states; its bit count
``gaussian_protocol_bits`` is built from the same hyperparameters.
"""


import jax
import jax.numpy as jnp

from dpjax import _keys
from dpjax import _validate
from dpjax import noise
from dpjax.distributed import _harness
from dpjax.distributed.protocols import _inputs

_FLOAT32_BITS = 32  # bits per coordinate of a real-valued (float32) message
_STREAM = _keys.register('gaussian_protocol', __name__)


def gaussian_distributed_mean(key: jax.Array, xs: jax.typing.ArrayLike,
                              l2_norm_clip: jax.typing.ArrayLike,
                              stddev: jax.typing.ArrayLike) -> jax.Array:
  """Gaussian protocol: clients clip, add N(0, sigma^2 I), server averages.

  Client i draws its noise from ``jax.random.fold_in(s, i)``, s the
  protocol's stream of ``key`` (``dpjax._keys``); it sends d
  float32 values (``gaussian_protocol_bits(d)`` = 32 d bits). The clip norm
  and the noise stddev may be traced (a sweep is one ``jax.vmap``).

  Args:
    key: the round's PRNG key.
    xs: client vectors [n, d].
    l2_norm_clip: D > 0.
    stddev: each client's noise stddev sigma >= 0.

  Returns:
    float32 (or xs's floating dtype) estimate [d]: the mean of the clipped
    vectors plus N(0, sigma^2 / n) per coordinate (MSE d sigma^2 / n).

  Privacy:
    The sum carries N(0, n sigma^2) noise per coordinate and has L2
    sensitivity Delta = 2 D under replace-one (D under add/remove-one)
    neighbours: the Gaussian mechanism with noise multiplier
    sqrt(n) sigma / Delta, assuming the server sees only the sum (a single
    client's message alone has noise multiplier sigma / Delta). The
    event, replace-one, is ``accounting.gaussian_event(sqrt(n) sigma /
    (2 D))``, accounted with the default neighbouring relation (the
    replace-one distance is already in 2 D).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.1 and Fig. 1 (baseline).

  Example:
    >>> xs = jnp.array([[3.0, 4.0], [0.6, 0.8]])  # both clip to [0.6, 0.8]
    >>> gaussian_distributed_mean(jax.random.key(0), xs, 1.0, 0.0)
    Array([0.6, 0.8], dtype=float32)
  """
  key = _keys.stream(_validate.key(key), _STREAM)
  xs = _inputs.as_float_vector(xs, 'xs', 2)
  _validate.positive(l2_norm_clip=l2_norm_clip)
  _validate.non_negative(stddev=stddev)
  return _gaussian_mean(key, xs, jnp.asarray(l2_norm_clip, xs.dtype),
                        jnp.asarray(stddev, xs.dtype))


@jax.jit
def _gaussian_mean(key: jax.Array, xs: jax.Array, l2_norm_clip: jax.Array,
                   stddev: jax.Array) -> jax.Array:
  n = xs.shape[0]
  summed = _harness.client_sum(encode, _harness.indexed_keys(key, n), xs,
                               (l2_norm_clip, stddev))
  return summed / jnp.asarray(n, xs.dtype)


def client_key(key: jax.Array, index: jax.typing.ArrayLike) -> jax.Array:
  """Client ``index``'s key: ``fold_in(stream(key), index)``, as in the mean."""
  return jax.random.fold_in(_keys.stream(key, _STREAM),
                            jnp.asarray(index, jnp.uint32))


def encode(key: jax.Array, x: jax.Array,
           shared: tuple[jax.Array, jax.Array]) -> jax.Array:
  l2_norm_clip, stddev = shared
  z = noise.gaussian(key, x.shape, stddev=stddev, dtype=x.dtype)
  return _inputs.clip(x, l2_norm_clip) + z


def gaussian_protocol_bits(dimension: int) -> int:
  """Bits one client sends per round of the Gaussian protocol: 32 d.

  Args:
    dimension: d >= 1, the length of each client's vector.

  Returns:
    32 d (float32 coordinates).

  Example:
    >>> gaussian_protocol_bits(10)
    320
  """
  _validate.positive_int(dimension=dimension)
  return _FLOAT32_BITS * int(dimension)
