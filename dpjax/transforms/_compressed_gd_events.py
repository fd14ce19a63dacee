"""Privacy events of DP-CompGD / DP-CompSGD and their projected baselines.

A full-batch step (``dp_compgd``, ``dp_projected_gd``) is the Gaussian
mechanism with noise multiplier sigma under replace-one; a Poisson step
(``dp_compsgd``, ``dp_projected_sgd``) is the Poisson-subsampled Gaussian
under add/remove-one (Huang thesis, Algs. 8-9, with the release of
``_compressed_gd``). These functions take the values as arguments, for
planning and calibration; the event of a step that ran is read from its
``CompressedGdState`` by ``dpjax.accounting.step_event`` (and recorded by
``PrivacyLedger.record_step``), so a ledger cannot record another sigma.
"""

import dp_accounting

from dpjax import _validate
from dpjax import accounting


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
