"""The decentralized baselines of Ding et al. Sec. 5: DSGD and SDM.

They share ``_rounds``' state, batch and round wrapper: see that
module for the keys, the harness and the metrics.
"""

import jax
import jax.numpy as jnp

from dpjax import _validate
from dpjax import noise
from dpjax.distributed.decentralized._rounds import check_common
from dpjax.distributed.decentralized._rounds import check_private
from dpjax.distributed.decentralized._rounds import col
from dpjax.distributed.decentralized._rounds import DecentralizedAlgorithm
from dpjax.distributed.decentralized._rounds import FLOAT_BITS
from dpjax.distributed.decentralized._rounds import LossFn
from dpjax.distributed.decentralized._rounds import make
from dpjax.distributed.decentralized._rounds import mean_grad
from dpjax.distributed.decentralized._rounds import mix_with_self
from dpjax.distributed.decentralized._rounds import num_coordinates
from dpjax.distributed.decentralized._rounds import self_weights
from dpjax.distributed.decentralized._rounds import split_keys


def _to_16(x):
  return jax.tree.map(lambda v: v.astype(jnp.float16).astype(v.dtype), x)


def dsgd(loss_fn: LossFn, mixing, *, learning_rate: float,
         l2_norm_clip: float | None = None,
         mesh: jax.sharding.Mesh | None = None,
         axis_name: str = 'agents') -> DecentralizedAlgorithm:
  """DSGD: x_i <- w_ii x_i + sum_{j != i} w_ij x_j - alpha g_i (no privacy).

  Broadcasts are 16-bit floats (the paper's unquantized unit), so each agent
  sends 16 p bits a round. ``l2_norm_clip`` optionally clips per-example
  gradients (None: plain mean gradient).

  References:
    Ding et al., Sec. 5 (baseline); Nedic & Ozdaglar 2009.

  Example:
    >>> loss = lambda p, ex: 0.5 * jnp.sum((p - ex)**2)
    >>> w = dpjax.distributed.mixing_matrix(dpjax.distributed.complete(2))
    >>> alg = dsgd(loss, w, learning_rate=0.5)
    >>> batch = dpjax.distributed.AgentBatch(jnp.ones((2, 1, 3)),
    ...                                      jnp.ones((2, 1), bool))
    >>> state, metrics = alg.round(alg.init(jnp.zeros(3)), jax.random.key(0),
    ...                            batch)
    >>> state.params.tolist()[0], metrics.bits.tolist()
    ([0.5, 0.5, 0.5], [48.0, 48.0])
  """
  w = check_common(loss_fn, mixing, learning_rate)
  if l2_norm_clip is not None:
    _validate.positive(l2_norm_clip=l2_norm_clip)
  grad = mean_grad(loss_fn, None if l2_norm_clip is None
                   else float(l2_norm_clip))

  def body(rows, rows_w, mix, hyper, x, aux, keys, examples, mask):
    del keys
    g = grad(x, examples, mask)
    z = _to_16(x)
    ones = jnp.ones(rows.shape, jnp.float32)
    x_new = mix_with_self(x, z, mix(z), self_weights(rows, rows_w), ones)
    x_new = jax.tree.map(lambda xn, gi: xn - hyper['learning_rate'] * gi,
                         x_new, g)
    return x_new, aux, None

  def bits(sent, params):
    del sent
    n = jax.tree.leaves(params)[0].shape[0]
    return jnp.full((n,), float(FLOAT_BITS * num_coordinates(params)),
                    jnp.float32)

  return make('dsgd', body, w, dict(learning_rate=learning_rate), (), bits,
              mesh, axis_name)


def sdm(loss_fn: LossFn, mixing, *, l2_norm_clip: float,
        noise_multiplier: float, learning_rate: float, theta: float = 0.6,
        rate: float = 0.3, mesh: jax.sharding.Mesh | None = None,
        axis_name: str = 'agents',
        clip_method: str = 'vmap') -> DecentralizedAlgorithm:
  """SDM-DSGD: sparsified differentials, Gaussian noise on the gradient.

  Args:
    loss_fn, mixing, l2_norm_clip, noise_multiplier, learning_rate, mesh,
      axis_name, clip_method: as ``qdpsgd1``.
    theta: the averaging weight (0, 1] (paper: 0.6).
    rate: c, the probability a coordinate of the differential is sent
      (0, 1] (paper: 0.3).

  Returns:
    A ``DecentralizedAlgorithm``; bits per round are 16 per sent value (the
    mask comes from the agent's key, so positions need not be sent).

  Privacy:
    As ``qdpsgd1``: the Gaussian mechanism with noise multiplier sigma |S|/2
    per round with |S| > 0; what is sent is post-processing.

  References:
    Zhang et al., "Private and communication-efficient edge learning: a
    sparse differential Gaussian-masking distributed SGD approach", 2020;
    Ding et al., Sec. 5 (baseline, theta = 0.6, c = 0.3).
  """
  w = check_common(loss_fn, mixing, learning_rate)
  check_private(l2_norm_clip, noise_multiplier)
  _validate.positive(theta=theta, rate=rate)
  if float(theta) > 1 or float(rate) > 1:
    raise ValueError(f'Expected theta={theta} and rate={rate} in (0, 1].')
  grad = mean_grad(loss_fn, float(l2_norm_clip), clip_method)
  clip, c, th = float(l2_norm_clip), float(rate), float(theta)

  def body(rows, rows_w, mix, hyper, x, y, keys, examples, mask):
    del rows, rows_w
    skeys, nkeys = split_keys(keys)

    def sparsify(d, k):
      leaves, treedef = jax.tree.flatten(d)
      ks = jax.random.split(k, len(leaves))
      kept = [jax.random.bernoulli(kk, c, v.shape) for kk, v in zip(ks, leaves)]
      vals = [jnp.where(m, v / c, 0).astype(jnp.float16).astype(v.dtype)
              for m, v in zip(kept, leaves)]
      count = sum(jnp.sum(m) for m in kept)
      return jax.tree.unflatten(treedef, vals), count

    diff = jax.tree.map(lambda a, b: a - b, y, x)
    sent, count = jax.vmap(sparsify)(diff, skeys)
    x = jax.tree.map(lambda a, b: a + b, x, sent)
    size = jnp.sum(mask, axis=1)
    g = grad(x, examples, mask)
    zeta = jax.vmap(lambda k, xi: noise.tree_noise(
        noise.gaussian, k, xi, stddev=1.0))(nkeys, x)
    has = (size > 0).astype(jnp.float32)
    stddev = hyper['noise_multiplier'] * clip
    mixed = mix(x)
    y = jax.tree.map(
        lambda xi, mi, gi, ze: (1 - th) * xi + th * (
            mi - hyper['learning_rate'] * (gi + col(has, gi) * stddev * ze)),
        x, mixed, g, zeta)
    return x, y, count

  def bits(sent, params):
    del params
    return (FLOAT_BITS * sent).astype(jnp.float32)

  hyper = dict(learning_rate=learning_rate, noise_multiplier=noise_multiplier)
  return make('sdm', body, w, hyper, (), bits, mesh, axis_name,
              init_aux=lambda params: params)
