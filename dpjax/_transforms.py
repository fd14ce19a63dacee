"""DP-SGD building blocks as optax ``GradientTransformation`` factories.

A DP-SGD step is ``clip_per_example -> add_gaussian_noise -> normalize ->
optimizer`` (Abadi et al. 2016, Alg. 1). The clip transform is an aggregator:
it takes per-example gradients (leading batch axis) and must come first.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax import _clipping
from dpjax import _validate
from dpjax import noise as noise_lib


class ClipPerExampleState(NamedTuple):
  """Counts the examples dropped so far for a non-finite gradient norm.

  Data-dependent and not private: a diagnostic for the researcher.
  """
  num_dropped: jax.Array  # int32 scalar


def clip_per_example(l2_norm_clip: Any) -> optax.GradientTransformationExtraArgs:
  """Clips per-example gradients and sums them (an aggregator: chain it first).

  ``update(per_example_grads, state, params=None, *, mask=None)``: the updates
  carry a leading batch axis B; ``mask`` (bool [B]) marks real rows, padded
  rows contribute exactly zero. Rows whose gradient is not finite are dropped
  (contribute zero) and counted in the state.

  Args:
    l2_norm_clip: scalar C, or a pytree prefix of per-layer bounds.

  Returns:
    An optax transformation whose output is the clipped sum (no batch axis).

  Privacy:
    The output has L2 sensitivity ``clipped_norm_bound(l2_norm_clip)`` under
    add/remove-one and twice that under replace-one.

  References:
    Abadi et al. 2016, Alg. 1 (clip gradient).

  Example:
    >>> tx = clip_per_example(1.0)
    >>> g = {'w': jnp.array([[3., 4.], [0.3, 0.4]])}
    >>> out, _ = tx.update(g, tx.init(None))
    >>> out['w']
    Array([0.90000004, 1.2       ], dtype=float32)
  """
  _clipping.validate_l2_norm_clip(l2_norm_clip)

  def init_fn(params):
    del params
    return ClipPerExampleState(num_dropped=jnp.zeros([], jnp.int32))

  def update_fn(updates, state, params=None, *, mask=None, **extra_args):
    del params, extra_args
    grad_sum, norms = _clipping.clip_and_sum(updates, l2_norm_clip, mask)
    dropped = _clipping.count_nonfinite(norms, mask)
    return grad_sum, ClipPerExampleState(state.num_dropped + dropped)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


class AddGaussianNoiseState(NamedTuple):
  """Step counter and the base key; step t uses ``fold_in(key, t)``."""
  count: jax.Array  # int32 scalar
  key: jax.Array


class AddLaplaceNoiseState(NamedTuple):
  """Step counter and the base key; step t uses ``fold_in(key, t)``."""
  count: jax.Array  # int32 scalar
  key: jax.Array


def _add_noise(state_cls, sampler: Callable[..., jax.Array], key: jax.Array,
               **params: Any) -> optax.GradientTransformation:
  key = _validate.key(key)

  def init_fn(params_tree):
    del params_tree
    return state_cls(count=jnp.zeros([], jnp.int32), key=key)

  def update_fn(updates, state, params_tree=None):
    del params_tree
    step_key = jax.random.fold_in(state.key, state.count)
    noise = noise_lib.tree_noise(sampler, step_key, updates, **params)
    updates = jax.tree.map(jnp.add, updates, noise)
    return updates, state_cls(optax.safe_increment(state.count), state.key)

  return optax.GradientTransformation(init_fn, update_fn)


def add_gaussian_noise(stddev: float, *,
                       key: jax.Array) -> optax.GradientTransformation:
  """Adds i.i.d. N(0, stddev^2) noise to every coordinate of the update.

  Args:
    stddev: noise standard deviation (>= 0). For DP-SGD on a clipped sum use
      ``noise_multiplier * clipped_norm_bound(l2_norm_clip)``.
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``.

  Returns:
    An optax transformation with ``AddGaussianNoiseState``.

  Privacy:
    On a query with L2 sensitivity S, one step is the Gaussian mechanism with
    noise multiplier stddev / S (``dp_accounting.GaussianDpEvent``).

  Example:
    >>> tx = add_gaussian_noise(1.0, key=jax.random.key(0))
    >>> out, state = tx.update(jnp.zeros(3), tx.init(None))
    >>> out.shape, int(state.count)
    ((3,), 1)
  """
  _validate.non_negative(stddev=stddev)
  return _add_noise(AddGaussianNoiseState, noise_lib.gaussian, key,
                    stddev=stddev)


def add_laplace_noise(scale: float, *,
                      key: jax.Array) -> optax.GradientTransformation:
  """Adds i.i.d. Laplace(0, scale) noise to every coordinate of the update.

  Args:
    scale: Laplace scale b (>= 0).
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``.

  Returns:
    An optax transformation with ``AddLaplaceNoiseState``.

  Privacy:
    On a query with L1 sensitivity S, one step is (S / scale)-DP
    (``dp_accounting.LaplaceDpEvent(noise_multiplier=scale / S)``).

  Example:
    >>> tx = add_laplace_noise(1.0, key=jax.random.key(0))
    >>> tx.update(jnp.zeros(2), tx.init(None))[0].shape
    (2,)
  """
  _validate.non_negative(scale=scale)
  return _add_noise(AddLaplaceNoiseState, noise_lib.laplace, key, scale=scale)


def normalize(expected_batch_size: float) -> optax.GradientTransformation:
  """Divides the update by the expected batch size (never the padded size).

  Under Poisson sampling the batch size is random; dividing by its
  expectation keeps the step a fixed linear map of the noisy sum.

  Example:
    >>> normalize(4).update(jnp.ones(2), optax.EmptyState())[0]
    Array([0.25, 0.25], dtype=float32)
  """
  _validate.positive(expected_batch_size=expected_batch_size)

  def update_fn(updates, state, params=None):
    del params
    return jax.tree.map(
        lambda g: g / jnp.asarray(expected_batch_size, g.dtype), updates), state

  return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)


def dpsgd(learning_rate: optax.ScalarOrSchedule, l2_norm_clip: Any,
          noise_multiplier: float, expected_batch_size: float, *,
          key: jax.Array, momentum: float = 0.0,
          nesterov: bool = False) -> optax.GradientTransformationExtraArgs:
  """DP-SGD: clip per example, add Gaussian noise, normalize, (momentum) SGD.

  Args:
    learning_rate: step size or schedule.
    l2_norm_clip: scalar C or per-layer bounds (see ``clip_per_example``).
    noise_multiplier: sigma; the noise stddev is sigma times
      ``clipped_norm_bound(l2_norm_clip)``.
    expected_batch_size: q * N under Poisson sampling.
    key: PRNG key for the noise (required).
    momentum: heavy-ball momentum (0 disables it).
    nesterov: Nesterov momentum.

  Returns:
    An optax transformation taking per-example gradients (and ``mask=``).

  Privacy:
    Each step is a Gaussian mechanism with noise multiplier
    ``noise_multiplier`` on a sum of L2 sensitivity
    ``clipped_norm_bound(l2_norm_clip)`` (add/remove-one). Account it with
    the sampler's ``dp_event(noise_multiplier)`` or
    ``dpjax.accounting.dpsgd_event``.

  References:
    Abadi et al. 2016, Alg. 1.

  Example:
    >>> tx = dpsgd(0.1, 1.0, 1.1, 32, key=jax.random.key(0))
    >>> grads = jnp.ones((4, 3))  # four examples
    >>> out, _ = tx.update(grads, tx.init(jnp.zeros(3)), jnp.zeros(3))
    >>> out.shape
    (3,)
  """
  _clipping.validate_l2_norm_clip(l2_norm_clip)
  _validate.non_negative(noise_multiplier=noise_multiplier, momentum=momentum)
  _validate.positive(expected_batch_size=expected_batch_size)
  stddev = noise_multiplier * _clipping.clipped_norm_bound(l2_norm_clip)
  return optax.chain(
      clip_per_example(l2_norm_clip),
      add_gaussian_noise(stddev, key=key),
      normalize(expected_batch_size),
      optax.sgd(learning_rate, momentum=momentum or None, nesterov=nesterov),
  )
