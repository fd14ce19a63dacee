"""One round of every agent: what the decentralized algorithms share.

The algorithms' contract (``DecentralizedAlgorithm``: ``init`` and the
jitted ``round(state, key, batch) -> (state, metrics)``), its state, batch
and metrics, and the parts every algorithm's round is built from: the
agents' clipped mean gradients (``mean_grad``), the self-weighted gossip
step (``self_weights``, ``mix_with_self``), the argument checks and
``make``, which wraps a round body into an algorithm: the round's keys, the
agent harness (``_gossip.run_agents``) and the metrics. Q-DPSGD-1/2 are in
``_qdpsgd``, DSGD and SDM in ``_baselines``.

Example:
  >>> still = lambda rows, rows_w, mix, hyper, x, aux, keys, ex, mask: (
  ...     x, aux, x)  # a round body that keeps every model
  >>> alg = make('still', still, np.full((2, 2), 0.5), {}, (),
  ...            lambda sent, params: jnp.zeros(2), None, None)
  >>> state = alg.init(jnp.ones(3))
  >>> batch = AgentBatch(jnp.ones((2, 1, 3)), jnp.ones((2, 1), bool))
  >>> state, metrics = alg.round(state, jax.random.key(0), batch)
  >>> state.params.shape, int(state.step), metrics.batch_size.tolist()
  ((2, 3), 1, [1, 1])
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _keys
from dpjax import _validate
from dpjax import clipping
from dpjax.distributed import _harness
from dpjax.distributed.decentralized import _gossip

PyTree = Any
LossFn = Callable[[PyTree, PyTree], jax.Array]
# Decentralized algorithms a privacy setting may name (``algorithm=``).
ALGORITHMS = ('qdpsgd1', 'qdpsgd2', 'dsgd', 'sdm')
_STREAM = _keys.register('decentralized_round', __name__)
FLOAT_BITS = 16  # bits of one unquantized coordinate (the paper's T_c unit)
# Per-example clipping of the agents' gradients (``clipped_grad_sum``'s
# method): the same clipped mean; 'ghost' forms no per-example gradients.
CLIP_METHODS = ('vmap', 'ghost')


class DecentralizedState(NamedTuple):
  """Every agent's state (leaves with a leading agent axis n).

  Attributes:
    params: the agents' models x_i.
    aux: SDM's private y_i; ``()`` for the other algorithms.
    step: rounds done (int32 scalar); round t draws from ``fold_in(key, t)``.
  """
  params: PyTree
  aux: PyTree
  step: jax.Array


class AgentBatch(NamedTuple):
  """One round's examples of every agent: leaves [n, cap, ...], mask [n, cap]."""
  examples: PyTree
  mask: jax.Array


class RoundMetrics(NamedTuple):
  """What one round did, per agent [n] unless stated.

  Attributes:
    batch_size: examples used (|S_i|), int32.
    bits: bits the agent broadcast this round.
    consensus: (1/n) sum_i ||x_i - mean_j x_j||^2 after the round (scalar).
    noise_multiplier: float32 scalar, the sigma the round ran (an override
      included; 0 for DSGD). The accounting of ``_privacy``
      reads it from the metrics (``qdpsgd_step_event``, ``run_epsilon``).
  """
  batch_size: jax.Array
  bits: jax.Array
  consensus: jax.Array
  noise_multiplier: jax.Array


class DecentralizedAlgorithm(NamedTuple):
  """``init(params, num_agents)`` and the jitted ``round(state, key, batch)``.

  Attributes:
    name: one of ``ALGORITHMS``.
    init: copies one model to every agent: ``init(params, n) -> state``.
    round: ``(state, key, batch, hyper=None) -> (state, RoundMetrics)``;
      ``hyper`` optionally overrides the traced step sizes and noise
      multiplier (a dict with any of ``learning_rate``, ``mixing_rate``,
      ``noise_multiplier``; not Q-DPSGD-2's, whose sampler needs it static),
      so a sweep is one compiled round; the sigma that ran is in the
      round's metrics.
    mixing: W as given (NumPy).
    hyper: the default hyperparameters.
  """
  name: str
  init: Callable[..., DecentralizedState]
  round: Callable[..., tuple[DecentralizedState, RoundMetrics]]
  mixing: np.ndarray
  hyper: dict[str, Any]


def mean_grad(loss_fn: LossFn, l2_norm_clip, clip_method: str = 'vmap'):
  """Per agent: mean of clipped per-example gradients over its batch (0 if
  empty), clipped by ``clipped_grad_sum``'s ``clip_method``."""
  if l2_norm_clip is None:
    def grad(params, examples, mask):
      def loss(p):
        losses = jax.vmap(loss_fn, in_axes=(None, 0))(p, examples)
        return jnp.sum(jnp.where(mask, losses, 0.0))
      size = jnp.sum(mask)
      g = jax.grad(loss)(params)
      return jax.tree.map(lambda x: x / jnp.maximum(size, 1).astype(x.dtype),
                          g)
  else:
    if clip_method not in CLIP_METHODS:
      raise ValueError(f'Expected clip_method in {CLIP_METHODS}, got '
                       f'{clip_method!r}.')
    summed = clipping.clipped_grad_sum(loss_fn, l2_norm_clip, clip_method)

    def grad(params, examples, mask):
      size = jnp.sum(mask)
      g = summed(params, examples, mask).grad_sum.value
      return jax.tree.map(lambda x: x / jnp.maximum(size, 1).astype(x.dtype),
                          g)
  return jax.vmap(grad)


def self_weights(rows, rows_w):
  return rows_w[jnp.arange(rows.shape[0]), rows]


def col(v, leaf):
  """[r] per-agent values as [r, 1, ...] to broadcast against a leaf."""
  return v.reshape((-1,) + (1,) * (leaf.ndim - 1)).astype(leaf.dtype)


def num_coordinates(params: PyTree) -> int:
  return sum(int(np.prod(jnp.shape(x)[1:])) for x in jax.tree.leaves(params))


def mix_with_self(x, z, mixed, w_self, rate):
  """(1 - rate + rate w_ii) x_i + rate sum_{j != i} w_ij z_j."""
  def leaf(xi, zi, mi):
    own = col(w_self, xi)
    return xi + col(rate, xi) * (mi - own * zi + own * xi - xi)
  return jax.tree.map(leaf, x, z, mixed)


def check_common(loss_fn, mixing, learning_rate):
  if not callable(loss_fn):
    raise ValueError(f'Expected loss_fn to be callable, got {loss_fn!r}.')
  w = np.asarray(mixing, np.float64)
  if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] < 2:
    raise ValueError(f'Expected a mixing matrix [n, n] with n >= 2, got '
                     f'shape {w.shape}.')
  if not (np.allclose(w, w.T) and np.allclose(w.sum(axis=1), 1)):
    raise ValueError('Expected a symmetric, doubly stochastic mixing matrix '
                     '(e.g. mixing_matrix(adjacency)).')
  _validate.positive(learning_rate=learning_rate)
  return w


def check_private(l2_norm_clip, noise_multiplier):
  _validate.positive(l2_norm_clip=l2_norm_clip)
  _validate.finite(l2_norm_clip=l2_norm_clip)
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.finite(noise_multiplier=noise_multiplier)


def make(name, body, w, hyper, static_hyper, bits_of, mesh, axis_name,
         init_aux=lambda params: ()):
  """Wraps a round body into an algorithm: keys, the harness, metrics."""
  n = w.shape[0]
  w32 = jnp.asarray(w, jnp.float32)

  def init(params, num_agents=n):
    if num_agents != n:
      raise ValueError(f'Expected num_agents={num_agents} to match the '
                       f'{n} agents of the mixing matrix.')
    stacked = jax.tree.map(
        lambda p: jnp.broadcast_to(jnp.asarray(p), (n,) + jnp.shape(p)),
        params)
    return DecentralizedState(stacked, init_aux(stacked), jnp.int32(0))

  @jax.jit
  def _round(state, key, batch, hyper_values):
    round_key = jax.random.fold_in(_keys.stream(key, _STREAM), state.step)
    keys = _harness.client_keys(round_key, n)
    params, aux, sent = _gossip.run_agents(
        body, w32, hyper_values, state.params, state.aux, keys,
        batch.examples, batch.mask, mesh=mesh, axis_name=axis_name)
    whole = params
    if mesh is not None:  # reduce on one layout: the same bits as vmapped
      whole = jax.lax.with_sharding_constraint(
          params, jax.sharding.NamedSharding(mesh,
                                             jax.sharding.PartitionSpec()))
    mean = jax.tree.map(lambda x: jnp.mean(x, axis=0), whole)
    consensus = sum(
        jnp.sum(jnp.square(x - m[None])) for x, m in
        zip(jax.tree.leaves(whole), jax.tree.leaves(mean))) / n
    sigma = hyper_values.get('noise_multiplier',
                             hyper.get('noise_multiplier', 0.0))
    metrics = RoundMetrics(jnp.sum(batch.mask, axis=1).astype(jnp.int32),
                           bits_of(sent, params), consensus,
                           jnp.asarray(sigma, jnp.float32))
    return DecentralizedState(params, aux, state.step + 1), metrics

  def round_fn(state, key, batch, hyper_override=None):
    key = _validate.key(key)
    mask = jnp.asarray(batch.mask)
    if mask.dtype != jnp.bool_ or mask.ndim != 2 or mask.shape[0] != n:
      raise ValueError(f'Expected batch.mask bool [{n}, cap], got '
                       f'{mask.dtype} {mask.shape}.')
    for leaf in jax.tree.leaves(batch.examples):
      if tuple(jnp.shape(leaf)[:2]) != mask.shape:
        raise ValueError(
            f'Expected batch.examples leaves of shape {mask.shape} + the '
            f'example shape (agent and batch axes), got {jnp.shape(leaf)}.')
    values = dict(hyper)
    for k, v in (hyper_override or {}).items():
      if k not in values or k in static_hyper:
        raise ValueError(f'Cannot override {k!r}; traced hyperparameters of '
                         f'{name}: {sorted(set(values) - set(static_hyper))}.')
      values[k] = v
    traced = {k: jnp.asarray(v, jnp.float32) for k, v in values.items()
              if k not in static_hyper}
    return _round(state, key, AgentBatch(batch.examples, mask), traced)

  return DecentralizedAlgorithm(name, init, round_fn, np.asarray(w),
                                dict(hyper))


def split_keys(keys):
  pair = jax.vmap(jax.random.split)(keys)
  return pair[:, 0], pair[:, 1]
