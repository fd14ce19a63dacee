"""Ready-made DP chains: DP-SGD (Abadi et al. 2016) and RS-DPSGD (Zhu & Blaschko)."""

from typing import Any

import jax
import jax.numpy as jnp
import optax

from dpjax import _validate
from dpjax.clipping import _per_example as _clipping
from dpjax.transforms import _adding_noise
from dpjax.transforms import _clipping as _clip_tx
from dpjax.transforms import _normalizing
from dpjax.transforms import _sparsifying


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
      _clip_tx.clip_per_example(l2_norm_clip),
      _adding_noise.add_gaussian_noise(stddev, key=key),
      _normalizing.normalize(expected_batch_size),
      optax.sgd(learning_rate, momentum=momentum or None, nesterov=nesterov),
  )


def rs_dpsgd(learning_rate: optax.ScalarOrSchedule, l2_norm_clip: Any,
             noise_multiplier: float, expected_batch_size: float,
             final_rate: float, epochs: int, steps_per_epoch: int, *,
             key: jax.Array, momentum: float = 0.0, refresh_per_epoch: int = 1,
             clip: bool = True) -> optax.GradientTransformationExtraArgs:
  """DP-SGD with random sparsification (Alg. 1) and its ablations.

  ``chain(sparsify_random, clip_per_example, add_gaussian_noise,
  sparsify_random, normalize, sgd)``; both sparsifiers share one mask key, so
  masked coordinates get neither gradient nor noise. ``noise_multiplier=0``
  is clipped SGD with RS (Alg. 3); ``clip=False`` sums unclipped gradients and
  is noisy SGD with RS (Alg. 2, noise stddev still sigma * C; NOT private).
  ``final_rate=0`` is plain DP-SGD on the same keys.

  Args:
    learning_rate: step size or schedule.
    l2_norm_clip: C (scalar or per-layer bounds).
    noise_multiplier: sigma; noise stddev sigma * C.
    expected_batch_size: q N.
    final_rate, epochs, steps_per_epoch, refresh_per_epoch: see
      ``sparsify_random``.
    key: PRNG key; ``fold_in(key, 0)`` draws masks, ``fold_in(key, 1)`` noise.
    momentum: heavy-ball momentum (the paper uses 0.9).
    clip: False for the noisy-SGD ablation.

  Returns:
    An optax transformation taking per-example gradients (and ``mask=``).

  Privacy:
    With ``clip=True``, exactly the DP-SGD step of ``dpsgd`` with the same
    sigma, C and sampler (the mask is data-independent): record the
    sampler's ``dp_event(noise_multiplier)`` per step.

  References:
    Zhu & Blaschko, Alg. 1-3.
  """
  key = _validate.key(key)
  _validate.non_negative(noise_multiplier=noise_multiplier, momentum=momentum)
  _validate.positive(expected_batch_size=expected_batch_size)
  _clipping.validate_l2_norm_clip(l2_norm_clip)
  mask_key, noise_key = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
  sparsify = lambda per_example: _sparsifying.sparsify_random(
      final_rate, epochs, steps_per_epoch, key=mask_key,
      refresh_per_epoch=refresh_per_epoch, per_example=per_example)
  stddev = noise_multiplier * _clipping.clipped_norm_bound(l2_norm_clip)
  return optax.chain(
      sparsify(True),
      _clip_tx.clip_per_example(l2_norm_clip if clip else jnp.inf),
      _adding_noise.add_gaussian_noise(stddev, key=noise_key),
      sparsify(False),
      _normalizing.normalize(expected_batch_size),
      optax.sgd(learning_rate, momentum=momentum or None),
  )
