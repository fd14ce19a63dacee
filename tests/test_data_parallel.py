"""Data-parallel DP-SGD on 4 host CPU devices equals the single-device step.

Under jax.jit with a batch-sharded input, XLA's automatic partitioning gives
wrong per-example conv kernel gradients on every shard but the first (about
0.2 off in the clipped sum of the CNN below without the guard), so every
model here is checked three ways against one device: the shard_map path
(``sharded_clipped_grad_sum``), its noisy DP-SGD update for the same key,
and the guarded idiomatic path (jit of ``clipped_grad_sum`` on a sharded
batch).
"""

import dataclasses

import flax.linen as nn
import jax
from jax.sharding import AxisType
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import jax.numpy as jnp
import optax
import pytest

import dpjax
from experiments import __main__ as cli
from experiments import dpsgd_baseline
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import train as train_lib

CLIP = 0.5
TOL = 2e-5


class Mlp(nn.Module):

  @nn.compact
  def __call__(self, x):
    return nn.Dense(3)(nn.tanh(nn.Dense(8)(x)))


class Cnn(nn.Module):
  """A 3x3 conv and a strided conv."""

  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Conv(4, (3, 3))(x))
    x = nn.relu(nn.Conv(4, (3, 3), strides=2)(x))
    return nn.Dense(3)(x.reshape(-1))


class Block(nn.Module):
  """A pre-norm transformer block (attention + MLP) and a linear head."""

  @nn.compact
  def __call__(self, x):
    x = x + nn.SelfAttention(num_heads=2, qkv_features=8)(nn.LayerNorm()(x))
    h = nn.Dense(8)(nn.gelu(nn.Dense(16)(nn.LayerNorm()(x))))
    return nn.Dense(3)(jnp.mean(x + h, axis=0))


SHAPES = {'mlp': (Mlp, (6,)), 'cnn': (Cnn, (6, 6, 2)),
          'transformer': (Block, (4, 8))}


def _problem(name, batch=8):
  module, shape = SHAPES[name]
  model = module()
  x = jax.random.normal(jax.random.key(1), (batch,) + shape)
  y = jnp.arange(batch) % 3
  params = model.init(jax.random.key(0), x[0])

  def loss(p, example):
    return optax.softmax_cross_entropy_with_integer_labels(
        model.apply(p, example[0]), example[1])

  return loss, params, (x, y)


def _max_diff(a, b):
  return max(float(jnp.max(jnp.abs(u - v)))
             for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope='module')
def mesh():
  return jax.make_mesh((4,), ('data',), axis_types=(AxisType.Auto,))


def _check(name, method, mesh):
  loss, params, (x, y) = _problem(name)
  mask = jnp.arange(8) != 5  # row 5 is padding
  one = jax.jit(dpjax.clipped_grad_sum(loss, CLIP, method))
  want = one(params, (x, y), mask)
  assert _max_diff(want.grad_sum, jax.tree.map(jnp.zeros_like, params)) > 0.1
  # Data-parallel, with 7 rows on 4 devices (padded to 8 inside).
  sharded = jax.jit(dpjax.clipping.sharded_clipped_grad_sum(
      loss, CLIP, method, mesh=mesh, axis_name='data'))
  got = sharded(params, (x[:7], y[:7]), mask[:7])
  want7 = one(params, (x[:7], y[:7]), mask[:7])
  assert _max_diff(got.grad_sum, want7.grad_sum) < TOL
  assert _max_diff(got.norms, want7.norms) < TOL
  assert got.norms.shape == (7,)
  assert got.grad_sum.l2_norm_clip == CLIP  # the bound survives the psum
  leaf = jax.tree.leaves(got.grad_sum)[0]
  assert leaf.sharding.is_fully_replicated
  # The noisy DP-SGD update: same key, same update.
  tx = dpjax.dpsgd(0.1, None, 1.1, dpjax.PoissonSampler(8, 1.0), key=jax.random.key(3),
                   per_example=False)
  update = jax.jit(lambda s: tx.update(s, tx.init(params), params)[0])
  noisy = _max_diff(update(got.grad_sum), update(want7.grad_sum))
  assert noisy < TOL
  # The idiomatic path: jit on a batch sharded over the mesh is exact.
  rows = NamedSharding(mesh, P('data'))
  idiomatic = one(params, jax.device_put((x, y), rows),
                  jax.device_put(mask, rows))
  guarded = _max_diff(idiomatic.grad_sum, want.grad_sum)
  assert guarded < TOL
  return _max_diff(got.grad_sum, want7.grad_sum), noisy, guarded


def test_cnn_sharded_equals_single_device(mesh):
  _check('cnn', 'vmap', mesh)


@pytest.mark.slow
@pytest.mark.parametrize('name, method', [
    ('cnn', 'ghost'), ('mlp', 'vmap'), ('mlp', 'ghost'),
    ('transformer', 'vmap'), ('transformer', 'ghost')])
def test_more_models_sharded_equal_single_device(name, method, mesh):
  _check(name, method, mesh)


@pytest.mark.slow
def test_explicit_mesh():
  mesh = jax.make_mesh((4,), ('data',), axis_types=(AxisType.Explicit,))
  loss, params, (x, y) = _problem('cnn')
  mask = jnp.ones(8, bool)
  want = dpjax.clipped_grad_sum(loss, CLIP)(params, (x, y), mask)
  got = dpjax.clipping.sharded_clipped_grad_sum(loss, CLIP, mesh=mesh)(
      params, (x, y), mask)
  assert _max_diff(got.grad_sum, want.grad_sum) < TOL
  rows = NamedSharding(mesh, P('data'))
  idiomatic = jax.jit(dpjax.clipped_grad_sum(loss, CLIP))(
      params, jax.device_put((x, y), rows), jax.device_put(mask, rows))
  assert _max_diff(idiomatic.grad_sum, want.grad_sum) < TOL


def test_per_example_grads_of_a_sharded_batch_are_exact(mesh):
  loss, params, batch = _problem('cnn')
  fn = jax.jit(dpjax.per_example_grads(loss))
  got = fn(params, jax.device_put(batch, NamedSharding(mesh, P('data'))))
  assert _max_diff(got, fn(params, batch)) < 1e-6


@pytest.mark.slow
def test_per_layer_clip_and_coordinate_mask(mesh):
  loss, params, (x, y) = _problem('mlp')
  clip = {'params': {'Dense_0': 0.3, 'Dense_1': 0.2}}
  coords = jax.tree.map(lambda p: (jnp.arange(p.size) % 2).reshape(p.shape)
                        .astype(p.dtype), params)
  mask = jnp.ones(8, bool)
  want = dpjax.clipped_grad_sum(loss, clip)(params, (x, y), mask, coords)
  got = dpjax.clipping.sharded_clipped_grad_sum(loss, clip, mesh=mesh)(
      params, (x, y), mask, coords)
  assert _max_diff(got.grad_sum, want.grad_sum) < TOL
  assert _max_diff(got.norms, want.norms) < TOL


@pytest.mark.parametrize('kwargs, match', [
    (dict(axis_name='batch'), "axis_name='batch'"),
    (dict(method='exact'), "method='exact'"),
    (dict(mesh='cpu'), "mesh='cpu'"),
])
def test_bad_arguments_are_named(kwargs, match, mesh):
  kwargs = dict(dict(method='vmap', mesh=mesh), **kwargs)
  with pytest.raises(ValueError, match=match):
    dpjax.clipping.sharded_clipped_grad_sum(lambda w, x: w * x, 1.0,
                                            **kwargs)


def test_mask_is_required_and_checked(mesh):
  fn = dpjax.clipping.sharded_clipped_grad_sum(lambda w, x: jnp.sum(w * x),
                                               1.0, mesh=mesh)
  with pytest.raises(ValueError, match='Expected mask'):
    fn(jnp.ones(2), jnp.ones((5, 2)), None)
  with pytest.raises(ValueError, match=r'shape \(5,\)'):
    fn(jnp.ones(2), jnp.ones((5, 2)), jnp.ones(4, bool))


@pytest.mark.slow
def test_dpsgd_baseline_training_on_4_devices_equals_1_device():
  data = data_lib.load('digits', seed=0)
  data = dataclasses.replace(data, x_train=data.x_train[:200],
                             y_train=data.y_train[:200],
                             x_test=data.x_test[:50], y_test=data.y_test[:50])
  model = models.make_model('digits_cnn', data.num_classes,
                            input_shape=data.input_shape)
  base = dict(steps=2, expected_batch_size=30, learning_rate=0.5,
              noise_multiplier=1.0, eval_every=2)
  results = [train_lib.train_seeds(
      model, data, train_lib.TrainConfig(**base, devices=n), (0, 1),
      progress=False) for n in (1, 4)]
  for one, four in zip(*results):
    assert _max_diff(one.params, four.params) < 1e-4
    assert one.ledger.epsilon(1e-5) == four.ledger.epsilon(1e-5)
  assert _max_diff(results[0][0].params, results[0][1].params) > 1e-3


def test_devices_beyond_the_machine_are_refused_with_the_flag_to_use():
  n = jax.device_count() + 1
  with pytest.raises(ValueError, match='xla_force_host_platform_device_count'):
    train_lib.TrainConfig(steps=1, expected_batch_size=2, learning_rate=0.1,
                          devices=n)
  with pytest.raises(ValueError, match=f'devices={n}'):
    dpsgd_baseline.Config.preset('quick', devices=n)
  assert dpsgd_baseline.Config.preset('quick', devices=2).devices == 2
  assert dpsgd_baseline.Config.preset('quick').devices == 1
  assert cli._configs(['dpsgd_baseline'], 'quick',
                      dict(devices=4))['dpsgd_baseline'].devices == 4
