"""epsilon, delta and noise calibration on top of dp_accounting.

Two accountants, chosen by name: ``"rdp"`` (dp_accounting's RdpAccountant,
Mironov 2017; conversion to (eps, delta) of Balle et al. 2020) and ``"pld"``
(dp_accounting's PLDAccountant, pessimistic discretization). Both are extended
to ``EpsilonDeltaDpEvent``. ``TruncatedSubsampledGaussianDpEvent`` (Poisson
sampling capped at a batch size) is exact under PLD; under RDP it is replaced
by the untruncated Poisson event plus a total-variation slack (see
``epsilon``).
"""

import math
from typing import Callable, Sequence

import dp_accounting
from dp_accounting import pld
from dp_accounting import rdp
from dp_accounting.rdp import rdp_privacy_accountant as rdp_accountant_lib
import numpy as np

from dpjax import _solve
from dpjax import _validate
from dpjax.accounting import _distributed
from dpjax.accounting import _events

NeighboringRelation = dp_accounting.NeighboringRelation
# Accountants that ``epsilon`` and ``calibrate`` accept (``accountant=``).
ACCOUNTANTS = ('rdp', 'pld')
_Errors = dp_accounting.PrivacyAccountant.CompositionErrorDetails


class _RdpAccountant(rdp.RdpAccountant):
  """RdpAccountant that also composes pure ``EpsilonDeltaDpEvent``s and the
  distributed discrete Gaussian and Skellam events (alone or
  Poisson-subsampled under add/remove-one neighbours)."""

  def _maybe_compose(self, event, count, do_compose):
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


class _PldAccountant(pld.PLDAccountant):
  """PLDAccountant that also composes ``EpsilonDeltaDpEvent``s."""

  def _maybe_compose(self, event, count, do_compose):
    if not isinstance(event, _events.EpsilonDeltaDpEvent):
      return super()._maybe_compose(event, count, do_compose)
    if do_compose and (event.epsilon > 0 or event.delta > 0):
      params = dp_accounting.pld.common.DifferentialPrivacyParameters(
          float(event.epsilon), float(event.delta))
      self._pld = self._pld.compose(
          pld.privacy_loss_distribution.from_privacy_parameters(
              params, self._value_discretization_interval).self_compose(count))
    return None


def _walk(event: dp_accounting.DpEvent):
  yield event
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    yield from _walk(event.event)
  elif isinstance(event, dp_accounting.ComposedDpEvent):
    for e in event.events:
      yield from _walk(e)
  elif isinstance(event, (dp_accounting.PoissonSampledDpEvent,
                          dp_accounting.SampledWithoutReplacementDpEvent,
                          dp_accounting.SampledWithReplacementDpEvent,
                          _events.TruncatedPoissonSampledDpEvent)):
    yield from _walk(event.event)


def infer_neighboring_relation(
    event: dp_accounting.DpEvent) -> NeighboringRelation:
  """REPLACE_ONE if the event samples without replacement, else ADD_OR_REMOVE_ONE."""
  if any(isinstance(e, dp_accounting.SampledWithoutReplacementDpEvent)
         for e in _walk(event)):
    return NeighboringRelation.REPLACE_ONE
  return NeighboringRelation.ADD_OR_REMOVE_ONE


def _untruncate(event: dp_accounting.DpEvent):
  """Replaces truncated Poisson events by Poisson ones; returns (event, tv).

  tv bounds the total-variation distance between the two compositions: a
  coupling draws the same Bernoulli selections, and the outputs differ only
  if some step overflowed its cap (union bound over steps).
  """
  if isinstance(event, dp_accounting.TruncatedSubsampledGaussianDpEvent):
    tv = _events.poisson_truncation_probability(
        event.dataset_size, event.sampling_probability,
        event.truncated_batch_size)
    return _events.gaussian_event(
        event.noise_multiplier,
        sampling_rate=event.sampling_probability), tv
  if isinstance(event, _events.TruncatedPoissonSampledDpEvent):
    tv = _events.poisson_truncation_probability(
        event.dataset_size, event.sampling_probability,
        event.truncated_batch_size)
    return dp_accounting.PoissonSampledDpEvent(
        float(event.sampling_probability), event.event), tv
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    inner, tv = _untruncate(event.event)
    return dp_accounting.SelfComposedDpEvent(inner, event.count), min(
        1.0, tv * event.count)
  if isinstance(event, dp_accounting.ComposedDpEvent):
    parts = [_untruncate(e) for e in event.events]
    return dp_accounting.ComposedDpEvent([p[0] for p in parts]), min(
        1.0, sum(p[1] for p in parts))
  return event, 0.0


def make_accountant(
    accountant: str = 'rdp',
    neighboring_relation: NeighboringRelation = (
        NeighboringRelation.ADD_OR_REMOVE_ONE)
) -> dp_accounting.PrivacyAccountant:
  """A fresh dp_accounting accountant (``"rdp"`` or ``"pld"``) with dpjax events."""
  if accountant == 'rdp':
    return _RdpAccountant(neighboring_relation=neighboring_relation)
  if accountant == 'pld':
    return _PldAccountant(neighboring_relation)
  raise ValueError(f'Expected accountant={accountant!r} in {ACCOUNTANTS}.')


def _composed(event, accountant, neighboring_relation):
  """(accountant with ``event`` composed, event as composed, truncation tv).

  Under RDP, truncated Poisson events are replaced by untruncated ones and
  their total-variation bound ``tv`` is returned (see ``_untruncate``).
  Under PLD, zCDP events (the discrete Gaussian) are rejected: dp_accounting
  has no PLD for them.
  """
  if accountant == 'pld' and any(
      isinstance(e, _distributed.EVENT_TYPES) for e in _walk(event)):
    raise ValueError(
        'accountant="pld" does not support the distributed discrete Gaussian '
        'or Skellam events (known by an RDP bound only); use '
        'accountant="rdp".')
  if accountant == 'pld' and any(
      isinstance(e, dp_accounting.ZCDpEvent) for e in _walk(event)):
    raise ValueError(
        'accountant="pld" does not support ZCDpEvent (e.g. '
        'discrete_gaussian_event): dp_accounting has no privacy loss '
        'distribution for zCDP. Use accountant="rdp", which composes it '
        'exactly as RDP(a) = xi + a rho.')
  tv = 0.0
  if accountant == 'rdp':
    event, tv = _untruncate(event)
  if neighboring_relation is None:
    neighboring_relation = infer_neighboring_relation(event)
  acc = make_accountant(accountant, neighboring_relation)
  acc.compose(event)
  return acc, event, tv


def _basic_epsilon(event) -> float:
  """Basic-composition epsilon if ``event`` is pure DP, else inf."""
  eps, delta_ = _events.basic_composition(event, strict=False)
  return eps if delta_ == 0 else math.inf


class Epsilon(float):
  """An epsilon (a float) that also says which accountant answered, and why.

  ``epsilon`` returns this type: it compares and computes as a float;
  ``accountant`` is the accountant that produced the number and ``note`` is
  empty unless the requested accountant could not answer on its own.

  Example:
    >>> e = Epsilon(1.5, accountant='pld', note='fallback')
    >>> e + 1, e.accountant
    (2.5, 'pld')
  """
  accountant: str
  note: str

  def __new__(cls, value: float, accountant: str, note: str = ''):
    self = super().__new__(cls, value)
    self.accountant = accountant
    self.note = note
    return self

  def __reduce__(self):
    return (Epsilon, (float(self), self.accountant, self.note))


def epsilon(event: dp_accounting.DpEvent, delta: float,
            accountant: str = 'rdp',
            neighboring_relation: NeighboringRelation | None = None, *,
            steps: int = 1) -> Epsilon:
  """Smallest epsilon such that ``event`` is (epsilon, delta)-DP.

  Args:
    event: any dp_accounting event, or dpjax's ``EpsilonDeltaDpEvent``.
    delta: target delta in (0, 1).
    accountant: ``"rdp"`` or ``"pld"``.
    neighboring_relation: default: replace-one if the event samples without
      replacement, add/remove-one otherwise.
    steps: ``event`` is composed this many times (as in ``calibrate``).

  Returns:
    epsilon as an ``Epsilon`` (a float; ``inf`` if the event is not private),
    whose ``accountant`` and ``note`` say how it was obtained.

  Raises:
    ValueError: bad delta, steps or accountant, or an event the accountant
      cannot compose.

  Truncated Poisson under RDP: with tv the total-variation bound of
  ``_untruncate`` and eps_hi the RDP epsilon of the untruncated event at
  delta / 2, the result is eps = eps_rdp(delta - (1 + e^eps_hi) tv). Since
  eps <= eps_hi, the truncated mechanism is (eps, delta)-DP. When that slack
  exceeds delta / 2 (too little noise for RDP to bound it), the answer comes
  from the PLD accountant, exact for truncation, and ``note`` says so; if
  the untruncated event is not private at all, the answer is ``inf``.

  Pure events: if the event is built only from pure ``EpsilonDeltaDpEvent``s,
  the result is the smaller of the accountant's and basic composition's.
  A lone ``EpsilonDeltaDpEvent(e, d > 0)`` (``steps=1``) is (e, delta)-DP
  for every ``delta`` >= d and has no known guarantee below d: the result is
  at most e (exactly e under RDP, which has no curve for d > 0), and inf
  for ``delta`` < d. This is how ``calibrate`` searches a mechanism known
  by its (epsilon, delta), e.g. the Binomial's trials.

  Example:
    >>> round(epsilon(gaussian_event(1.1, sampling_rate=256 / 60000,
    ...                              steps=14062), 1e-5), 4)
    2.5966
    >>> epsilon(gaussian_event(1.1, sampling_rate=256 / 60000), 1e-5,
    ...         steps=14062) == epsilon(gaussian_event(
    ...             1.1, sampling_rate=256 / 60000, steps=14062), 1e-5)
    True
  """
  _validate.open_unit(delta=delta)
  _validate.positive_int(steps=steps)
  if steps > 1:
    event = dp_accounting.SelfComposedDpEvent(event, steps)
  own = _own_epsilon(event, delta)
  if own is not None and accountant == 'rdp':
    return Epsilon(own, accountant)
  requested = event
  acc, event, tv = _composed(event, accountant, neighboring_relation)
  note = ''
  if tv == 0:
    eps = acc.get_epsilon(delta)
  else:
    eps_hi = acc.get_epsilon(delta / 2)
    slack = (1 + math.exp(min(eps_hi, 700.0))) * tv
    if slack <= delta / 2:
      eps = acc.get_epsilon(delta - slack)
    elif math.isinf(eps_hi):
      eps = math.inf
      note = 'the untruncated event is not private at any epsilon'
    else:
      note = (f'RDP cannot bound the Poisson truncation (it costs delta '
              f'{slack:.3g} > delta/2 = {delta / 2:.3g}); answered by the PLD '
              'accountant, which is exact for truncation')
      pld_acc, _, _ = _composed(requested, 'pld', neighboring_relation)
      eps, accountant = pld_acc.get_epsilon(delta), 'pld'
  eps = min(eps, _basic_epsilon(event))
  return Epsilon(eps if own is None else min(eps, own), accountant, note)


def _own_epsilon(event, delta) -> float | None:
  """For a lone ``EpsilonDeltaDpEvent(e, d)`` with d > 0: e if d <= delta,
  inf if d > delta (nothing is known below its delta); else None."""
  if isinstance(event, _events.EpsilonDeltaDpEvent) and event.delta > 0:
    return float(event.epsilon) if event.delta <= delta else math.inf
  return None


def delta(event: dp_accounting.DpEvent, epsilon: float,
          accountant: str = 'rdp',
          neighboring_relation: NeighboringRelation | None = None) -> float:
  """Smallest delta such that ``event`` is (epsilon, delta)-DP.

  Under RDP, a truncated Poisson event adds its slack (1 + e^epsilon) tv.

  Example:
    >>> delta(gaussian_event(1.1, sampling_rate=256 / 60000, steps=14062),
    ...       3.0, 'pld') < 1e-5
    True
  """
  _validate.non_negative(epsilon=epsilon)
  acc, event, tv = _composed(event, accountant, neighboring_relation)
  if _basic_epsilon(event) <= epsilon:
    return 0.0
  d = acc.get_delta(epsilon) + (1 + math.exp(min(epsilon, 700.0))) * tv
  return float(min(1.0, d))


def calibrate(make_event: Callable[[float], dp_accounting.DpEvent],
              target_epsilon: float, delta: float, accountant: str = 'rdp',
              *, steps: int = 1, start: float = 1.0,
              ceiling: float | None = None, rtol: float = 1e-4) -> float:
  """The least noise whose event meets the target epsilon: the one calibrator.

  Searches x for the smallest with ``epsilon(make_event(x), delta,
  accountant, steps=steps) <= target_epsilon`` (``dpjax._solve``). Every
  noise is calibrated this way: a noise multiplier
  (``make_event=sampler.dp_event`` or ``lambda z: gaussian_event(z,
  sampling_rate=q)``), a stddev (``lambda s: gaussian_event(s / Delta)``),
  the stddev of a distributed protocol or the trials of a Binomial
  (``make_event`` returns the mechanism's ``EpsilonDeltaDpEvent``).

  A float ``start`` searches reals: doubling and halving from it, then
  geometric bisection to relative width ``rtol``. An integer ``start``
  searches integers (e.g. trials), exactly: doubling from it, then
  bisection; every integer below ``start`` is assumed to miss the target
  (e.g. below a theorem's condition, where ``make_event`` is not defined).

  Args:
    make_event: ``x -> DpEvent`` of one step; its epsilon must fall as x
      grows (``NonPrivateDpEvent`` where no guarantee holds).
    target_epsilon: > 0.
    delta: in (0, 1).
    accountant: ``"rdp"`` or ``"pld"``.
    steps: the step event is composed this many times.
    start: first point tried (> 0); its type chooses the search.
    ceiling: search ceiling (default 1e4 for reals, 2^31 - 1 for integers).
    rtol: relative width of the final bracket (reals only).

  Returns:
    x with ``epsilon(steps x make_event(x), delta) <= target_epsilon`` (the
    upper end of the bracket, so the target is never exceeded): a float, or
    the smallest such integer.

  Raises:
    ValueError: if the target is unreachable below ``ceiling``.

  Example:
    >>> s = calibrate(lambda s: gaussian_event(s, sampling_rate=0.01), 2.0,
    ...               1e-5, steps=1000)
    >>> epsilon(gaussian_event(s, sampling_rate=0.01, steps=1000), 1e-5) <= 2
    True
    >>> calibrate(lambda m: EpsilonDeltaDpEvent(100 / m, 1e-5), 0.3, 1e-5,
    ...           start=1)
    334
  """
  _validate.positive(target_epsilon=target_epsilon, rtol=rtol, start=start)
  _validate.open_unit(delta=delta)
  _validate.positive_int(steps=steps)
  integer = isinstance(start, (int, np.integer)) and not isinstance(
      start, bool)
  if ceiling is None:
    ceiling = 2**31 - 1 if integer else 1e4
  _validate.positive(ceiling=ceiling)

  def eps_of(x):
    return epsilon(make_event(x), delta, accountant, steps=steps)

  def ok(x):
    return eps_of(x) <= target_epsilon

  if integer:
    _validate.integer_at_least(int(start), ceiling=ceiling)

    def unreachable_int(hi):
      raise ValueError(
          f'target_epsilon={target_epsilon} is unreachable at delta={delta} '
          f'with x <= ceiling={ceiling}: epsilon={eps_of(hi):.6g} there.')

    return _solve.smallest_int(ok, start=int(start), ceiling=int(ceiling),
                               unreachable=unreachable_int)

  def unreachable(hi):
    raise ValueError(
        f'target_epsilon={target_epsilon} is unreachable at delta={delta}: '
        f'noise_multiplier={hi:g} still gives epsilon={eps_of(hi):.4g}.')

  return _solve.smallest_float(ok, start=float(start), rtol=rtol,
                               ceiling=float(ceiling), floor=1e-6,
                               unreachable=unreachable)


def rdp_curve(event: dp_accounting.DpEvent, orders: Sequence[float],
              neighboring_relation: NeighboringRelation | None = None
              ) -> np.ndarray:
  """The RDP of ``event`` at each of ``orders``, as dp_accounting computes it.

  Curves add under composition, so a caller composing many events drawn from
  a few distinct ones can compute each distinct curve once, sum them with
  their counts and convert with ``epsilon_from_rdp``.

  Example:
    >>> rdp_curve(dp_accounting.GaussianDpEvent(2.0), [2.0, 4.0]).tolist()
    [0.25, 0.5]
  """
  if neighboring_relation is None:
    neighboring_relation = infer_neighboring_relation(event)
  acc = _RdpAccountant(orders=[float(a) for a in orders],
                       neighboring_relation=neighboring_relation)
  acc.compose(event)
  return np.asarray(acc._rdp, np.float64).copy()  # pylint: disable=protected-access


def epsilon_from_rdp(orders: Sequence[float], rdp: Sequence[float],
                     delta: float) -> float:
  """Smallest epsilon at ``delta`` from an RDP curve (dp_accounting's conversion).

  Example:
    >>> round(epsilon_from_rdp([2.0, 4.0], [0.25, 0.5], 1e-5), 3) > 0
    True
  """
  _validate.open_unit(delta=delta)
  return float(rdp_accountant_lib.compute_epsilon(
      [float(a) for a in orders], np.asarray(rdp, np.float64), delta)[0])
