"""Decentralized SGD on a gossip graph: Q-DPSGD-1/2, DSGD and SDM.

n agents each hold a model x_i (a pytree; every leaf carries the leading
agent axis) and, every round, a minibatch of their own private examples
(``AgentBatch``, padded and masked; e.g. deadline batches from
``dpjax.sampling.DeadlineSampler``). One round of every agent is one pure,
jitted function ``round(state, key, batch) -> (state, metrics)``; it runs
vmapped on one device or sharded over a mesh axis (``run_agents``), bit for
bit the same from the same keys. Agent i's randomness in round t comes from
``client_keys(fold_in(stream(key, 'decentralized_round'), t), n)[i]``
(``dpjax._keys``) with t the round counter in the state, so a key passed
again in a later round still draws fresh noise.

Gradients are means of per-example gradients clipped to K
(``dpjax.clipping.clipped_grad_sum``) over the agent's batch; an empty batch
gives a zero gradient and no noise (it uses no data). With mixing weights W
and step sizes alpha (``learning_rate``) and epsilon (``mixing_rate``, the
paper's averaging step; named so to leave epsilon to privacy):

* Q-DPSGD-1 (Ding et al., Alg. 1, eq. 6): z_i = Q(x_i) (``quantizer``, eq.
  5); x_i <- (1 - eps + eps w_ii) x_i + eps sum_{j != i} w_ij z_j - alpha
  eps (g_i + zeta_i), zeta_i ~ N(0, (sigma K)^2 I).
* Q-DPSGD-2 (Alg. 2, eq. 7): z_i = clamp(Q(x_i) + zeta_i), zeta_i the exact
  discrete Gaussian on the grid eta Z with scale sigma K (``dpjax.noise``),
  clamped to the quantizer's range (post-processing, as the paper
  suggests); x_i <- (1 - eps + eps w_ii) x_i + eps sum_{j != i} w_ij z_j -
  alpha eps g_i.
* DSGD (full precision): z_i = x_i sent as 16-bit floats; x_i <- w_ii x_i
  + sum_{j != i} w_ij z_j - alpha g_i (no noise, no privacy).
* SDM (Zhang et al. 2020, as in REFERENCES 6): agents keep a public x_i
  (what neighbours know) and a private y_i; d_i = y_i - x_i is sent
  sparsified, S(d) = d / c on a Bernoulli(c) mask (16-bit values), and
  x_i <- x_i + S(d_i); then y_i <- (1 - theta) x_i + theta (sum_j w_ij x_j -
  alpha (g_i + zeta_i)) with g_i at the new x_i.

This module holds Q-DPSGD-1/2; DSGD and SDM are in ``_baselines``, and the
round every algorithm shares (its state, batch and metrics, ``make``) is in
``_rounds``. The privacy of each algorithm (per agent, per round, from the
batch sizes that ran) is in ``_privacy``; bits per agent per round are in
the round's metrics.
"""

import jax
from jax import flatten_util
import jax.numpy as jnp

from dpjax import _validate
from dpjax import compression
from dpjax import noise
from dpjax.distributed.decentralized._rounds import check_common
from dpjax.distributed.decentralized._rounds import check_private
from dpjax.distributed.decentralized._rounds import col
from dpjax.distributed.decentralized._rounds import DecentralizedAlgorithm
from dpjax.distributed.decentralized._rounds import LossFn
from dpjax.distributed.decentralized._rounds import make
from dpjax.distributed.decentralized._rounds import mean_grad
from dpjax.distributed.decentralized._rounds import mix_with_self
from dpjax.distributed.decentralized._rounds import num_coordinates
from dpjax.distributed.decentralized._rounds import self_weights
from dpjax.distributed.decentralized._rounds import split_keys


def _quantize(quantizer, x, key):
  """Integer codes of every leaf, one subkey a leaf."""
  leaves, treedef = jax.tree.flatten(x)
  keys = jax.random.split(key, len(leaves))
  return jax.tree.unflatten(
      treedef, [quantizer.quantize(v, key=k) for k, v in zip(keys, leaves)])


def _quantized_bits(quantizer):
  def bits(sent, params):
    del sent
    p = num_coordinates(params)
    n = jax.tree.leaves(params)[0].shape[0]
    return jnp.full((n,), float(quantizer.bits_per_coordinate * p),
                    jnp.float32)
  return bits


def qdpsgd1(loss_fn: LossFn, mixing, *, l2_norm_clip: float,
            noise_multiplier: float, learning_rate: float, mixing_rate: float,
            quantizer: compression.GridQuantizer,
            mesh: jax.sharding.Mesh | None = None,
            axis_name: str = 'agents',
            clip_method: str = 'vmap') -> DecentralizedAlgorithm:
  """Q-DPSGD-1: quantized gossip, Gaussian noise on the clipped gradient.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` (one agent's model).
    mixing: W [n, n], symmetric and doubly stochastic.
    l2_norm_clip: K (> 0), the per-example clip norm.
    noise_multiplier: sigma; the noise on the mean gradient has stddev
      sigma K (traceable).
    learning_rate: alpha (> 0, traceable).
    mixing_rate: the averaging step epsilon (> 0, traceable).
    quantizer: ``dpjax.compression.low_precision_quantizer(eta, bits)``.
    mesh, axis_name: shard agents over this mesh axis (default: vmap).
    clip_method: ``'vmap'`` (per-example gradients) or ``'ghost'`` (the
      same clipped sum from layer inputs and output gradients; much faster
      on dense layers): ``dpjax.clipped_grad_sum``'s ``method``.

  Returns:
    A ``DecentralizedAlgorithm``.

  Privacy:
    Per agent and round with |S| > 0 examples, the released noisy gradient
    has replace-one sensitivity 2K/|S| under noise sigma K: the Gaussian
    mechanism with noise multiplier sigma |S| / 2
    (``qdpsgd_step_event(metrics, setting, i)`` reads |S| and the sigma
    that ran from the round's metrics); everything an agent sends is
    post-processing of its noisy gradients. No subsampling amplification
    is claimed unless the setting opts in (``DecentralizedPrivacy(...,
    amplified=True)``, valid for ``DeadlineSampler`` batches only).

  References:
    Ding et al., "Differentially Private and Communication Efficient
    Collaborative Learning", AAAI 2021, Alg. 1, eq. (5)-(6), Thm. 1.

  Example:
    >>> loss = lambda p, ex: 0.5 * jnp.sum((p * ex)**2)
    >>> w = dpjax.distributed.mixing_matrix(dpjax.distributed.ring(4))
    >>> q = dpjax.compression.low_precision_quantizer(0.125, 4)
    >>> alg = qdpsgd1(loss, w, l2_norm_clip=0.5, noise_multiplier=1.0,
    ...               learning_rate=0.1, mixing_rate=0.5, quantizer=q)
    >>> batch = dpjax.distributed.AgentBatch(jnp.ones((4, 2, 3)),
    ...                                      jnp.ones((4, 2), bool))
    >>> state, metrics = alg.round(alg.init(jnp.ones(3)), jax.random.key(0),
    ...                            batch)
    >>> state.params.shape, metrics.bits.tolist()
    ((4, 3), [12.0, 12.0, 12.0, 12.0])
  """
  w = check_common(loss_fn, mixing, learning_rate)
  check_private(l2_norm_clip, noise_multiplier)
  _validate.positive(mixing_rate=mixing_rate)
  _check_quantizer(quantizer)
  grad = mean_grad(loss_fn, float(l2_norm_clip), clip_method)
  clip = float(l2_norm_clip)

  def body(rows, rows_w, mix, hyper, x, aux, keys, examples, mask):
    alpha, rate = hyper['learning_rate'], hyper['mixing_rate']
    size = jnp.sum(mask, axis=1)
    g = grad(x, examples, mask)
    qkeys, nkeys = split_keys(keys)
    z = jax.vmap(lambda xi, k: jax.tree.map(
        lambda c, v: quantizer.dequantize(c, v.dtype),
        _quantize(quantizer, xi, k), xi))(x, qkeys)
    zeta = jax.vmap(lambda k, xi: noise.tree_noise(
        noise.gaussian, k, xi, stddev=1.0))(nkeys, x)
    has = (size > 0).astype(jnp.float32)
    stddev = hyper['noise_multiplier'] * clip
    x_new = mix_with_self(x, z, mix(z), self_weights(rows, rows_w),
                          jnp.full(rows.shape, rate))
    x_new = jax.tree.map(
        lambda xn, gi, ze: xn - alpha * rate * (gi + col(has, gi) * stddev
                                                * ze), x_new, g, zeta)
    return x_new, aux, None

  hyper = dict(learning_rate=learning_rate, mixing_rate=mixing_rate,
               noise_multiplier=noise_multiplier)
  return make('qdpsgd1', body, w, hyper, (), _quantized_bits(quantizer),
              mesh, axis_name)


def qdpsgd2(loss_fn: LossFn, mixing, *, l2_norm_clip: float,
            noise_multiplier: float, learning_rate: float, mixing_rate: float,
            quantizer: compression.GridQuantizer,
            mesh: jax.sharding.Mesh | None = None,
            axis_name: str = 'agents',
            clip_method: str = 'vmap') -> DecentralizedAlgorithm:
  """Q-DPSGD-2: exact discrete Gaussian noise on the quantized broadcast.

  Args:
    loss_fn, mixing, l2_norm_clip, learning_rate, mixing_rate, quantizer,
      mesh, axis_name, clip_method: as ``qdpsgd1``.
    noise_multiplier: sigma; the broadcast gets N_{eta Z}(0, (sigma K)^2)
      per coordinate (static: the exact sampler needs a concrete scale).

  Returns:
    A ``DecentralizedAlgorithm`` whose broadcasts stay on the grid eta Z.

  Privacy:
    Each broadcast is Q(x_i) + discrete Gaussian. x_i is not noised: it
    carries every past gradient, so between neighbouring datasets the
    models drift apart by d_t <= |1 - eps + eps w_ii| d_{t-1} + 2 alpha eps
    K, and the randomized rounding can add one grid step per coordinate:
    the broadcast's sensitivity is d_t + eta sqrt(p)
    (``qdpsgd2_sensitivities``); each broadcast is then (a, a Delta_t^2 /
    (2 (sigma K)^2))-RDP (Ding et al. Cor. 1).

  References:
    Ding et al., AAAI 2021, Alg. 2, eq. (7), Thm. 4-5.
  """
  w = check_common(loss_fn, mixing, learning_rate)
  check_private(l2_norm_clip, noise_multiplier)
  _validate.positive(mixing_rate=mixing_rate)
  _check_quantizer(quantizer)
  if not _validate.concrete(noise_multiplier):
    raise ValueError('Expected a concrete noise_multiplier for Q-DPSGD-2 (the '
                     'exact discrete Gaussian sampler needs it static).')
  grad = mean_grad(loss_fn, float(l2_norm_clip), clip_method)
  lattice_sigma = float(noise_multiplier) * float(l2_norm_clip) / float(
      quantizer.spacing)

  def body(rows, rows_w, mix, hyper, x, aux, keys, examples, mask):
    alpha, rate = hyper['learning_rate'], hyper['mixing_rate']
    g = grad(x, examples, mask)
    qkeys, nkeys = split_keys(keys)

    def broadcast(xi, qk, nk):
      # One flat vector per agent: one quantization and one exact sampler
      # loop per round instead of one per leaf.
      flat, unravel = flatten_util.ravel_pytree(xi)
      codes = quantizer.quantize(flat, key=qk)
      if lattice_sigma > 0:
        codes = codes + noise.discrete_gaussian(nk, codes.shape,
                                                sigma=lattice_sigma)
      codes = jnp.clip(codes, quantizer.code_min, quantizer.code_max)
      return unravel(quantizer.dequantize(codes, flat.dtype))

    # lax.map, not vmap: a vmapped exact sampler runs one batched rejection
    # loop for all agents (measured 2.4x slower than drawing per agent).
    z = jax.lax.map(lambda a: broadcast(*a), (x, qkeys, nkeys))
    x_new = mix_with_self(x, z, mix(z), self_weights(rows, rows_w),
                          jnp.full(rows.shape, rate))
    x_new = jax.tree.map(lambda xn, gi: xn - alpha * rate * gi, x_new, g)
    return x_new, aux, None

  hyper = dict(learning_rate=learning_rate, mixing_rate=mixing_rate,
               noise_multiplier=noise_multiplier)
  return make('qdpsgd2', body, w, hyper, ('noise_multiplier',),
              _quantized_bits(quantizer), mesh, axis_name)


def _check_quantizer(quantizer):
  if not isinstance(quantizer, compression.GridQuantizer):
    raise ValueError('Expected quantizer to be a GridQuantizer (e.g. '
                     f'low_precision_quantizer(eta, bits)), got {quantizer!r}.')
