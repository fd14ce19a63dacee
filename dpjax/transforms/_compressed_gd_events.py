"""Privacy events of DP-CompGD / DP-CompSGD and their projected baselines.

A full-batch step (``dp_compgd``, ``dp_projected_gd``) is the Gaussian
mechanism with noise multiplier sigma under replace-one; a Poisson step
(``dp_compsgd``, ``dp_projected_sgd``) is the Poisson-subsampled Gaussian
under add/remove-one (Huang thesis, Algs. 8-9, with the release of
``_compressed_gd``). ``dp_compgd_step_event`` and ``dp_compsgd_step_event``
build the event of a run from its ``CompressedGdState`` (the sigma and the
release that ran, and the steps taken), so a ledger cannot record another
sigma; ``dp_compgd_event`` and ``dp_compsgd_event`` take the values as
arguments, for planning and calibration.
"""

from typing import Any

import dp_accounting
import numpy as np

from dpjax import _validate
from dpjax import accounting
from dpjax.transforms._compressed_gd import CompressedGdState
from dpjax.transforms._dpsgd_noise import _scalar

FULL_BATCH, POISSON = 2.0, 1.0  # CompressedGdState.sensitivity_factor


def dp_compgd_event(noise_multiplier: float, steps: int = 1
                    ) -> dp_accounting.DpEvent:
  """T full-batch steps of ``dp_compgd`` / ``dp_projected_gd``.

  Each step is the Gaussian mechanism with noise multiplier sigma under the
  replace-one relation (stddev 2 L sigma on a sum of replace-one
  sensitivity 2 L), composed T times.

  Example:
    >>> e = dp_compgd_event(5.0, 10)
    >>> 1.0 < dpjax.accounting.epsilon(e, 0.01) < 3.0
    True
  """
  _validate.positive_int(steps=steps)
  return dp_accounting.SelfComposedDpEvent(
      accounting.gaussian_event(noise_multiplier), steps)


def dp_compsgd_event(noise_multiplier: float, sampling_rate: float,
                     steps: int = 1) -> dp_accounting.DpEvent:
  """T Poisson-sampled steps of ``dp_compsgd`` / ``dp_projected_sgd``.

  Example:
    >>> e = dp_compsgd_event(1.0, 0.1, 10)
    >>> isinstance(e, dp_accounting.SelfComposedDpEvent)
    True
  """
  _validate.non_negative_int(steps=steps)
  return dp_accounting.SelfComposedDpEvent(
      accounting.gaussian_event(noise_multiplier, sampling_rate=sampling_rate),
      steps)


def calibrate_dp_compgd(target_epsilon: float, delta: float, steps: int,
                        accountant: str = 'rdp') -> float:
  """sigma for T full-batch steps to spend at most (epsilon, delta).

  Example:
    >>> s = calibrate_dp_compgd(2.0, 0.01, 10)
    >>> dpjax.accounting.epsilon(dp_compgd_event(s, 10), 0.01) <= 2.0
    True
  """
  _validate.positive(target_epsilon=target_epsilon)
  _validate.open_unit(delta=delta)
  return accounting.calibrate(accounting.gaussian_event, target_epsilon,
                              delta, accountant, steps=steps)


def calibrate_dp_compsgd(target_epsilon: float, delta: float,
                         sampling_rate: float, steps: int,
                         accountant: str = 'rdp') -> float:
  """sigma for T Poisson steps at rate q to spend at most (epsilon, delta)."""
  _validate.positive(target_epsilon=target_epsilon)
  _validate.open_unit(delta=delta)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  return accounting.calibrate(
      lambda s: accounting.gaussian_event(s, sampling_rate=sampling_rate),
      target_epsilon, delta, accountant, steps=steps)


def _ran(opt_state: Any, factor: float, claimed: float | None,
         rtol: float) -> tuple[float, int]:
  """(sigma, steps) that produced ``opt_state``, checked against the claim."""
  if not isinstance(opt_state, CompressedGdState):
    raise ValueError('Expected opt_state to be the CompressedGdState the step '
                     f'returned, got {type(opt_state).__name__}.')
  steps = int(_scalar(opt_state.stream.count, 'count'))
  if steps < 1:
    raise ValueError('The state is from before any step: pass the state the '
                     'last step returned.')
  ran = _scalar(opt_state.sensitivity_factor, 'sensitivity_factor')
  kinds = {FULL_BATCH: 'full-batch (dp_compgd, dp_projected_gd)',
           POISSON: 'Poisson (dp_compsgd, dp_projected_sgd)',
           0.0: 'non-private (compgd, projected_gd)'}
  if ran != factor:
    raise ValueError(f'Expected the state of a {kinds[factor]} run, got '
                     f'that of a {kinds.get(ran, ran)} run.')
  sigma = _scalar(opt_state.noise_multiplier, 'noise_multiplier')
  if not np.isfinite(sigma) or sigma < 0:
    raise ValueError(f'The run ran noise_multiplier={sigma}.')
  if claimed is not None and not np.isclose(claimed, sigma, rtol=rtol,
                                            atol=0):
    raise ValueError(f'Claimed noise_multiplier={claimed}, but the run ran '
                     f'noise_multiplier={sigma}: the event records what ran.')
  return sigma, steps


def dp_compgd_step_event(opt_state: Any, *,
                          noise_multiplier: float | None = None,
                          rtol: float = 1e-6) -> dp_accounting.DpEvent:
  """The event of every full-batch step that produced ``opt_state``.

  Reads sigma and the step count T from the ``CompressedGdState`` of
  ``dp_compgd`` / ``dp_projected_gd`` (the values that ran, traced ones
  included): ``dp_compgd_event(sigma, T)``.

  Args:
    opt_state: the state after the last step (one run: no seed axis).
    noise_multiplier: the sigma the caller believes ran; a mismatch raises.
    rtol: relative tolerance of that check (the state holds float32).

  Raises:
    ValueError: no step taken, the state of a Poisson or non-private run, a
      batched state, or a claimed sigma other than the one that ran.

  Example:
    >>> tx = dpjax.transforms.dp_compgd(0.5, 2, 1.0, 1.0, 0.7, 3,
    ...                                 key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> _, s = tx.update(jnp.ones((3, 4)), tx.init(w), w)
    >>> e = dp_compgd_step_event(s)
    >>> round(e.event.noise_multiplier, 6), e.count
    (0.7, 1)
  """
  sigma, steps = _ran(opt_state, FULL_BATCH, noise_multiplier, rtol)
  return dp_compgd_event(sigma, steps)


def dp_compsgd_step_event(opt_state: Any, sampler: Any, *,
                           noise_multiplier: float | None = None,
                           rtol: float = 1e-6) -> dp_accounting.DpEvent:
  """The event of every Poisson step that produced ``opt_state``.

  Reads sigma and T from the ``CompressedGdState`` of ``dp_compsgd`` /
  ``dp_projected_sgd``; each step is ``sampler.dp_event(sigma)`` (e.g. a
  ``dpjax.sampling.PoissonSampler``), composed T times.

  Args:
    opt_state: the state after the last step (one run: no seed axis).
    sampler: the batch sampler of the steps (``dp_event``).
    noise_multiplier: the sigma the caller believes ran; a mismatch raises.
    rtol: relative tolerance of that check.

  Raises:
    ValueError: as ``dp_compgd_step_event``, for a full-batch state.

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(100, 0.05)
    >>> tx = dpjax.transforms.dp_compsgd(0.5, 2, 1.0, 1.0, 1.3, 5.0,
    ...                                  key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> _, s = tx.update(jnp.ones((3, 4)), tx.init(w), w,
    ...                  mask=jnp.ones(3, bool))
    >>> dp_compsgd_step_event(s, sampler).count
    1
  """
  sigma, steps = _ran(opt_state, POISSON, noise_multiplier, rtol)
  return dp_accounting.SelfComposedDpEvent(sampler.dp_event(sigma), steps)
