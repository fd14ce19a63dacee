"""Reconstruction attacks (Zhu & Blaschko Thm 5.1; Geiping et al. 2020)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import audit as attacks
from dpjax import compression as _sparsify


@pytest.mark.parametrize('rate', [0.0, 0.5, 0.8])
def test_least_squares_error_meets_the_theorem_5_1_bound(rate):
  d, sigma, x, trials = 50, 0.3, 1.7, 20000
  k = jax.random.normal(jax.random.key(0), (d,))
  keys = jax.random.split(jax.random.key(1), trials)

  def trial(key):
    mkey, nkey = jax.random.split(key)
    m = _sparsify.random_mask(mkey, k, int(rate * d))
    released = m * (k * x + sigma * jax.random.normal(nkey, (d,)))
    return attacks.least_squares_reconstruction(released, m, k)

  err = np.asarray(jax.vmap(trial)(keys)) - x
  mse, sem = np.mean(err**2), np.std(err**2) / np.sqrt(trials)
  bound = float(attacks.reconstruction_error_bound(sigma, rate, k))
  assert mse >= bound - 4 * sem
  # Jensen's gap is small for d = 50: the bound is nearly tight.
  assert mse <= 1.25 * bound


def test_least_squares_is_exact_without_noise():
  k = jnp.array([0.5, -2.0, 1.0, 3.0])
  m = jnp.array([1.0, 0.0, 1.0, 0.0])
  assert float(attacks.least_squares_reconstruction(m * k * -4.0, m, k)) == -4.0


def _mlp_setup():
  w1 = jax.random.normal(jax.random.key(0), (16, 32)) / 4
  w2 = jax.random.normal(jax.random.key(1), (32, 3)) / 6
  params = {'w1': w1, 'w2': w2}
  x = jax.random.uniform(jax.random.key(2), (16,))

  def loss(p, xx):
    logits = jax.nn.sigmoid(xx @ p['w1']) @ p['w2']
    return -jax.nn.log_softmax(logits)[1]

  return params, x, loss


def test_gradient_inversion_recovers_the_input_and_sparsity_hurts_it():
  params, x, loss = _mlp_setup()
  grad = jax.grad(loss)(params, x)
  d = sum(g.size for g in jax.tree.leaves(grad))
  invert = jax.jit(lambda obs, vis: attacks.invert_gradients(
      loss, params, obs, x, key=jax.random.key(3), steps=800,
      learning_rate=0.05, visible=vis))
  errors = {}
  for rate in (0.0, 0.99):
    m = _sparsify.random_mask(jax.random.key(4), grad, int(rate * d))
    noise = jax.tree.map(
        lambda g, k: 0.01 * jax.random.normal(k, g.shape), grad,
        {'w1': jax.random.key(5), 'w2': jax.random.key(6)})
    observed = jax.tree.map(lambda g, n, mm: mm * (g + n), grad, noise, m)
    errors[rate] = float(jnp.mean((invert(observed, m) - x) ** 2))
  assert errors[0.0] < 0.01  # a dense, mildly noisy gradient leaks x
  assert errors[0.99] > 10 * errors[0.0]
