"""The federated client loop: rounds over clients, a protocol, a server step.

The training set is split at random into one shard per client
(``client_shards``). Every round t, with the round key ``fold_in(key, t)``
split into a selection key and a protocol key:

1. ``clients_per_round`` clients are chosen (all of them, or a fixed-size
   random subset: no amplification by subsampling is implied);
2. each computes the gradient of the mean loss over its shard at the current
   model, flattened (``jax.flatten_util.ravel_pytree``);
3. the protocol turns the [n, d] client gradients into one estimate of their
   mean (``Protocol.mean``: cpSGD's ``dpjax.distributed.distributed_mean``,
   the Gaussian baseline's ``gaussian_distributed_mean``, a plain mean, or any
   other secure-sum protocol on the ``dpjax.distributed`` client harness);
4. the server takes an SGD step with heavy-ball momentum
   (v <- mu v + g_hat, w <- w - lr v).

The whole run is one ``lax.scan`` over rounds, vmapped over seeds and jitted
(``FederatedLoop``); the loop knows nothing of the protocol beyond its mean.
After a run, the protocol's per-round event is recorded once per round that
ran in a ``dpjax.accounting.PrivacyLedger``, with its bits per client.
Everything random derives from the seeds (``init_clients``): model init
``fold_in(key(seed), 0)``, the run's key ``fold_in(key(seed), 1)`` and the
shards ``numpy.random.default_rng(seed)``.
"""

import functools
from typing import Any, Callable, NamedTuple, Sequence

import jax
from jax import flatten_util
import jax.numpy as jnp
import numpy as np

from dpjax import accounting
from dpjax import distributed
from experiments.common import models
from experiments.common import train as train_lib

Mean = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
# The protocol type lives in dpjax.distributed; re-exported for the loops here.
Protocol = distributed.Protocol


def plain_mean(key: jax.Array, vectors: jax.Array,
               param: jax.Array) -> jax.Array:
  """The non-private mean of the client vectors (no clipping, no noise)."""
  del key, param
  return jnp.mean(vectors, axis=0)


@functools.lru_cache(maxsize=None)
def gaussian_mean(l2_norm_clip: float) -> Mean:
  """The Gaussian protocol at clip D; ``param`` is each client's stddev."""

  def mean(key, vectors, stddev):
    return distributed.gaussian_distributed_mean(key, vectors, l2_norm_clip,
                                                 stddev)

  return mean


def cpsgd_mean(config: distributed.CpsgdConfig) -> Mean:
  """cpSGD's ``distributed_mean`` with ``config``; ``param`` is unused."""

  def mean(key, vectors, param):
    del param
    return distributed.distributed_mean(config, key, vectors)

  return mean


def client_shards(num_examples: int, num_clients: int,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Random near-equal shards as padded index and mask arrays [C, S]."""
  if num_clients > num_examples:
    raise ValueError(f'num_clients={num_clients} exceeds the {num_examples} '
                     'training examples')
  parts = np.array_split(
      np.random.default_rng(seed).permutation(num_examples), num_clients)
  size = max(len(p) for p in parts)
  idx = np.zeros((num_clients, size), np.int32)
  mask = np.zeros((num_clients, size), np.float32)
  for c, part in enumerate(parts):
    idx[c, :len(part)] = part
    mask[c, :len(part)] = 1
  return idx, mask


class Clients(NamedTuple):
  """Per seed (leading axis S): the run's key, initial model and shards."""
  keys: jax.Array  # [S] typed keys
  params: Any  # initial parameters, stacked [S, ...]
  shard_index: jax.Array  # [S, C, size] int32
  shard_mask: jax.Array  # [S, C, size] float32
  dimension: int  # d, the number of model parameters


def init_clients(model, data, seeds: Sequence[int],
                 num_clients: int) -> Clients:
  """Initial models, shards and keys of one run per seed."""
  params0 = [model.init(jax.random.fold_in(jax.random.key(s), 0),
                        data.x_train[0]) for s in seeds]
  shards = [client_shards(len(data.x_train), num_clients, s) for s in seeds]
  return Clients(
      keys=jnp.stack([jax.random.fold_in(jax.random.key(s), 1)
                      for s in seeds]),
      params=jax.tree.map(lambda *a: jnp.stack(a), *params0),
      shard_index=jnp.asarray(np.stack([s[0] for s in shards])),
      shard_mask=jnp.asarray(np.stack([s[1] for s in shards])),
      dimension=models.num_params(params0[0]))


def make_trainer(model, data, mean: Mean, *, num_clients: int,
                 clients_per_round: int, rounds: int, learning_rate: float,
                 momentum: float, l2_norm_clip: float):
  """jit(vmap over seeds) of a whole classification run: scan over rounds.

  Returns ``train(keys [S], params [S, ...], idx [S, C, size], mask,
  param) -> curves``, a dict of [S, rounds] arrays: ``train_loss``,
  ``train_accuracy``, ``test_accuracy`` after each round, ``grad_norm``
  (mean client gradient norm) and ``clipped_fraction`` (clients whose
  gradient norm exceeds ``l2_norm_clip``; the protocol does the clipping).
  """
  loss_fn = train_lib.per_example_loss(model, 'classification')
  x_tr, y_tr = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
  x_te, y_te = jnp.asarray(data.x_test), jnp.asarray(data.y_test)
  n = clients_per_round
  lr, mu, clip = learning_rate, momentum, l2_norm_clip

  def train(key, params0, idx, mask, param):
    flat0, unravel = flatten_util.ravel_pytree(params0)

    def shard_grad(flat, i, mk):
      def shard_loss(f):
        losses = jax.vmap(loss_fn, in_axes=(None, 0))(unravel(f),
                                                      (x_tr[i], y_tr[i]))
        return jnp.sum(losses * mk) / jnp.sum(mk)
      return jax.grad(shard_loss)(flat)

    def metrics(flat):
      params = unravel(flat)
      logits_tr = model.apply(params, x_tr)
      logits_te = model.apply(params, x_te)
      loss = jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0))(params,
                                                           (x_tr, y_tr)))
      acc = lambda lg, y: jnp.mean((jnp.argmax(lg, -1) == y).astype(
          jnp.float32))
      return dict(train_loss=loss, train_accuracy=acc(logits_tr, y_tr),
                  test_accuracy=acc(logits_te, y_te))

    def round_fn(carry, t):
      flat, velocity = carry
      sel_key, agg_key = jax.random.split(jax.random.fold_in(key, t))
      if n < num_clients:  # fixed-size random subset (no amplification)
        sel = jax.random.choice(sel_key, num_clients, (n,), replace=False)
      else:
        sel = jnp.arange(num_clients)
      grads = jax.vmap(shard_grad, in_axes=(None, 0, 0))(flat, idx[sel],
                                                         mask[sel])
      norms = jnp.sqrt(jnp.sum(jnp.square(grads), axis=1))
      estimate = mean(agg_key, grads, param)
      velocity = mu * velocity + estimate
      flat = flat - lr * velocity
      out = metrics(flat)
      out['clipped_fraction'] = jnp.mean((norms > clip).astype(jnp.float32))
      out['grad_norm'] = jnp.mean(norms)
      return (flat, velocity), out

    _, curves = jax.lax.scan(round_fn, (flat0, jnp.zeros_like(flat0)),
                             jnp.arange(rounds))
    return curves

  return jax.jit(jax.vmap(train, in_axes=(0, 0, 0, 0, None)))


class FederatedLoop:
  """Federated runs of one model on one dataset, one trainer per mean.

  ``run(clients, protocol)`` trains every seed of ``clients`` with the
  protocol and returns the curves and the ledger of what ran.
  """

  def __init__(self, model, data, *, num_clients: int,
               clients_per_round: int, rounds: int, learning_rate: float,
               momentum: float, l2_norm_clip: float):
    self.rounds = rounds
    self._make = functools.partial(
        make_trainer, model, data, num_clients=num_clients,
        clients_per_round=clients_per_round, rounds=rounds,
        learning_rate=learning_rate, momentum=momentum,
        l2_norm_clip=l2_norm_clip)
    self._trainers = {}

  def run(self, clients: Clients, protocol: Protocol
          ) -> tuple[dict[str, np.ndarray], accounting.PrivacyLedger | None]:
    """(curves [S, rounds] as numpy, ledger or None if not private)."""
    if protocol.mean not in self._trainers:
      self._trainers[protocol.mean] = self._make(protocol.mean)
    curves = jax.device_get(self._trainers[protocol.mean](
        clients.keys, clients.params, clients.shard_index, clients.shard_mask,
        jnp.float32(protocol.param)))
    ledger = None
    if protocol.event is not None:
      ledger = accounting.PrivacyLedger()
      for _ in range(self.rounds):  # one event per round the scan ran
        # Every seed's rounds draw fresh keys inside the scan; one ledger
        # serves all seeds, so the records are not bound to one key: planned.
        ledger.record(protocol.event, bits=protocol.bits_per_client,
                      planned=True)
    return curves, ledger
