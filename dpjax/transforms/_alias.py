"""Ready-made DP chains: DP-SGD, RS-DPSGD and compressive DP gradient descent.

Continuous hyperparameters (learning rate, clip norm, noise multiplier,
momentum, epsilon) may be traced, so
``optax.inject_hyperparams(dpsgd)(...)`` works and ``jax.vmap`` over a vector
of noise multipliers runs one compiled step for all of them. Validation checks
concrete numbers only.

A sweep vmaps over (hyperparameter, key) pairs, one key per member
(``jax.random.split(key, members)``). The noise folds sigma and the sum's
bound into its key, so members that differ in either draw independent noise
even from one key; members equal in both (a sweep over the learning rate)
would share one noise z, and two diverged runs' releases S_1 + sigma z and
S_2 + sigma z give S_1 - S_2 without noise.

Example:
  >>> sampler = dpjax.sampling.PoissonSampler(80, 0.1)
  >>> def one_step(sigma, key):
  ...   tx = dpsgd(0.1, 1.0, sigma, sampler, key=key)
  ...   return tx.update(jnp.ones((8, 3)), tx.init(jnp.zeros(3)), jnp.zeros(3),
  ...                    mask=jnp.ones(8, bool))[0]
  >>> sigmas = jnp.array([0.8, 2.0])
  >>> keys = jax.random.split(jax.random.key(0), len(sigmas))
  >>> jax.vmap(one_step)(sigmas, keys).shape
  (2, 3)
"""

from typing import Any

import jax
import jax.numpy as jnp
import optax

from dpjax import _validate
from dpjax.transforms import _clipping as _clip_tx
from dpjax.transforms import _compressing
from dpjax.transforms import _dpsgd_noise
from dpjax.transforms import _normalizing
from dpjax.transforms import _sparsifying


def _sgd(learning_rate, momentum, nesterov=False):
  """optax.sgd after checking a concrete step size (a schedule passes)."""
  _validate.non_negative(learning_rate=learning_rate)
  _validate.finite(learning_rate=learning_rate)
  if momentum is not None:
    _validate.non_negative(momentum=momentum)
  return _in_param_dtypes(
      optax.sgd(learning_rate, momentum=momentum, nesterov=nesterov))


def _in_param_dtypes(tx: optax.GradientTransformation
                     ) -> optax.GradientTransformation:
  """``tx`` on updates cast to the parameters' dtypes.

  The clipped sum is float32 for bf16 parameters, and so is its noise; the
  SGD step comes after the noise, so casting there is post-processing. It
  keeps optax's momentum trace (initialized like the parameters) in its
  dtype, as a ``lax.scan`` over steps and strict dtype promotion need.
  """

  def update_fn(updates, state, params=None):
    if params is not None:
      updates = jax.tree.map(lambda u, p: u.astype(jnp.result_type(p)),
                             updates, params)
    return tx.update(updates, state, params)

  return optax.GradientTransformation(tx.init, update_fn)


def _privatized_sum(l2_norm_clip, noise_multiplier, key, per_example,
                    clip=True, noise='float', strategy=None):
  """The aggregator (per-example input only) and the one Gaussian noise.

  The bound is given once: to the chain's own clipping when it clips
  (``per_example``), else it is the one the ``ClippedSum`` carries, and a
  second one is refused.
  """
  if per_example:
    if l2_norm_clip is None:
      raise ValueError('Expected an l2_norm_clip with per_example=True: the '
                       'chain clips the per-example gradients to it.')
  elif not clip:
    raise ValueError('Expected clip=True with per_example=False: the sum '
                     'says itself whether it was clipped (its unit); pass '
                     'the ablation\'s dpjax.clipping.unclipped_sum.')
  elif l2_norm_clip is not None:
    raise ValueError(
        'Expected l2_norm_clip=None with per_example=False: the ClippedSum '
        'carries its own bound, and the noise is calibrated to it; a second '
        'bound could only disagree with it.')
  if noise == 'exact' and not clip:
    raise ValueError('Expected clip=True with noise=\'exact\': the exact '
                     'path is for private runs.')
  parts = [_dpsgd_noise.add_dpsgd_noise(noise_multiplier, key=key,
                                        noise=noise, strategy=strategy)]
  if per_example:
    parts.insert(0, _clip_tx.clip_per_example(l2_norm_clip) if clip
                 else _clip_tx.sum_per_example(l2_norm_clip))
  return parts


def dpsgd(learning_rate: optax.ScalarOrSchedule, l2_norm_clip: Any,
          noise_multiplier: float, sampler: Any, *,
          key: jax.Array, momentum: float | None = None,
          nesterov: bool = False, per_example: bool = True, clip: bool = True,
          noise: str = 'float') -> optax.GradientTransformationExtraArgs:
  """DP-SGD: clip per example, add Gaussian noise, normalize, (momentum) SGD.

  Args:
    learning_rate: step size or schedule; may be traced.
    l2_norm_clip: with ``per_example=True``, the bound the chain clips to:
      scalar C (may be traced) or a pytree of per-layer bounds. None (and
      required None) with ``per_example=False``: the ``ClippedSum`` carries
      it.
    noise_multiplier: sigma (may be traced); the noise stddev is sigma times
      the sum's bound, ``clipped_norm_bound(l2_norm_clip)``.
    sampler: the ``dpjax.sampling`` sampler the batches come from (e.g.
      ``PoissonSampler(N, q)``); the chain divides the noisy sum by its
      ``expected_batch_size`` (q N). A number is refused.
    key: PRNG key for the noise (required).
    momentum: heavy-ball momentum, or None for plain SGD (as ``optax.sgd``).
    nesterov: Nesterov momentum.
    per_example: True (default): the updates are per-example gradients with
      a leading batch axis (and ``mask=`` marks real rows), clipped and summed
      by the chain. False: the updates are the clipped sum as the
      ``dpjax.clipping.ClippedSum`` that carries its bound, e.g. the
      ``grad_sum`` of ``dpjax.clipped_grad_sum(loss, l2_norm_clip,
      method='ghost')``; the chain adds noise calibrated to the bound it
      carries, and the rest. A bare pytree is refused (see
      ``add_dpsgd_noise``).
    clip: False for the noisy-SGD ablation (NOT private; its steps cannot be
      recorded): per-example gradients are summed unclipped, with noise
      stddev sigma x ``l2_norm_clip``. Per-example input only: with
      ``per_example=False`` the sum's unit says whether it was clipped
      (``dpjax.clipping.unclipped_sum`` makes the ablation's sum).
    noise: ``'float'`` (default): float32 Gaussian noise,
      ``add_dpsgd_noise``; hyperparameters may be traced. ``'exact'``: the
      clipped sum is rounded at random to a power-of-two grid gamma Z and
      exact discrete Gaussian noise is added to the integers
      (``add_dpsgd_noise(noise='exact')``); concrete hyperparameters only,
      slower,
      and accounted with a slightly inflated sensitivity and a looser
      subsampling bound (Poisson samplers only).

  Returns:
    An optax transformation.

  Privacy:
    ``noise='float'`` states the guarantee of the ideal real-valued
    Gaussian mechanism; the float32 noise and the float32 sum it is added
    to only approximate it, and the low-order bits of the release can leak
    the input beyond that guarantee (Mironov 2012; Jin et al., IEEE S&P
    2022). ``noise='exact'`` releases a function of an integer vector whose
    distribution is exactly the accounted one (up to the PRNG); its event
    is the discrete Gaussian's, read from the state like the float path's.
    Each step is a Gaussian mechanism with noise multiplier
    ``noise_multiplier`` on a sum of L2 sensitivity
    ``clipped_norm_bound(l2_norm_clip)`` (add/remove-one). Record each step
    from the state it returns and the batch it used:
    ``ledger.record_step(state, sampler, batch)`` reads the event
    (``dpjax.accounting.step_event``: the sigma, bound and unit that ran,
    the ``normalize`` divisor checked against the sampler) and the noise
    stream from the state, so a re-``init`` (which restarts the noise at
    step 0) or a sampler key reused for several steps is refused by the
    ledger. Resume from the saved state, never from parameters alone. Under
    Poisson sampling at rate q for T steps the run is
    ``dpjax.accounting.gaussian_event(noise_multiplier, sampling_rate=q,
    steps=T)``; its message is
    ``dpsgd_bits(d)`` bits per step (d parameters).

  References:
    Abadi et al. 2016, Alg. 1.

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(320, 0.1)
    >>> tx = dpsgd(0.1, 1.0, 1.1, sampler, key=jax.random.key(0))
    >>> grads = jnp.ones((4, 3))  # four examples
    >>> out, _ = tx.update(grads, tx.init(jnp.zeros(3)), jnp.zeros(3),
    ...                    mask=jnp.ones(4, bool))
    >>> out.shape
    (3,)
  """
  expected_batch_size = _validate.sampler(sampler)
  return optax.chain(
      *_privatized_sum(l2_norm_clip, noise_multiplier, key, per_example,
                       clip, noise),
      _normalizing.normalize(expected_batch_size),
      _sgd(learning_rate, momentum, nesterov),
  )


def rs_dpsgd(learning_rate: optax.ScalarOrSchedule, l2_norm_clip: Any,
             noise_multiplier: float, sampler: Any,
             schedule: _sparsifying.SparsityMaskSchedule, *, key: jax.Array,
             mask_key: jax.Array, momentum: float | None = None,
             per_example: bool = True, clip: bool = True
             ) -> optax.GradientTransformationExtraArgs:
  """DP-SGD with random sparsification (Alg. 1) and its ablations.

  ``chain(sparsify_random, clip_per_example, add_gaussian_noise,
  sparsify_random, normalize, sgd)``; both sparsifiers use ``mask_key``, so
  masked coordinates get neither gradient nor noise. ``noise_multiplier=0``
  is clipped SGD with RS (Alg. 3); ``clip=False`` sums unclipped gradients and
  is noisy SGD with RS (Alg. 2, noise stddev still sigma * C; NOT private).
  A schedule of zeros is plain DP-SGD on the same keys.

  Args:
    learning_rate: step size or schedule; may be traced.
    l2_norm_clip: C (scalar, may be traced, or per-layer bounds) with
      ``per_example=True``; None with ``per_example=False`` (the
      ``ClippedSum`` carries it).
    noise_multiplier: sigma (may be traced); noise stddev sigma * C.
    sampler: the sampler the batches come from, as in ``dpsgd``.
    schedule: the masks' ``SparsityMaskSchedule`` (its ``num_zeros`` may be
      traced, see ``sparsify_random``).
    key: PRNG key of the noise (required).
    mask_key: PRNG key of the masks (required; a key different from
      ``key``, so masks and noise never come from the same stream).
    momentum: heavy-ball momentum (the paper uses 0.9) or None.
    per_example: as in ``dpsgd``. With False the updates are the clipped sum
      (``ClippedSum``) of the masked per-example gradients: pass
      ``coordinate_mask=dpjax.transforms.next_sparsity_mask(opt_state)``
      (the mask the chain's state holds for its next update) to
      ``dpjax.clipped_grad_sum``; the chain masks the noisy sum alike.
    clip: False for the noisy-SGD ablation, as in ``dpsgd``.

  Returns:
    An optax transformation.

  Privacy:
    With ``clip=True``, exactly the DP-SGD step of ``dpsgd`` with the same
    sigma, C and sampler (the mask is data-independent), recorded per step
    by ``ledger.record_step`` as for ``dpsgd`` (it refuses ``clip=False``).
    Bits per step: ``rs_dpsgd_bits``.

  References:
    Zhu & Blaschko, Alg. 1-3.

  Example:
    >>> sched = dpjax.transforms.SparsityMaskSchedule.cooling(
    ...     0.5, 1, 10, jnp.zeros(4))
    >>> sampler = dpjax.sampling.PoissonSampler(80, 0.1)
    >>> tx = rs_dpsgd(0.1, 1.0, 1.0, sampler, sched, key=jax.random.key(0),
    ...               mask_key=jax.random.key(1))
    >>> out, _ = tx.update(jnp.ones((2, 4)), tx.init(jnp.zeros(4)),
    ...                    jnp.zeros(4), mask=jnp.ones(2, bool))
    >>> int((out == 0).sum())
    2
  """
  expected_batch_size = _validate.sampler(sampler)
  _validate.distinct_keys(key=key, mask_key=mask_key)
  sparsify = lambda per_ex: _sparsifying.sparsify_random(
      schedule, key=mask_key, per_example=per_ex)
  parts = _privatized_sum(l2_norm_clip, noise_multiplier, key, per_example,
                          clip)
  return optax.chain(
      *([sparsify(True)] if per_example else []),
      *parts,
      sparsify(False),
      _normalizing.normalize(expected_batch_size),
      _sgd(learning_rate, momentum),
  )


def compressive_dpsgd(learning_rate: optax.ScalarOrSchedule, kappa: int,
                      num_measurements: int, epsilon: float,
                      linf_clip: float, *, key: jax.Array,
                      noise_calibration: str = 'certified',
                      exact: bool = True,
                      **cosamp_options: Any) -> optax.GradientTransformation:
  """Private gradient descent with the compressive mechanism (Farokhi Alg. 3).

  ``chain(compressive_privatizer, sgd)``: each step privatizes the update
  (top-kappa, clip to [-xi, xi], Gaussian measurements, Laplace noise,
  CoSaMP) and takes a gradient step; Alg. 3's rate rho_k = rho / sqrt(k) is
  a schedule ``lambda t: rho / jnp.sqrt(t + 1)``.

  Args:
    learning_rate: step size or schedule; may be traced.
    kappa, num_measurements, epsilon, linf_clip, noise_calibration, exact,
      cosamp_options: as ``compressive_privatizer``.
    key: PRNG key (required).

  Returns:
    An optax transformation.

  Privacy:
    Per step as ``compressive_privatizer``;
    ``compressive_privatizer_event`` composes a run.

  References:
    Farokhi, Alg. 3.

  Example:
    >>> tx = compressive_dpsgd(0.1, 2, 8, 1.0, 1.0, key=jax.random.key(0))
    >>> out, _ = tx.update(jnp.ones(16), tx.init(jnp.zeros(16)))
    >>> int((out != 0).sum()) <= 2
    True
  """
  return optax.chain(
      _compressing.compressive_privatizer(
          kappa, num_measurements, epsilon, linf_clip, key=key,
          noise_calibration=noise_calibration, exact=exact,
          **cosamp_options),
      _sgd(learning_rate, None),
  )
