"""Truncated Poisson sampling, accounted as untruncated Poisson plus tv.

``untruncate`` replaces every truncated Poisson event by its Poisson event
and returns the probability tv that the truncation changed anything, which
``epsilon`` and ``delta`` add to delta.

Example:
  >>> event = dpjax.PoissonSampler(1000, 0.01).dp_event(1.0)  # cap 39
  >>> poisson, tv = untruncate(event)
  >>> type(poisson).__name__, tv < 1e-11
  ('PoissonSampledDpEvent', True)
"""

import math

import dp_accounting
from scipy import stats

from dpjax.accounting import _balls_in_bins
from dpjax.accounting import _events


def others_fill_cap(dataset_size, sampling_probability, cap) -> float:
  """P[Bin(dataset_size, q) >= cap]: the other examples alone fill the cap."""
  if cap > dataset_size:
    return 0.0
  return float(stats.binom.sf(cap - 1, dataset_size, sampling_probability))


def untruncate(event: dp_accounting.DpEvent):
  """Replaces truncated Poisson events by Poisson ones; returns (event, tv).

  Soundness: fix neighbours D and D' = D + x and the selections of the N
  others. If fewer than the cap of them are selected, x's presence cannot
  cause truncation and the two outputs are those of the untruncated
  Poisson event; otherwise (probability p = P[Bin(N, q) >= cap], the same
  for D and D') they differ by at most total variation 1. By joint
  convexity each step is dominated by the untruncated pair mixed with
  weight p with a pair of disjoint supports, and dominating pairs compose
  (Zhu, Dong & Wang 2022, Thm. 10): the composition's profile is at most
  deltauntruncated(eps) + tv with tv = 1 - prod (1 - p). Unlike a
  coupling of both outputs, this costs no factor e^eps.

  A ``BallsInBinsDpEvent`` carries its tv (``truncation_probability``, the
  same argument with the epoch in place of the step) and is returned with
  tv 0.
  """
  if isinstance(event, _balls_in_bins.BallsInBinsDpEvent):
    return (_balls_in_bins.BallsInBinsDpEvent(event.noise_multiplier,
                                              event.num_steps),
            event.truncation_probability)
  if isinstance(event, (dp_accounting.TruncatedSubsampledGaussianDpEvent,
                        _events.TruncatedPoissonSampledDpEvent)):
    p = others_fill_cap(event.dataset_size, event.sampling_probability,
                         event.truncated_batch_size)
    inner = (event.event
             if isinstance(event, _events.TruncatedPoissonSampledDpEvent)
             else dp_accounting.GaussianDpEvent(event.noise_multiplier))
    return dp_accounting.PoissonSampledDpEvent(
        float(event.sampling_probability), inner), p
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    inner, p = untruncate(event.event)
    return (dp_accounting.SelfComposedDpEvent(inner, event.count),
            -math.expm1(event.count * math.log1p(-p)) if p < 1 else 1.0)
  if isinstance(event, dp_accounting.ComposedDpEvent):
    parts = [untruncate(e) for e in event.events]
    log_keep = sum(math.log1p(-p) if p < 1 else -math.inf for _, p in parts)
    return (dp_accounting.ComposedDpEvent([e for e, _ in parts]),
            -math.expm1(log_keep))
  return event, 0.0


