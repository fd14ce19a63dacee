"""``Protocol``: a client protocol as a training loop runs and accounts it.

A distributed mean protocol (cpSGD, DDG, Skellam, the Gaussian baseline, a
plain mean over a secure sum) is what a federated loop needs from it: the
client's encoder (its vector -> its message), the server's decoder (the
securely summed messages -> the mean estimate), their composition ``mean``
(traceable, the form a loop jits), the DpEvent of one round from the
protocol's companion and the bits one client sends. ``cpsgd_protocol``,
``distributed_dp_protocol``, ``gaussian_distributed_mean_protocol`` and
``plain_mean_protocol`` build one from the same hyperparameters their mean,
event and bits functions take.
"""

import functools
import math
from typing import Callable, NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp

from dpjax import _keys
from dpjax import _validate
from dpjax import accounting
from dpjax.distributed.protocols import _cpsgd
from dpjax.distributed.protocols import _cpsgd_config
from dpjax.distributed.protocols import _ddp
from dpjax.distributed.protocols import _ddp_config
from dpjax.distributed.protocols import _gaussian
from dpjax.distributed import _harness
from dpjax.distributed.protocols import _secure_sum

Mean = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
Encode = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]
Decode = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


class Protocol(NamedTuple):
  """A distributed mean protocol, as a federated loop runs and accounts it.

  ``mean(key, xs, param)`` equals ``decode(key, sum_i encode(key, i, xs[i],
  param), param)``: the sum is what a secure aggregator releases (integer
  messages summed in their dtype, i.e. modulo 2^32; the decoder reduces
  further where the protocol works modulo 2^b). ``encode`` and ``decode``
  may be None for a protocol given by its mean only.

  Attributes:
    mean: ``(key, vectors [n, d], param) -> estimate [d]``, traceable (a
      loop jits it inside its round scan). ``param`` is a traced float32
      scalar (e.g. the Gaussian clients' stddev): runs whose protocols share
      ``mean`` and differ only in ``param`` share one compilation.
    param: the value passed as ``param``.
    event: the DpEvent of one round, from the protocol's companion built
      from the same hyperparameters; None where a round has no guarantee.
    bits_per_client: bits one client sends per round.
    encode: ``(key, index, vector [d], param) -> message``, client
      ``index``'s message in the round keyed ``key`` (its private key is
      ``client_keys(key, n)[index]``, or the protocol's own derivation from
      ``key`` and ``index``; in a deployment a client holds only its own).
    decode: ``(key, summed messages, param) -> estimate [d]``, the server's
      side, using only the round's public randomness (e.g. ``shared_key``).

  Example:
    >>> p = Protocol(lambda key, v, param: v.mean(axis=0))
    >>> p.mean(jax.random.key(0), jnp.ones((3, 2)), p.param).tolist()
    [1.0, 1.0]
  """
  mean: Mean
  param: float = 0.0
  event: dp_accounting.DpEvent | None = None
  bits_per_client: float = 0
  encode: Encode | None = None
  decode: Decode | None = None


def _float(x) -> jax.Array:
  """x as the protocols' means take it: floating dtypes kept, else float32."""
  x = jnp.asarray(x)
  return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)


def _dimension(dimension) -> int:
  _validate.positive_int(dimension=dimension)
  return int(dimension)


def _num_clients(num_clients) -> int:
  _validate.positive_int(num_clients=num_clients)
  return int(num_clients)


def cpsgd_protocol(config: _cpsgd_config.CpsgdConfig, dimension: int,
                   num_clients: int, delta: float) -> Protocol:
  """cpSGD as a ``Protocol``: ``client_encode``, ``server_decode``.

  Args:
    config: a ``CpsgdConfig``.
    dimension: d, the length of each client's vector.
    num_clients: n >= 1 clients per round, all participating.
    delta: in (0, 1), the delta of the round's (epsilon, delta) event.

  Returns:
    A ``Protocol`` whose mean is ``distributed_mean(config, key, xs)``,
    event ``cpsgd_event(config, d, n, delta)`` and bits ``cpsgd_bits(config,
    d)``; ``param`` is unused. Messages are int32 [``message_length(d)``].

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2-4.3.

  Example:
    >>> cfg = dpjax.distributed.CpsgdConfig(l2_norm_clip=1.0, levels=16,
    ...                                     trials=2000)
    >>> p = cpsgd_protocol(cfg, 3, 4, 1e-5)
    >>> p.mean(jax.random.key(0), jnp.ones((4, 3)) / 2, p.param).shape
    (3,)
  """
  dimension, num_clients = _dimension(dimension), _num_clients(num_clients)
  event = _cpsgd.cpsgd_event(config, dimension, num_clients, delta)
  mean, encode, decode = _cpsgd_parts(config, dimension, num_clients)
  return Protocol(mean, event=event,
                  bits_per_client=_cpsgd_config.cpsgd_bits(config, dimension),
                  encode=encode, decode=decode)


@functools.cache
def _cpsgd_parts(config, dimension, num_clients):
  """(mean, encode, decode), cached: one set of functions per protocol."""

  def rotation_key(key):
    return _harness.shared_key(key) if config.rotate else None

  def mean(key, xs, param):
    del param
    return _cpsgd.distributed_mean(config, key, xs)

  def encode(key, index, x, param):
    del param
    return _cpsgd.encode(config, _harness.client_key(key, index),
                         _float(x), rotation_key(key))

  def decode(key, summed, param):
    del param
    return _cpsgd.decode(config, rotation_key(key), summed, num_clients,
                         dimension)

  return mean, encode, decode


def distributed_dp_protocol(config: _ddp_config.DistributedDpConfig,
                            dimension: int, *,
                            replace_one: bool = False) -> Protocol:
  """DDG or Skellam as a ``Protocol``: modular messages, modular decoding.

  Args:
    config: a ``DistributedDpConfig`` (its ``num_clients`` clients per
      round).
    dimension: d, the length of each client's vector.
    replace_one: the neighbouring relation of the event: one client's
      vector replaced (True) or added or removed (False), as for
      ``distributed_dp_event``.

  Returns:
    A ``Protocol`` whose mean is ``secure_sum_round(config, key,
    xs).estimate``, encoder ``client_encode_modular`` (uint32 messages in
    [0, 2^b)), decoder ``server_decode_modular`` of the sum modulo 2^b,
    divided by n; event ``distributed_dp_event(config, d,
    replace_one=replace_one)``, bits
    ``distributed_dp_bits(config, d)``; ``param`` is unused.

  References:
    Kairouz, Liu, Steinke, ICML 2021, Alg. 1; Agarwal, Kairouz, Liu, NeurIPS
    2021, Alg. 1.

  Example:
    >>> cfg = dpjax.distributed.DistributedDpConfig(
    ...     mechanism='skellam', l2_norm_clip=1.0, bits=16, gamma=1e-3,
    ...     stddev=0.1, num_clients=4)
    >>> p = distributed_dp_protocol(cfg, 3)
    >>> p.mean(jax.random.key(0), jnp.ones((4, 3)) / 2, p.param).shape
    (3,)
  """
  dimension = _dimension(dimension)
  event = _ddp_config.distributed_dp_event(config, dimension,
                                           replace_one=replace_one)
  _ddp.check_sampler_range(config)
  mean, encode, decode = _ddp_parts(config, dimension)
  return Protocol(mean, event=event,
                  bits_per_client=_ddp_config.distributed_dp_bits(
                      config, dimension),
                  encode=encode, decode=decode)


@functools.cache
def _ddp_parts(config, dimension):
  """(mean, encode, decode), cached: one set of functions per protocol."""

  def mean(key, xs, param):
    del param
    return _ddp.secure_sum_round(config, key, xs).estimate

  def encode(key, index, x, param):
    del param
    v, _ = _ddp.client_values(config, _harness.client_key(key, index),
                              _float(x),
                              _harness.shared_key(key))
    return _secure_sum.to_modular(v, config.bits)

  def decode(key, summed, param):
    del param
    modular = summed & jnp.asarray(config.modulus - 1, jnp.uint32)
    return _ddp.decode(config, _harness.shared_key(key), modular,
                       dimension) / jnp.asarray(config.num_clients,
                                                 jnp.float32)

  return mean, encode, decode


def gaussian_distributed_mean_protocol(l2_norm_clip: float, stddev: float,
                                       num_clients: int,
                                       dimension: int) -> Protocol:
  """The Gaussian baseline as a ``Protocol``; ``param`` is the stddev.

  Args:
    l2_norm_clip: D > 0.
    stddev: sigma >= 0, each client's noise stddev (the ``param``; runs
      that differ only in sigma share one compilation).
    num_clients: n >= 1 clients per round, all participating.
    dimension: d, the length of each client's vector.

  Returns:
    A ``Protocol`` whose mean is ``gaussian_distributed_mean(key, xs, D,
    param)``, messages the clipped vectors plus N(0, sigma^2 I) (float32),
    decoder the sum / n; event ``accounting.gaussian_event(sqrt(n) sigma /
    (2 D))`` (the sum's noise over its replace-one sensitivity; None at
    sigma = 0: no finite epsilon), bits
    ``gaussian_protocol_bits(d)``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.1 (baseline).

  Example:
    >>> p = gaussian_distributed_mean_protocol(1.0, 0.0, 2, 2)
    >>> xs = jnp.array([[3.0, 4.0], [0.6, 0.8]])
    >>> p.mean(jax.random.key(0), xs, p.param)
    Array([0.6, 0.8], dtype=float32)
  """
  _validate.positive(l2_norm_clip=l2_norm_clip)
  _validate.non_negative(stddev=stddev)
  dimension, num_clients = _dimension(dimension), _num_clients(num_clients)
  event = (accounting.gaussian_event(
      math.sqrt(num_clients) * float(stddev) / (2 * float(l2_norm_clip)))
           if stddev > 0 else None)
  mean, encode, decode = _gaussian_parts(float(l2_norm_clip), num_clients)
  return Protocol(mean, param=float(stddev), event=event,
                  bits_per_client=_gaussian.gaussian_protocol_bits(dimension),
                  encode=encode, decode=decode)


@functools.cache
def _gaussian_parts(l2_norm_clip, num_clients):
  """(mean, encode, decode), cached: one set of functions per protocol."""

  def mean(key, xs, stddev):
    return _gaussian.gaussian_distributed_mean(key, xs, l2_norm_clip, stddev)

  def encode(key, index, x, stddev):
    x = _float(x)
    return _gaussian.encode(_gaussian.client_key(key, index), x,
                            (jnp.asarray(l2_norm_clip, x.dtype),
                             jnp.asarray(stddev, x.dtype)))

  def decode(key, summed, stddev):
    del key, stddev
    return summed / jnp.asarray(num_clients, summed.dtype)

  return mean, encode, decode


def plain_mean_protocol(num_clients: int, dimension: int) -> Protocol:
  """The non-private mean over a secure sum, as a ``Protocol``.

  Each client sends its vector unchanged (d float32 values); the server
  divides the sum by n. No clipping, no noise: ``event`` is None.

  Args:
    num_clients: n >= 1 clients per round.
    dimension: d, the length of each client's vector.

  Returns:
    A ``Protocol`` whose mean is the mean of the client vectors.

  Example:
    >>> p = plain_mean_protocol(2, 2)
    >>> p.mean(jax.random.key(0), jnp.array([[1.0, 2.0], [3.0, 4.0]]),
    ...        p.param)
    Array([2., 3.], dtype=float32)
  """
  dimension, num_clients = _dimension(dimension), _num_clients(num_clients)
  mean, encode, decode = _plain_parts(num_clients)
  return Protocol(mean, bits_per_client=_gaussian.gaussian_protocol_bits(
      dimension), encode=encode, decode=decode)


@functools.cache
def _plain_parts(num_clients):
  """(mean, encode, decode), cached: one set of functions per protocol."""

  def mean(key, xs, param):
    del key, param
    return jnp.mean(_float(xs), axis=0)

  def encode(key, index, x, param):
    del key, index, param
    return _float(x)

  def decode(key, summed, param):
    del key, param
    return summed / jnp.asarray(num_clients, summed.dtype)

  return mean, encode, decode
