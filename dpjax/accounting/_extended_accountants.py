"""dp_accounting's RDP and PLD accountants, extended to dpjax's events.

``RdpAccountant`` also composes pure ``EpsilonDeltaDpEvent``s and the
distributed events; ``PldAccountant`` also composes ``EpsilonDeltaDpEvent``s
and the Gaussian sampled without replacement under replace-one. ``walk``
visits an event's parts; ``quiet_convergence`` handles dp_accounting's
"failed to converge" warnings.

Example:
  >>> event = dp_accounting.SelfComposedDpEvent(
  ...     _events.EpsilonDeltaDpEvent(0.5, 0.0), 100)  # 100 x pure 0.5
  >>> round(float(RdpAccountant().compose(event).get_epsilon(1e-5)), 2)
  35.08
"""

import contextlib
import logging

import dp_accounting
from dp_accounting import pld
from dp_accounting import rdp
import numpy as np

from dpjax.accounting import _balls_in_bins
from dpjax.accounting import _distributed
from dpjax.accounting import _events

NeighboringRelation = dp_accounting.NeighboringRelation
_Errors = dp_accounting.PrivacyAccountant.CompositionErrorDetails


class RdpAccountant(rdp.RdpAccountant):
  """RdpAccountant that also composes pure ``EpsilonDeltaDpEvent``s, the
  distributed discrete Gaussian and Skellam events (alone or
  Poisson-subsampled under add/remove-one neighbours) and untruncated
  ``BallsInBinsDpEvent``s (add/remove-one)."""

  def _maybe_compose(self, event, count, do_compose):
    if isinstance(event, _balls_in_bins.BallsInBinsDpEvent):
      return self._compose_balls_in_bins(event, count, do_compose)
    distributed = self._maybe_compose_distributed(event, count, do_compose)
    if distributed is not False:
      return distributed
    if not isinstance(event, _events.EpsilonDeltaDpEvent):
      return super()._maybe_compose(event, count, do_compose)
    if event.delta > 0:
      return _Errors(event, 'an (epsilon, delta > 0) event has no finite RDP; '
                     'use accountant="pld".')
    if do_compose:
      eps = float(event.epsilon)
      self._rdp += count * np.minimum(eps, self._orders * eps**2 / 2)
    return None


  def _compose_balls_in_bins(self, event, count, do_compose):
    if self._neighboring_relation != NeighboringRelation.ADD_OR_REMOVE_ONE:
      return _Errors(event, 'balls-in-bins epochs are accounted under '
                     'add/remove-one neighbours only.')
    if event.truncation_probability > 0:
      return _Errors(event, 'a truncated balls-in-bins epoch has no RDP; '
                     'dpjax.accounting.epsilon adds its truncation '
                     'probability to delta.')
    if do_compose:
      self._rdp += count * _balls_in_bins.balls_in_bins_rdp(
          event.noise_multiplier, event.num_steps, self._orders)
    return None

  def _maybe_compose_distributed(self, event, count, do_compose):
    """None or error details if ``event`` is a distributed event, else False."""
    q = 1.0
    inner = event
    if (isinstance(event, dp_accounting.PoissonSampledDpEvent)
        and isinstance(event.event, _distributed.EVENT_TYPES)):
      if self._neighboring_relation != NeighboringRelation.ADD_OR_REMOVE_ONE:
        return _Errors(event, 'Poisson-subsampled distributed DP events are '
                       'accounted under add/remove-one neighbours only.')
      q, inner = float(event.sampling_probability), event.event
    elif not isinstance(event, _distributed.EVENT_TYPES):
      return False
    if do_compose:
      self._rdp += count * _distributed.subsampled_rdp(inner, q,
                                                       self._orders)
    return None


class PldAccountant(pld.PLDAccountant):
  """PLDAccountant that also composes ``EpsilonDeltaDpEvent``s and the
  Gaussian sampled without replacement under replace-one neighbours.

  Sampling b of n without replacement, replace-one, inner Gaussian of noise
  multiplier s (relative to the replace-one sensitivity 2C, as
  dp_accounting's RDP takes it): with gamma = b / n the privacy profile is at
  most gamma delta_G(log(1 + (e^eps - 1) / gamma)), delta_G the profile of
  the Gaussian of multiplier s (advanced joint convexity, Balle, Barthe &
  Gaboardi 2018, Thm. 2 and 10). That is the remove-direction profile of the
  Poisson-subsampled Gaussian (gamma, s), whose add/remove PLD is used: it
  is never below the bound, and is attained (the other examples all at -C,
  the replaced one moving from -C to +C gives exactly that pair, both
  orders), so the accounting is exact.
  """

  def _maybe_compose(self, event, count, do_compose):
    if (isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent)
        and isinstance(event.event, dp_accounting.GaussianDpEvent)
        and self.neighboring_relation == NeighboringRelation.REPLACE_ONE):
      return self._compose_without_replacement(event, count, do_compose)
    if not isinstance(event, _events.EpsilonDeltaDpEvent):
      return super()._maybe_compose(event, count, do_compose)
    if do_compose and (event.epsilon > 0 or event.delta > 0):
      params = dp_accounting.pld.common.DifferentialPrivacyParameters(
          float(event.epsilon), float(event.delta))
      self._pld = self._pld.compose(
          pld.privacy_loss_distribution.from_privacy_parameters(
              params, self._value_discretization_interval).self_compose(count))
    return None

  def _compose_without_replacement(self, event, count, do_compose):
    gamma = event.sample_size / event.source_dataset_size
    if not do_compose or gamma == 0:
      return None
    if event.event.noise_multiplier == 0:
      self._contains_non_dp_event = True
      return None
    self._pld = self._pld.compose(
        pld.privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=float(event.event.noise_multiplier),
            value_discretization_interval=self._value_discretization_interval,
            sampling_prob=min(1.0, gamma),
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
        ).self_compose(count))
    return None


def walk(event: dp_accounting.DpEvent):
  yield event
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    yield from walk(event.event)
  elif isinstance(event, dp_accounting.ComposedDpEvent):
    for e in event.events:
      yield from walk(e)
  elif isinstance(event, (dp_accounting.PoissonSampledDpEvent,
                          dp_accounting.SampledWithoutReplacementDpEvent,
                          dp_accounting.SampledWithReplacementDpEvent,
                          _events.TruncatedPoissonSampledDpEvent)):
    yield from walk(event.event)


def infer_neighboring_relation(
    event: dp_accounting.DpEvent) -> NeighboringRelation:
  """REPLACE_ONE if the event samples without replacement, else ADD_OR_REMOVE_ONE."""
  if any(isinstance(e, dp_accounting.SampledWithoutReplacementDpEvent)
         for e in walk(event)):
    return NeighboringRelation.REPLACE_ONE
  return NeighboringRelation.ADD_OR_REMOVE_ONE


class ConvergenceWarnings(logging.Filter):
  """Counts and drops dp_accounting's "failed to converge" warnings.

  dp_accounting's RDP of the Poisson-subsampled Gaussian at a fractional
  order returns inf when its series does not converge (small noise), which
  drops that order from the conversion: the answer stays an upper bound.
  """

  def __init__(self):
    super().__init__()
    self.count = 0

  def filter(self, record):
    if 'failed to converge' in record.getMessage():
      self.count += 1
      return False
    return True


@contextlib.contextmanager
def quiet_convergence():
  handler = ConvergenceWarnings()
  logger = logging.getLogger('absl')
  logger.addFilter(handler)
  try:
    yield handler
  finally:
    logger.removeFilter(handler)

