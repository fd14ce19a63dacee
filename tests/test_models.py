"""Tests for experiments.common.models."""

import doctest

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.common import models

# name: (example shape, num_outputs, expected number of params)
CASES = {
    'mnist_cnn': ((28, 28, 1), 10, 26_010),
    'cifar_cnn': ((32, 32, 3), 10, 550_570),
    'digits_cnn': ((8, 8, 1), 10, 6_090),
    'mlp': ((8, 8, 1), 10, 64 * 64 + 64 + 64 * 10 + 10),
    'linear': ((10,), 1, 11),
    'logistic': ((100,), 2, 202),
}


def _param_shapes(model, x):
  return jax.eval_shape(model.init, jax.random.key(0), x)


def _random_params(model, x, seed=0):
  """Parameters of the right structure without compiling the initializers.

  (Compiling flax's random initializers costs seconds per model on CPU.)
  """
  rng = np.random.default_rng(seed)
  return jax.tree.map(
      lambda s: jnp.asarray(rng.normal(0.0, 0.1, s.shape), jnp.float32),
      _param_shapes(model, x))


def _init(name, **kwargs):
  shape, num_outputs, _ = CASES[name]
  model = models.make_model(name, num_outputs, input_shape=shape, **kwargs)
  return model, _random_params(model, jnp.zeros(shape))


def test_models_lists_every_name():
  assert set(models.MODELS) == set(CASES)


@pytest.mark.parametrize('name', sorted(CASES))
def test_param_counts(name):
  shape, num_outputs, expected = CASES[name]
  model = models.make_model(name, num_outputs, input_shape=shape)
  assert models.num_params(_param_shapes(model, jnp.zeros(shape))) == expected


def test_paper_cnn_param_counts_direct():
  x = jnp.zeros((28, 28, 1))
  assert models.num_params(_param_shapes(models.MnistCNN(), x)) == 26_010
  x = jnp.zeros((2, 32, 32, 3))  # Batched init gives the same parameters.
  assert models.num_params(_param_shapes(models.CifarCNN(), x)) == 550_570
  # num_params also counts concrete arrays.
  assert models.num_params({'a': jnp.zeros((2, 3)), 'b': jnp.zeros(())}) == 7


@pytest.mark.parametrize('name', sorted(CASES))
def test_single_batched_and_vmapped_calls_agree(name):
  shape, num_outputs, _ = CASES[name]
  model, params = _init(name)
  x = jax.random.uniform(jax.random.key(1), (3,) + shape)

  @jax.jit  # One compilation for all the calls.
  def calls(params, x):
    return (model.apply(params, x),
            jax.vmap(model.apply, in_axes=(None, 0))(params, x),
            model.apply(params, x[1]),
            model.apply(params, x.reshape((3, 1) + shape)))

  batched, vmapped, single, nested = calls(params, x)
  chex.assert_shape(batched, (3, num_outputs))
  chex.assert_shape(single, (num_outputs,))
  chex.assert_trees_all_close(batched, vmapped, atol=1e-5)
  chex.assert_trees_all_close(single, batched[1], atol=1e-5)
  # Any number of leading batch axes.
  chex.assert_trees_all_close(nested, batched[:, None], atol=1e-5)
  assert batched.dtype == jnp.float32


@pytest.mark.parametrize('features,kernel,stride,padding,shape', [
    (16, (8, 8), 2, 2, (28, 28, 1)),   # the DP-CNN's first layer
    (32, (4, 4), 2, 0, (12, 12, 16)),  # and its second
    (4, (3, 2), 1, 1, (7, 6, 3))])
def test_patch_conv_is_flax_conv(features, kernel, stride, padding, shape):
  """Same parameters (names, shapes, initial values), outputs and
  per-example gradients as ``nn.Conv``."""
  patch = models.PatchConv(features, kernel, stride, padding)
  conv = nn.Conv(features, kernel, strides=stride, padding=padding)
  x = jax.random.uniform(jax.random.key(1), (3,) + shape)

  @jax.jit
  def both(key, x):
    init = patch.init(key, x), conv.init(key, x)
    grads = [jax.vmap(jax.grad(lambda p, xi, m=m: jnp.sum(
        jnp.sin(m.apply(p, xi[None])))), (None, 0))(init[0], x)
             for m in (patch, conv)]
    return init, patch.apply(init[0], x), conv.apply(init[0], x), grads

  (p_init, c_init), p_out, c_out, (p_grads, c_grads) = both(
      jax.random.key(0), x)
  chex.assert_trees_all_equal(p_init, c_init)
  chex.assert_trees_all_close(p_out, c_out, atol=1e-5)
  chex.assert_trees_all_close(p_grads, c_grads, atol=1e-4)


def test_max_pool_stride1_is_flax_max_pool():
  """The same outputs as ``nn.max_pool`` and, away from ties, the same
  gradients; at a tie (a constant image) the gradient is split among the
  tied inputs, a subgradient of the same function."""
  x = jax.random.uniform(jax.random.key(0), (2, 6, 5, 3))
  flax_pool = lambda h: nn.max_pool(h, (2, 2), strides=(1, 1))
  cot = jax.random.normal(jax.random.key(1), (2, 5, 4, 3))

  @jax.jit
  def both(x):
    return [(f(x), jax.vjp(f, x)[1](cot)[0], jax.grad(
        lambda h: jnp.sum(f(h)))(jnp.ones((1, 3, 3, 1))))
            for f in (models.max_pool_stride1, flax_pool)]

  (ours, our_grad, our_tie), (theirs, their_grad, their_tie) = both(x)
  chex.assert_trees_all_equal(ours, theirs)
  chex.assert_trees_all_close(our_grad, their_grad, atol=1e-6)
  # 4 windows, each of 4 tied inputs: each window's gradient 1 goes to its
  # inputs (all of it to the first one with nn.max_pool), 4 in all.
  assert float(our_tie.sum()) == float(their_tie.sum()) == 4.0
  assert float(our_tie.min()) > 0 and float(their_tie.min()) == 0


def test_real_init_and_single_example_grad_under_jit():
  model = models.make_model('mlp', 10, input_shape=(8, 8, 1), hidden=(16,))
  x = jnp.ones((8, 8, 1))
  params = jax.jit(model.init)(jax.random.key(0), x)
  assert models.num_params(params) == 64 * 16 + 16 + 16 * 10 + 10

  @jax.jit
  def loss(p):
    return jnp.sum(model.apply(p, x) ** 2)

  grads = jax.grad(loss)(params)
  chex.assert_trees_all_equal_shapes(grads, params)


def test_tempered_sigmoid_defaults_equal_tanh():
  x = jnp.linspace(-6.0, 6.0, 101)
  chex.assert_trees_all_close(models.tempered_sigmoid(x), jnp.tanh(x),
                              atol=1e-6)
  act = models.get_activation('tempered_sigmoid', 3.0, 1.5, 0.5)
  chex.assert_trees_all_close(act(x), 3.0 * jax.nn.sigmoid(1.5 * x) - 0.5,
                              atol=1e-6)


def test_tempered_sigmoid_model_equals_tanh_model():
  x = jax.random.normal(jax.random.key(2), (4, 8, 8, 1))
  tanh_model = models.DigitsCNN(activation='tanh')
  ts_model = models.DigitsCNN(activation='tempered_sigmoid')
  params = _random_params(tanh_model, x[0])
  both = jax.jit(lambda p, x: (ts_model.apply(p, x), tanh_model.apply(p, x)))
  chex.assert_trees_all_close(*both(params, x), atol=1e-5)


@pytest.mark.parametrize('activation', models.ACTIVATIONS)
def test_mlp_activations(activation):
  model = models.MLP(hidden=(8, 8), num_outputs=3, activation=activation,
                     scale=1.0, inverse_temperature=1.0, offset=0.0)
  x = jax.random.normal(jax.random.key(3), (5, 4))
  params = _random_params(model, x[0])
  out = jax.jit(model.apply)(params, x)
  chex.assert_shape(out, (5, 3))
  chex.assert_tree_all_finite(out)
  # Each activation computes its own function on the first hidden layer.
  dense = params['params']['Dense_0']
  pre = x @ dense['kernel'] + dense['bias']
  expected = {'sigmoid': jax.nn.sigmoid(pre), 'tanh': jnp.tanh(pre),
              'relu': jax.nn.relu(pre),
              'tempered_sigmoid': jax.nn.sigmoid(pre)}[activation]
  act = models.get_activation(activation, 1.0, 1.0, 0.0)
  chex.assert_trees_all_close(act(pre), expected, atol=1e-6)


def test_mlp_without_hidden_layers_is_linear():
  model = models.MLP(hidden=(), num_outputs=2)
  assert models.num_params(_param_shapes(model, jnp.zeros(3))) == 8


def test_flat_models_flatten_images_with_example_ndim():
  model = models.LogisticRegression(num_outputs=10, example_ndim=3)
  x = jnp.ones((5, 8, 8, 1))
  params = _random_params(model, x[0])
  assert models.num_params(params) == 64 * 10 + 10
  chex.assert_shape(model.apply(params, x), (5, 10))


def test_linear_regression_default_single_output():
  model = models.LinearRegression()
  params = _random_params(model, jnp.zeros(4))
  chex.assert_shape(model.apply(params, jnp.ones((7, 4))), (7, 1))


def test_unknown_names_raise():
  with pytest.raises(ValueError, match='Unknown model .*mlp.*logistic'):
    models.make_model('resnet', 10)
  with pytest.raises(ValueError, match='Unknown activation .*tanh'):
    models.make_model('mlp', 10, activation='gelu')
  with pytest.raises(ValueError, match='Unknown activation'):
    _param_shapes(models.MLP(hidden=(4,), num_outputs=2, activation='elu'),
                  jnp.zeros(3))
  with pytest.raises(ValueError, match='expects image examples'):
    models.make_model('mnist_cnn', 10, input_shape=(784,))
  with pytest.raises(ValueError, match='3 axes'):
    _param_shapes(models.MnistCNN(), jnp.zeros((28, 28)))


def test_default_model_name():
  assert models.default_model_name('mnist') == 'mnist_cnn'
  assert models.default_model_name('mnist5k') == 'mnist_cnn'  # real digits
  assert models.default_model_name('digits') == 'digits_cnn'
  assert models.default_model_name('iris') == 'mlp'
  assert all(models.default_model_name(n) in models.MODELS
             for n in ('cifar10', 'diabetes', 'sphere_logistic', 'wine'))


def test_docstring_examples():
  result = doctest.testmod(models, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0
