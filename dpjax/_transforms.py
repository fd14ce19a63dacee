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
from dpjax import _quantize
from dpjax import _rotation
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


class AddDiscreteGaussianNoiseState(NamedTuple):
  """Step counter and the base key; step t uses ``fold_in(key, t)``."""
  count: jax.Array  # int32 scalar
  key: jax.Array


def add_discrete_gaussian_noise(sigma: float, *, key: jax.Array,
                                eta: float = 1.0
                                ) -> optax.GradientTransformation:
  """Adds exact discrete Gaussian noise on the grid eta Z to every coordinate.

  Each coordinate gets eta * N_Z(0, (sigma / eta)^2), drawn exactly by
  ``dpjax.noise.discrete_gaussian`` (pmf proportional to
  exp(-x^2 / (2 sigma^2)) on eta Z). Integer-valued leaves (e.g. quantizer
  codes) need eta = 1 and receive integer noise of their dtype; floating
  leaves receive eta * k in their dtype, so values on eta Z stay on it.

  Args:
    sigma: scale in the units of the updates (0 or sigma / eta in
      [2^-10, 2^21]); a concrete number.
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``.
    eta: grid spacing (> 0), e.g. ``quantizer.spacing``.

  Returns:
    An optax transformation with ``AddDiscreteGaussianNoiseState``.

  Privacy:
    On a query with values in eta Z and L2 sensitivity Delta (same units),
    one step is rho-zCDP with rho = Delta^2 / (2 sigma^2) (Canonne, Kamath,
    Steinke 2020, Thm. 14; Ding et al. Q-DPSGD-2, Thm. 4):
    ``dpjax.accounting.discrete_gaussian_event(sigma, Delta)``. The sampler
    uses a sigma' >= sigma (``discrete_gaussian_sigma_squared``), so the
    stated rho is conservative.

  References:
    Canonne, Kamath, Steinke, NeurIPS 2020; Ding et al. (Q-DPSGD-2, Alg. 2).

  Example:
    >>> tx = add_discrete_gaussian_noise(0.75, key=jax.random.key(0), eta=0.25)
    >>> out, state = tx.update(jnp.zeros(4), tx.init(None))
    >>> bool(jnp.all(out / 0.25 == jnp.round(out / 0.25))), int(state.count)
    (True, 1)
  """
  noise_lib.discrete_gaussian_sigma_squared(sigma, eta)  # validates
  return _add_noise(AddDiscreteGaussianNoiseState,
                    noise_lib._discrete_gaussian_leaf,  # pylint: disable=protected-access
                    key, sigma=sigma, eta=eta)


class QuantizeStochasticState(NamedTuple):
  """Step counter and the base key; step t uses ``fold_in(key, t)``."""
  count: jax.Array  # int32 scalar
  key: jax.Array


def quantize_stochastic(quantizer: _quantize.GridQuantizer, *,
                        key: jax.Array) -> optax.GradientTransformation:
  """Replaces every coordinate by its unbiased stochastic quantization.

  Each leaf is clamped to ``[quantizer.low, quantizer.high]``, rounded to the
  grid with ``quantizer.quantize`` and mapped back with
  ``quantizer.dequantize`` (in the leaf's dtype), so the output is what a
  receiver reconstructs from ``quantizer.bits_per_coordinate`` bits per
  coordinate. Unbiased inside the range, variance <= spacing^2 / 4.

  Args:
    quantizer: e.g. ``low_precision_quantizer(eta, bits)`` (Q-DPSGD) or
      ``k_level_quantizer(x_max, levels)`` (cpSGD).
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``, one
      subkey per leaf.

  Returns:
    An optax transformation with ``QuantizeStochasticState``.

  References:
    Ding et al., Q-DPSGD, eq. (5); Agarwal et al., cpSGD, Sec. 3.

  Example:
    >>> from dpjax import low_precision_quantizer
    >>> tx = quantize_stochastic(low_precision_quantizer(0.25, 8),
    ...                          key=jax.random.key(0))
    >>> out, _ = tx.update(jnp.array([0.3, -1.0]), tx.init(None))
    >>> out.tolist()[1], out.tolist()[0] in (0.25, 0.5)
    (-1.0, True)
  """
  if not isinstance(quantizer, _quantize.GridQuantizer):
    raise ValueError(
        f'Expected quantizer to be a GridQuantizer, got {quantizer!r}.')
  key = _validate.key(key)

  def init_fn(params):
    del params
    return QuantizeStochasticState(count=jnp.zeros([], jnp.int32), key=key)

  def update_fn(updates, state, params=None):
    del params
    leaves, treedef = jax.tree.flatten(updates)
    keys = jax.random.split(jax.random.fold_in(state.key, state.count),
                            max(1, len(leaves)))
    out = []
    for k, g in zip(keys, leaves):
      dtype = g.dtype if jnp.issubdtype(g.dtype, jnp.floating) else jnp.float32
      out.append(quantizer.dequantize(quantizer.quantize(g, key=k), dtype))
    return jax.tree.unflatten(treedef, out), QuantizeStochasticState(
        optax.safe_increment(state.count), state.key)

  return optax.GradientTransformation(init_fn, update_fn)


class RotateHadamardState(NamedTuple):
  """Step counter and the base key; step t's signs come from
  ``fold_in(key, t)``."""
  count: jax.Array  # int32 scalar
  key: jax.Array


class UnrotateHadamardState(NamedTuple):
  """Step counter and the base key (same schedule as ``rotate_hadamard``)."""
  count: jax.Array  # int32 scalar
  key: jax.Array


def rotate_hadamard(*, key: jax.Array) -> optax.GradientTransformation:
  """Sender side: maps the update pytree to R x = H D x / sqrt(d) (1-D).

  All leaves are flattened into one vector (leaf order), zero-padded to the
  next power of two d and rotated by the randomized Hadamard transform with
  Rademacher signs D from ``fold_in(key, t)`` at step t. The output is a
  flat vector of length d (norm preserved), e.g. to be quantized coordinate
  by coordinate with a smaller range; ``unrotate_hadamard`` with the same key
  maps it back.

  Args:
    key: PRNG key shared with the receiver (required).

  Returns:
    An optax transformation with ``RotateHadamardState``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 4 (R = H D / sqrt(d)).

  Example:
    >>> tx = rotate_hadamard(key=jax.random.key(0))
    >>> y, _ = tx.update({'w': jnp.ones((2, 3))}, tx.init(None))
    >>> y.shape
    (8,)
  """
  key = _validate.key(key)

  def init_fn(params):
    del params
    return RotateHadamardState(count=jnp.zeros([], jnp.int32), key=key)

  def update_fn(updates, state, params=None):
    del params
    step_key = jax.random.fold_in(state.key, state.count)
    return _rotation.rotate_tree(updates, key=step_key), RotateHadamardState(
        optax.safe_increment(state.count), state.key)

  return optax.GradientTransformation(init_fn, update_fn)


def unrotate_hadamard(*, key: jax.Array,
                      like: Any = None) -> optax.GradientTransformation:
  """Receiver side: inverts ``rotate_hadamard`` back to the update pytree.

  Step t applies R^-1 = D H / sqrt(d) with the signs of ``fold_in(key, t)``
  (the same key and step count as the sender's ``rotate_hadamard``), drops
  the padding and unflattens.

  Args:
    key: the sender's key (required).
    like: pytree of arrays or ``jax.ShapeDtypeStruct`` giving the target
      structure; if None, ``params`` passed to ``update`` is used (as in an
      ``optax.chain`` called with params).

  Returns:
    An optax transformation with ``UnrotateHadamardState``.

  Example:
    >>> k = jax.random.key(0)
    >>> tx = optax.chain(rotate_hadamard(key=k), unrotate_hadamard(key=k))
    >>> g = {'w': jnp.arange(6.0).reshape(2, 3)}
    >>> out, _ = tx.update(g, tx.init(g), g)
    >>> bool(jnp.allclose(out['w'], g['w'], atol=1e-5))
    True
  """
  key = _validate.key(key)

  def init_fn(params):
    del params
    return UnrotateHadamardState(count=jnp.zeros([], jnp.int32), key=key)

  def update_fn(updates, state, params=None):
    target = like if like is not None else params
    if target is None:
      raise ValueError(
          'unrotate_hadamard needs the target pytree: pass like=... to the '
          'factory or params to update().')
    step_key = jax.random.fold_in(state.key, state.count)
    out = _rotation.unrotate_tree(updates, target, key=step_key)
    return out, UnrotateHadamardState(optax.safe_increment(state.count),
                                      state.key)

  return optax.GradientTransformation(init_fn, update_fn)
