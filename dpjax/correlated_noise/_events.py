"""The DpEvent of a BandMF / DP-FTRL run, from its hyperparameters.

Both settings are add/remove-one (zero-out) of one example's gradients, with
``noise_multiplier`` sigma = stddev(Z) / (clip x the strategy's largest
column norm), the convention of ``dpjax.bandmf``:

* ``sampling_rate=None``: a deterministic b-min-separation schedule (e.g.
  one fixed data order, every example once per ``min_separation`` steps).
  The run is one Gaussian mechanism on C G with sensitivity
  clip x ``sensitivity(C[:T, :T], b, k)``: ``GaussianDpEvent(sigma x
  column norm / sensitivity)`` (Choquette-Choo et al. 2023, "(Amplified)
  banded matrix factorization", Sec. 3; Denisov et al. 2022).
* ``sampling_rate=q``: cyclic Poisson sampling over ``min_separation`` = b
  partitions (``dpjax.sampling.CyclicPoissonSampler``) and bands <= b: as
  private as DP-SGD with sigma and rate q for ceil(T / b) steps (ibid.,
  Thm. 4), composed in dp_accounting as
  ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)),
  ceil(T / b))``.
"""

import math
from typing import Any

import dp_accounting
import numpy as np

from dpjax import _validate
from dpjax import accounting
from dpjax.correlated_noise import _sensitivity
from dpjax.correlated_noise import _strategies


def _first_steps(strategy: _strategies.Strategy,
                 steps: int) -> _strategies.Strategy:
  """The leading steps x steps block of C (still lower-triangular)."""
  bands = min(strategy.bands, steps)
  return _strategies.Strategy(strategy.band[:steps, :bands], strategy.toeplitz)


def bandmf_event(noise_multiplier: float,
                 strategy: _strategies.Strategy, *, steps: int,
                 min_separation: int, max_participations: int | None = None,
                 sampling_rate: float | None = None
                 ) -> dp_accounting.DpEvent:
  """The event of ``steps`` BandMF steps on ``strategy``.

  Args:
    noise_multiplier: sigma >= 0 (see the module docstring).
    strategy: the ``Strategy`` the run used.
    steps: T >= 0; at most n unless the strategy is Toeplitz (which
      continues past n) and ``sampling_rate`` is given.
    min_separation: b, the fewest steps between two participations of one
      example (the number of partitions with ``sampling_rate``).
    max_participations: k (without ``sampling_rate``), or None for
      ceil(T / b).
    sampling_rate: q in (0, 1] of cyclic Poisson sampling, or None.

  Returns:
    A ``DpEvent`` (add/remove-one).

  Raises:
    ValueError: naming the bad value: sigma negative, b or k not positive
      integers, T past the strategy's n, bands above b with
      ``sampling_rate`` (the amplification theorem needs them within the
      cycle), or ``max_participations`` with ``sampling_rate``.

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
      max(steps, 1), min_separation, max_participations)
  if sampling_rate is not None:
    _validate.half_open_unit(sampling_rate=sampling_rate)
    if max_participations is not None:
      raise ValueError(f'Expected max_participations={max_participations} '
                       'to be None with sampling_rate: cyclic sampling '
                       'sets it to ceil(steps / min_separation).')
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
  if steps > strategy.n:
    raise ValueError(f'Expected steps={steps} <= the strategy\'s '
                     f'n={strategy.n}.')
  if steps == 0:
    return dp_accounting.NoOpDpEvent()
  first = _first_steps(strategy, steps)
  bound = 'exact' if first.bands <= b else 'upper'
  sens = _sensitivity.sensitivity(first, min_separation=b,
                                  max_participations=max_participations,
                                  bound=bound)
  column_norm = float(np.max(strategy.column_norms()))
  return dp_accounting.GaussianDpEvent(
      float(noise_multiplier) * column_norm / sens)
