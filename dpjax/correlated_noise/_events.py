"""The planned DpEvent of an amplified BandMF / DP-FTRL run.

A plan, e.g. to calibrate sigma before training: a run's own event is read
from the state that ran, ``dpjax.accounting.step_event(state, sampler)``
(and ``PrivacyLedger.record_step``) under its
``dpjax.sampling.CyclicPoissonSampler``, which fixes the participation
pattern; without amplification (the sampler at rate 1) there is no planning
shortcut here: the run is one Gaussian mechanism of sensitivity clip x
``sqrt(cyclic_squared_sensitivities(C, b)[T])``.

Add/remove-one (zero-out) of one example's gradients, with
``noise_multiplier`` sigma = stddev(Z) / (clip x the strategy's largest
column norm), the convention of ``dpjax.bandmf``: cyclic Poisson sampling
over ``min_separation`` = b partitions and bands <= b is as private as
DP-SGD with sigma and rate q for ceil(T / b) steps (Choquette-Choo et al.
2023, "(Amplified) banded matrix factorization", Thm. 4), composed in
dp_accounting as ``SelfComposedDpEvent(PoissonSampledDpEvent(q,
GaussianDpEvent(sigma)), ceil(T / b))``.
"""

import math

import dp_accounting

from dpjax import _validate
from dpjax import accounting
from dpjax.correlated_noise import _sensitivity
from dpjax.correlated_noise import _strategies


def bandmf_event(noise_multiplier: float,
                 strategy: _strategies.Strategy, *, steps: int,
                 min_separation: int, sampling_rate: float
                 ) -> dp_accounting.DpEvent:
  """The planned event of ``steps`` amplified BandMF steps on ``strategy``.

  Args:
    noise_multiplier: sigma >= 0, the plan's (see the module docstring).
    strategy: the ``Strategy`` the run will use.
    steps: T >= 0; at most n unless the strategy is Toeplitz (which
      continues past n).
    min_separation: b, the ``CyclicPoissonSampler``'s ``num_partitions``.
    sampling_rate: q in (0, 1], its rate within a partition.

  Returns:
    A ``DpEvent`` (add/remove-one), untruncated Poisson.

  Raises:
    ValueError: naming the bad value: sigma negative, b not a positive
      integer, T past the strategy's n, or bands above b (the amplification
      theorem needs them within the cycle).

  Example:
    >>> s = dpjax.correlated_noise.banded_toeplitz([1.0, 0.5], 100)
    >>> e = bandmf_event(1.0, s, steps=100, min_separation=4,
    ...                  sampling_rate=0.1)
    >>> e.count, e.event.sampling_probability
    (25, 0.1)
  """
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.finite(noise_multiplier=noise_multiplier)
  _validate.non_negative_int(steps=steps)
  if not isinstance(strategy, _strategies.Strategy):
    raise ValueError('Expected strategy= a dpjax.correlated_noise.Strategy.')
  b, _ = _sensitivity._participations(  # pylint: disable=protected-access
      max(steps, 1), min_separation, None)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  if strategy.bands > b:
    raise ValueError(f'Expected strategy bands={strategy.bands} <= '
                     f'min_separation={b}: amplification by cyclic Poisson '
                     'sampling needs the bands within one cycle.')
  if not strategy.toeplitz and steps > strategy.n:
    raise ValueError(f'Expected steps={steps} <= the strategy\'s '
                     f'n={strategy.n}.')
  return dp_accounting.SelfComposedDpEvent(
      accounting.gaussian_event(noise_multiplier,
                                sampling_rate=sampling_rate),
      math.ceil(steps / b))
