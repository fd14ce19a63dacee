"""experiments/common/federated.py: shards, round loop, the library's
protocols, ledger."""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import distributed as dist
from experiments.common import data as data_lib
from experiments.common import federated
from experiments.common import models

LOOP = dict(num_clients=10, clients_per_round=10, rounds=2,
            learning_rate=0.5, momentum=0.9, l2_norm_clip=0.25)


@pytest.fixture(scope='module')
def setup():
  ds = data_lib.load('digits', seed=0)
  model = models.make_model('logistic', 10, input_shape=ds.input_shape)
  return model, ds


def test_shards_cover_the_training_set_once():
  idx, mask = federated.client_shards(23, 5, seed=0)
  assert idx.shape == mask.shape == (5, 5)
  used = sorted(idx[mask > 0].tolist())
  assert used == list(range(23))
  with pytest.raises(ValueError, match='num_clients=30'):
    federated.client_shards(23, 30, seed=0)


def test_init_clients_is_seeded(setup):
  model, ds = setup
  a = federated.init_clients(model, ds, [0, 1], 10)
  b = federated.init_clients(model, ds, [0, 1], 10)
  assert a.dimension == 650 and a.shard_index.shape[:2] == (2, 10)
  np.testing.assert_array_equal(a.shard_index, b.shard_index)
  assert not np.array_equal(a.shard_index[0], a.shard_index[1])
  leaves = jax.tree.leaves(a.params)
  assert all(leaf.shape[0] == 2 for leaf in leaves)
  assert any(not np.array_equal(leaf[0], leaf[1]) for leaf in leaves)


def test_trainer_is_deterministic_per_key(setup):
  model, ds = setup
  params = jax.tree.map(lambda a: a[None], model.init(jax.random.key(0),
                                                      ds.x_train[0]))
  idx, mask = (jnp.asarray(a)[None]
               for a in federated.client_shards(len(ds.x_train), 10, 0))
  gaussian = dist.gaussian_distributed_mean_protocol(0.25, 0.1, 10, 650)
  train = federated.make_trainer(model, ds, gaussian.mean, **LOOP)
  loss = lambda k: train(jax.random.key(k)[None], params, idx, mask,
                         jnp.float32(gaussian.param))['train_loss']
  first = loss(1)
  assert first.shape == (1, 2)
  assert jnp.array_equal(first, loss(1))
  assert not jnp.array_equal(first, loss(2))


def test_loop_runs_the_library_protocols_and_records_their_rounds(setup):
  model, ds = setup
  clients = federated.init_clients(model, ds, [0], 10)
  d = clients.dimension
  loop = federated.FederatedLoop(model, ds, **LOOP)
  curves, ledger = loop.run(clients, dist.plain_mean_protocol(10, d))
  assert ledger is None  # no event: not private
  assert set(curves) == {'train_loss', 'train_accuracy', 'test_accuracy',
                         'clipped_fraction', 'grad_norm'}
  assert curves['train_loss'].shape == (1, 2)
  config = dist.CpsgdConfig(l2_norm_clip=0.25, levels=16, trials=512)
  cp_curves, ledger = loop.run(clients,
                               dist.cpsgd_protocol(config, d, 10, 1e-5))
  # one round's event (cpSGD's companion) per round, with the bits
  event = dist.cpsgd_event(config, d, 10, 1e-5)
  bits = dist.cpsgd_bits(config, d)
  assert ledger.num_events == 2 and ledger.bits == 2 * bits
  assert ledger.event() == dp_accounting.ComposedDpEvent(
      [dp_accounting.SelfComposedDpEvent(event, 2)])
  assert np.all(np.isfinite(cp_curves['train_loss']))
  # The Gaussian protocol with stddev 0 is the clipped mean, without an
  # event; protocols differing only in stddev share one mean, hence one
  # trainer (one compilation), and the noise changes the run.
  clean = dist.gaussian_distributed_mean_protocol(0.25, 0.0, 10, d)
  noisy = dist.gaussian_distributed_mean_protocol(0.25, 0.05, 10, d)
  assert clean.mean is noisy.mean
  clean_curves, ledger = loop.run(clients, clean)
  assert ledger is None
  noisy_curves, ledger = loop.run(clients, noisy)
  assert ledger.event() == dp_accounting.ComposedDpEvent(
      [dp_accounting.SelfComposedDpEvent(noisy.event, 2)])
  assert len(loop._trainers) == 3  # pylint: disable=protected-access
  assert not np.array_equal(clean_curves['train_loss'],
                            noisy_curves['train_loss'])
