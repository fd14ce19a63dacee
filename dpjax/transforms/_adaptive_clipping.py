"""Adaptive (quantile) clipping: the clip bound follows a target quantile.

Andrew et al. 2021, "Differentially private learning with adaptive
clipping", Alg. 1: at step t every example is clipped to the current bound
C_t, and the fraction of examples left unclipped is released privately,

    b~_t = (sum_i (b_i - 1/2) + N(0, count_stddev^2)) / m + 1/2,
    b_i = 1[||g_i|| <= C_t],

with m the expected batch size (public; the paper's number of sampled
clients). The bound then moves geometrically towards the target quantile
gamma: C_{t+1} = C_t exp(-eta (b~_t - gamma)). Each record moves the
centred count sum_i (b_i - 1/2) by at most 1/2, so the step releases a
Gaussian vector with two blocks: the clipped sum (sensitivity C_t, noise
sigma_grad C_t) and the count (sensitivity 1/2, noise count_stddev). As one
Gaussian mechanism its noise multiplier is (Theorem 1 of the paper)

    z = (sigma_grad^-2 + (2 count_stddev)^-2)^(-1/2),

and ``adaptive_clip_noise_multiplier`` inverts it: for a target z, the
gradient noise is sigma_grad = (z^-2 - (2 count_stddev)^-2)^(-1/2).

The bound lives in the state (``AdaptiveClipState.l2_norm_clip``); the
clipped sum carries it (a traced ``ClippedSum`` bound), so
``add_dpsgd_noise(sigma_grad)`` scales its noise to it (under any
strategy), and ``dpjax.accounting.step_event`` reads sigma_grad and
count_stddev from the states and records the step at z. The count noise is float32 Gaussian, with the same
low-order-bit caveat as the float gradient noise (see ``dpjax.dpsgd``).

The bound never falls below a floor ``min_l2_norm_clip`` (default 1e-6 C_0,
``_MIN_CLIP_RATIO``). Without one, a long run of steps whose examples are all
left unclipped (e.g. all-zero gradients) shrinks it by exp(-eta (1 - gamma))
a step until it is exactly 0 in float32 (about 900 steps at eta 0.2, gamma
0.5), and 0 exp(.) is 0 for ever: every later gradient would be clipped to
nothing. From the floor the bound grows by up to exp(eta gamma) a step once
gradients return (back to C_0 in ln(1e6) / (eta gamma), about 140 steps at
the paper's values). The floor is a public constant applied to the update
computed from the released count (post-processing), so it costs no
privacy.
"""

import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _keys
from dpjax import _validate
from dpjax import clipping
from dpjax import noise as noise_lib
from dpjax.transforms import _alias
from dpjax.transforms import _dpsgd_noise
from dpjax.transforms import _normalizing
from dpjax.transforms._state import AdaptiveClipState
from dpjax.transforms._state import KeyStepState

_STREAM = _keys.register('adaptive_clip_count', __name__)

# The default floor of the bound, as a fraction of C_0 (module doc).
_MIN_CLIP_RATIO = 1e-6
# The least bound: it is float32, and below this (subnormal) XLA may flush it
# to 0.
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def _check_scalar_bound(name: str, value: Any) -> None:
  """A real scalar: a Python or NumPy number, or a 0-d (traced) array."""
  if isinstance(value, (bool, np.bool_)):
    real = False
  elif isinstance(value, numbers.Real):
    real = True
  else:
    real = isinstance(value, (np.ndarray, np.generic, jax.Array)) and (
        jnp.ndim(value) == 0) and (
            jnp.issubdtype(value.dtype, jnp.floating)
            or jnp.issubdtype(value.dtype, jnp.integer))
  if not real:
    raise ValueError(
        f'Expected {name}={value!r} to be one real scalar (a Python or NumPy '
        'number or a 0-d array): adaptive clipping adapts one flat bound; '
        'per-layer bounds (a dict, list or array of them) are not supported.')
  _validate.positive(**{name: value})
  _validate.finite(**{name: value})
  if _validate.concrete(value) and float(value) < _FLOAT32_TINY:
    raise ValueError(f'Expected {name}={value} >= {_FLOAT32_TINY:.3g}: the '
                     'bound is float32, and would round to 0.')


def _check(initial_l2_norm_clip, target_quantile, learning_rate,
           count_stddev, expected_batch_size, min_l2_norm_clip):
  _check_scalar_bound('initial_l2_norm_clip', initial_l2_norm_clip)
  if min_l2_norm_clip is not None:
    _check_scalar_bound('min_l2_norm_clip', min_l2_norm_clip)
    if _validate.concrete(min_l2_norm_clip) and _validate.concrete(
        initial_l2_norm_clip) and not (
            float(min_l2_norm_clip) <= float(initial_l2_norm_clip)):
      raise ValueError(
          f'Expected min_l2_norm_clip={min_l2_norm_clip} <= '
          f'initial_l2_norm_clip={initial_l2_norm_clip} (the floor of the '
          'bound).')
  _validate.open_unit(target_quantile=target_quantile)
  _validate.non_negative(learning_rate=learning_rate)
  _validate.finite(learning_rate=learning_rate)
  _validate.non_negative(count_stddev=count_stddev)
  _validate.finite(count_stddev=count_stddev)
  _validate.positive(expected_batch_size=expected_batch_size)


def adaptive_clip_per_example(initial_l2_norm_clip: float, *,
                              target_quantile: float, learning_rate: float,
                              count_stddev: float, expected_batch_size: float,
                              key: jax.Array,
                              min_l2_norm_clip: float | None = None
                              ) -> optax.GradientTransformationExtraArgs:
  """Clips per-example gradients to a bound that tracks a quantile.

  An aggregator like ``clip_per_example``: ``update(per_example_grads,
  state, params, *, mask)`` returns the clipped sum as a ``ClippedSum``
  whose bound is this step's C_t (traced), and moves the bound for the next
  step (Andrew et al. 2021, Alg. 1; module doc).

  Args:
    initial_l2_norm_clip: C_0 > 0 (one scalar).
    target_quantile: gamma in (0, 1): the fraction of examples the bound
      should leave unclipped.
    learning_rate: eta >= 0 of the geometric update (the paper uses 0.2).
    count_stddev: stddev of the noise on the centred count (the paper uses
      m / 20). 0 releases the count exactly: the step is then not private
      (its event has noise multiplier 0).
    expected_batch_size: m, the public denominator of the fraction (q N
      under Poisson sampling; the actual batch size is private).
    key: PRNG key of the count noise; its stream (``adaptive_clip_count``)
      is separated from the gradient noise's even for the same key.
    min_l2_norm_clip: the floor of the bound, in (0, C_0]; default 1e-6 C_0
      (and never below the smallest normal float32, 1.2e-38). It keeps the
      bound positive, so that it recovers when gradients return after a
      long run of tiny (e.g. zero) ones (module doc); the bound cannot
      track a quantile below it.

  Returns:
    An optax transformation with ``AdaptiveClipState``.

  Raises:
    ValueError: naming an ``initial_l2_norm_clip`` or ``min_l2_norm_clip``
      that is not one positive finite real scalar (e.g. a dict of per-layer
      bounds), a floor above C_0, a ``target_quantile`` outside (0, 1), a
      negative ``learning_rate`` or ``count_stddev``, or a non-positive
      ``expected_batch_size``.

  Privacy:
    Each step releases the clipped sum and the noisy count; with gradient
    noise sigma_grad (``add_dpsgd_noise(sigma_grad)``, any strategy) it is
    one Gaussian mechanism of noise multiplier
    ``adaptive_effective_noise_multiplier(sigma_grad, count_stddev)``, which
    ``dpjax.accounting.step_event`` reads.

  Example:
    >>> tx = adaptive_clip_per_example(1.0, target_quantile=0.5,
    ...     learning_rate=0.2, count_stddev=0.0, expected_batch_size=2,
    ...     key=jax.random.key(0))
    >>> g = {'w': jnp.array([[3., 4.], [0.3, 0.4]])}  # norms 5 and 0.5
    >>> out, s = tx.update(g, tx.init(None), {'w': jnp.zeros(2)},
    ...                    mask=jnp.ones(2, bool))
    >>> float(out.l2_norm_clip), round(float(s.unclipped_fraction), 3)
    (1.0, 0.5)
  """
  _check(initial_l2_norm_clip, target_quantile, learning_rate, count_stddev,
         expected_batch_size, min_l2_norm_clip)
  if min_l2_norm_clip is None:
    min_l2_norm_clip = _MIN_CLIP_RATIO * initial_l2_norm_clip
  stream0 = KeyStepState.create(key, stream=_STREAM, public=(count_stddev,))

  def init_fn(params):
    del params
    return AdaptiveClipState(
        stream0, jnp.asarray(initial_l2_norm_clip, jnp.float32),
        jnp.asarray(count_stddev, jnp.float32),
        jnp.asarray(jnp.nan, jnp.float32), jnp.zeros([], jnp.int32))

  def update_fn(updates, state, params=None, *, mask=None, **extra_args):
    del extra_args
    if params is None:
      raise ValueError('adaptive_clip_per_example needs params in update() '
                       'to check that every gradient has its batch axis.')
    _validate.per_example_grads(updates, params)
    clip = state.l2_norm_clip
    grad_sum, norms = clipping.clip_and_sum(updates, clip, mask)
    keep = jnp.asarray(mask, bool)
    # b_i - 1/2 is +1/2 for an unclipped real row, -1/2 for a clipped (or
    # dropped) one, 0 for padding: one record moves the sum by <= 1/2.
    centred = jnp.where(keep, jnp.where(norms <= clip, 0.5, -0.5), 0.0)
    noisy = jnp.sum(centred) + noise_lib.gaussian(
        _keys.fold_public(state.stream.step_key(), clip), (),
        stddev=count_stddev)
    fraction = noisy / expected_batch_size + 0.5
    floor = jnp.maximum(jnp.asarray(min_l2_norm_clip, jnp.float32),
                        _FLOAT32_TINY)
    new_clip = jnp.maximum(
        clip * jnp.exp(-learning_rate * (fraction - target_quantile)), floor)
    dropped = clipping.count_nonfinite(norms, mask)
    return grad_sum, AdaptiveClipState(
        state.stream.advance(), new_clip.astype(jnp.float32),
        jnp.asarray(count_stddev, jnp.float32), fraction.astype(jnp.float32),
        state.num_dropped + dropped)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def adaptive_effective_noise_multiplier(grad_noise_multiplier: Any,
                                        count_stddev: Any) -> float:
  """z = (sigma_grad^-2 + (2 count_stddev)^-2)^(-1/2) (Andrew et al. Thm 1).

  The noise multiplier of the one Gaussian mechanism that releases both the
  clipped sum and the centred count; 0 when either block is noiseless.

  Example:
    >>> round(adaptive_effective_noise_multiplier(1.0, 0.5), 4)
    0.7071
  """
  sigma, count = float(grad_noise_multiplier), float(count_stddev)
  _validate.non_negative(grad_noise_multiplier=sigma)
  _validate.non_negative(count_stddev=count)
  _validate.finite(grad_noise_multiplier=sigma)
  _validate.finite(count_stddev=count)
  return _dpsgd_noise.effective_noise_multiplier(sigma, count)


def adaptive_clip_noise_multiplier(noise_multiplier: float,
                                   count_stddev: float) -> float:
  """The gradient noise sigma_grad that keeps the step at ``noise_multiplier``.

  sigma_grad = (z^-2 - (2 count_stddev)^-2)^(-1/2) (Andrew et al., Sec. 3).

  Raises:
    ValueError: if 2 count_stddev <= z (the count alone would spend the
      whole budget), naming ``count_stddev``.

  Example:
    >>> round(adaptive_clip_noise_multiplier(1.0, 2.5), 4)
    1.0206
  """
  _validate.positive(noise_multiplier=noise_multiplier)
  _validate.finite(noise_multiplier=noise_multiplier)
  _validate.non_negative(count_stddev=count_stddev)
  if not 2 * count_stddev > noise_multiplier:
    raise ValueError(
        f'Expected count_stddev={count_stddev} above noise_multiplier / 2 = '
        f'{noise_multiplier / 2}: the count would spend the whole budget.')
  return float((noise_multiplier**-2 - (2 * count_stddev)**-2)**-0.5)


def adaptive_dpsgd(learning_rate: optax.ScalarOrSchedule,
                   initial_l2_norm_clip: float, noise_multiplier: float,
                   sampler: Any, *, target_quantile: float = 0.5,
                   clip_learning_rate: float = 0.2,
                   count_stddev: float | None = None, key: jax.Array,
                   momentum: float | None = None
                   ) -> optax.GradientTransformationExtraArgs:
  """DP-SGD with adaptive clipping at total noise multiplier ``noise_multiplier``.

  ``chain(adaptive_clip_per_example, add_dpsgd_noise(sigma_grad),
  normalize, sgd)`` with sigma_grad from ``adaptive_clip_noise_multiplier``:
  each step is one Gaussian mechanism of ``noise_multiplier`` (Andrew et al.
  2021, Thm 1), which ``dpjax.accounting.step_event(state, sampler)`` reads.

  Args:
    learning_rate: SGD step size or schedule.
    initial_l2_norm_clip: C_0.
    noise_multiplier: z, the step's total noise multiplier.
    sampler: the sampler the batches come from (e.g.
      ``dpjax.sampling.PoissonSampler(N, q)``); its ``expected_batch_size``
      m = q N is the chain's divisor and the denominator of the clipped
      fraction. A number is refused.
    target_quantile: gamma in (0, 1) (the paper's default 0.5).
    clip_learning_rate: eta of the geometric bound update (paper: 0.2).
    count_stddev: noise of the centred count; default m / 20 (the paper's).
    key: PRNG key; the count and gradient noise draw separated streams.
    momentum: heavy-ball momentum, or None.

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(640, 0.1)
    >>> tx = adaptive_dpsgd(0.1, 1.0, 1.1, sampler, key=jax.random.key(0))
    >>> out, s = tx.update(jnp.ones((4, 3)), tx.init(jnp.zeros(3)),
    ...                    jnp.zeros(3), mask=jnp.ones(4, bool))
    >>> out.shape
    (3,)
  """
  expected_batch_size = _validate.sampler(sampler)
  if count_stddev is None:
    count_stddev = float(expected_batch_size) / 20
  sigma_grad = adaptive_clip_noise_multiplier(noise_multiplier, count_stddev)
  return optax.chain(
      adaptive_clip_per_example(
          initial_l2_norm_clip, target_quantile=target_quantile,
          learning_rate=clip_learning_rate, count_stddev=count_stddev,
          expected_batch_size=expected_batch_size, key=key),
      _dpsgd_noise.add_dpsgd_noise(sigma_grad, key=key),
      _normalizing.normalize(expected_batch_size),
      _alias._sgd(learning_rate, momentum))  # pylint: disable=protected-access
