"""The federated client loop: rounds over clients, a protocol, a server step.

The training set is split at random into one shard per client
(``client_shards``). Every round t, with the round key ``fold_in(key, t)``
split into a selection key and a protocol key:

1. ``clients_per_round`` clients are chosen (all of them, or a fixed-size
   random subset: no amplification by subsampling is implied);
2. each computes the gradient of the mean loss over its shard at the current
   model, flattened (``jax.flatten_util.ravel_pytree``);
3. the protocol (a ``dpjax.distributed.Protocol``, built by the library's
   ``cpsgd_protocol``, ``distributed_dp_protocol``,
   ``gaussian_distributed_mean_protocol`` or ``plain_mean_protocol``) turns
   the [n, d] client gradients into one estimate of their mean
   (``Protocol.mean``);
4. the server takes an SGD step with heavy-ball momentum
   (v <- mu v + g_hat, w <- w - lr v).

The whole run is one ``lax.scan`` over rounds, vmapped over seeds and jitted
(``FederatedLoop``); the loop knows the protocol only as a
``dpjax.distributed.Protocol``: its mean, param, event and bits. After a
run, the protocol's per-round event is recorded once per round that ran in
a ``dpjax.accounting.PrivacyLedger``, with its bits per client.
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

# ``Protocol.mean``: (round key, client vectors [n, d], param) -> estimate [d].
Mean = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


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


def _shard_grads(loss_fn, x_tr, y_tr, unravel):
  """``(flat, idx [n, size], mask) -> [n, d]``: each selected client's
  gradient of its shard's mean loss at the flat parameters."""

  def shard_grad(flat, i, mk):
    def shard_loss(f):
      losses = jax.vmap(loss_fn, in_axes=(None, 0))(unravel(f),
                                                    (x_tr[i], y_tr[i]))
      return jnp.sum(losses * mk) / jnp.sum(mk)
    return jax.grad(shard_loss)(flat)

  return jax.vmap(shard_grad, in_axes=(None, 0, 0))


def _metrics(model, loss_fn, data, unravel):
  """``flat -> {train_loss, train_accuracy, test_accuracy}``."""
  x_tr, y_tr, x_te, y_te = data

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

  return metrics


def _select(key, num_clients: int, clients_per_round: int) -> jax.Array:
  """The round's clients: all, or a fixed-size random subset (no
  amplification)."""
  if clients_per_round < num_clients:
    return jax.random.choice(key, num_clients, (clients_per_round,),
                             replace=False)
  return jnp.arange(num_clients)


def make_trainer(model, data, mean: Mean, *, num_clients: int,
                 clients_per_round: int, rounds: int, learning_rate: float,
                 momentum: float, l2_norm_clip: float):
  """jit(vmap over seeds) of a whole classification run: scan over rounds.

  Returns ``train(keys [S], params [S, ...], idx [S, C, size], mask,
  param) -> curves``, a dict of [S, rounds] arrays: ``train_loss``,
  ``train_accuracy``, ``test_accuracy`` after each round, ``grad_norm``
  (mean client gradient norm) and ``clipped_fraction`` (clients whose
  gradient norm exceeds ``l2_norm_clip``; the protocol does the clipping).
  ``mean`` is a ``Protocol.mean``, called with the round's protocol key.
  """
  loss_fn = train_lib.per_example_loss(model, 'classification')
  arrays = tuple(jnp.asarray(a) for a in (data.x_train, data.y_train,
                                          data.x_test, data.y_test))
  lr, mu, clip = learning_rate, momentum, l2_norm_clip

  def train(key, params0, idx, mask, param):
    flat0, unravel = flatten_util.ravel_pytree(params0)
    grads_of = _shard_grads(loss_fn, arrays[0], arrays[1], unravel)
    metrics = _metrics(model, loss_fn, arrays, unravel)

    def round_fn(carry, t):
      flat, velocity = carry
      sel_key, agg_key = jax.random.split(jax.random.fold_in(key, t))
      sel = _select(sel_key, num_clients, clients_per_round)
      grads = grads_of(flat, idx[sel], mask[sel])
      norms = jnp.sqrt(jnp.sum(jnp.square(grads), axis=1))
      velocity = mu * velocity + mean(agg_key, grads, param)
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

  ``run(clients, protocol)`` trains every seed of ``clients`` with a
  ``dpjax.distributed.Protocol`` and returns the curves and the ledger of
  what ran. Protocols that share ``mean`` (and differ in ``param``) share
  one compiled trainer.
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

  def run(self, clients: Clients, protocol: distributed.Protocol
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
