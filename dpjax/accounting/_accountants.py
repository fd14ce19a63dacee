"""epsilon, delta and noise calibration on top of dp_accounting.

Two accountants, chosen by name: ``"rdp"`` (dp_accounting's RdpAccountant,
Mironov 2017; conversion to (eps, delta) of Balle et al. 2020) and ``"pld"``
(dp_accounting's PLDAccountant, pessimistic connect-the-dots discretization
at an interval that grows with the event's epsilon, so that every event
answers in about a second). Both are extended to ``EpsilonDeltaDpEvent``;
the PLD one also to sampling without replacement under replace-one.
Truncated Poisson events are accounted as their untruncated event plus the
truncation's probability in delta (``_truncation.untruncate``).
"""

import math
from typing import Callable, Sequence

import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant as rdp_accountant_lib
import numpy as np

from dpjax import _solve
from dpjax import _validate
from dpjax.accounting import _balls_in_bins
from dpjax.accounting import _distributed
from dpjax.accounting import _events
from dpjax.accounting import _extended_accountants
from dpjax.accounting import _truncation

NeighboringRelation = dp_accounting.NeighboringRelation
# Accountants that ``epsilon`` and ``calibrate`` accept (``accountant=``).
ACCOUNTANTS = ('rdp', 'pld')

# The PLD's discretization interval: dp_accounting's default 1e-4, or
# coarser where that grid would be large: epsilon / _PLD_POINTS (large
# epsilon: small noise, many steps) or one step's privacy-loss range /
# _STEP_POINTS (small noise), at most _PLD_MAX_INTERVAL. The pessimistic
# discretization is an upper bound at any interval.
_PLD_INTERVAL = 1e-4
_PLD_MAX_INTERVAL = 1.0
_PLD_POINTS = 1e5
_STEP_POINTS = 1e5


def _pld_interval(event, delta, neighboring_relation) -> float:
  """The interval for ``event``, from its RDP epsilon (a cheap estimate)
  and its smallest Gaussian noise multiplier z: a Gaussian step's loss
  spans about 10 / z + 1 / (2 z^2) (tails of mass e^-50 cut). Above
  ``_PLD_MAX_INTERVAL`` the PLD is not computed (``_composed``)."""
  gaussians = [float(e.noise_multiplier)
               for e in _extended_accountants.walk(event)
               if isinstance(e, dp_accounting.GaussianDpEvent)]
  z = min(gaussians, default=math.inf)
  step_range = 10 / z + 1 / (2 * z * z) if z > 0 else 0.0
  try:
    acc = make_accountant('rdp', neighboring_relation)
    acc.compose(event)
    scale = acc.get_epsilon(delta)
  except (ValueError, dp_accounting.UnsupportedEventError):
    scale = 0.0
  if not math.isfinite(scale):
    scale = 0.0
  return max(_PLD_INTERVAL, scale / _PLD_POINTS, step_range / _STEP_POINTS)


def make_accountant(
    accountant: str = 'rdp',
    neighboring_relation: NeighboringRelation = (
        NeighboringRelation.ADD_OR_REMOVE_ONE)
) -> dp_accounting.PrivacyAccountant:
  """A fresh dp_accounting accountant (``"rdp"`` or ``"pld"``) with dpjax
  events."""
  if accountant == 'rdp':
    return _extended_accountants.RdpAccountant(
        neighboring_relation=neighboring_relation)
  if accountant == 'pld':
    return _extended_accountants.PldAccountant(neighboring_relation)
  raise ValueError(f'Expected accountant={accountant!r} in {ACCOUNTANTS}.')


class _PldTooCoarse(Exception):
  """The PLD's grid would need an interval above ``_PLD_MAX_INTERVAL``."""


def _composed(event, accountant, neighboring_relation, delta):
  """The accountant with ``event`` composed.

  Under PLD, zCDP events (the discrete Gaussian) and the distributed events
  are rejected: dp_accounting has no PLD for them. ``delta`` (the target)
  sets the PLD's discretization interval (``_pld_interval``); an event
  whose RDP epsilon is so large that the interval would exceed
  ``_PLD_MAX_INTERVAL`` raises ``_PldTooCoarse`` (``epsilon`` answers by
  RDP then).
  """
  if accountant == 'pld' and any(
      isinstance(e, _distributed.EVENT_TYPES)
      for e in _extended_accountants.walk(event)):
    raise ValueError(
        'accountant="pld" does not support the distributed discrete Gaussian '
        'or Skellam events (known by an RDP bound only); use '
        'accountant="rdp".')
  if accountant == 'pld' and any(
      isinstance(e, _balls_in_bins.BallsInBinsDpEvent)
      for e in _extended_accountants.walk(event)):
    raise ValueError('accountant="pld" does not support BallsInBinsDpEvent '
                     '(known by an RDP bound only); use accountant="rdp".')
  if accountant == 'pld' and any(
      isinstance(e, dp_accounting.ZCDpEvent)
      for e in _extended_accountants.walk(event)):
    raise ValueError(
        'accountant="pld" does not support ZCDpEvent (e.g. '
        'discrete_gaussian_event): dp_accounting has no privacy loss '
        'distribution for zCDP. Use accountant="rdp", which composes it '
        'exactly as RDP(a) = xi + a rho.')
  if neighboring_relation is None:
    neighboring_relation = (
        _extended_accountants.infer_neighboring_relation(event))
  if accountant == 'pld':
    interval = _pld_interval(_truncation.untruncate(event)[0], delta,
                             neighboring_relation)
    if interval > _PLD_MAX_INTERVAL:
      raise _PldTooCoarse(interval)
    acc = _extended_accountants.PldAccountant(neighboring_relation, interval)
  else:
    acc = make_accountant(accountant, neighboring_relation)
  acc.compose(event)
  return acc


def _noiseless(event) -> bool:
  """Whether a Gaussian part of ``event`` has noise multiplier 0 (then
  inf is the answer, at once: dp_accounting's RDP of a sampled noiseless
  Gaussian divides by zero)."""
  return any(isinstance(e, (dp_accounting.GaussianDpEvent,
                            dp_accounting.TruncatedSubsampledGaussianDpEvent))
             and e.noise_multiplier == 0
             for e in _extended_accountants.walk(event))


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

  Truncated Poisson (either accountant): the untruncated event at
  delta - tv, tv the chance that some step's other examples fill the cap
  (``_truncation.untruncate``: no e^eps factor). Where tv exceeds
  delta / 2 (a cap too small for the run), the PLD accountant composes the
  truncated event itself (dp_accounting's exact PLD) and ``note`` says so.

  Balls-in-bins epochs (``BallsInBinsDpEvent``): RDP only; their
  ``truncation_probability`` is tv as above (RDP at delta - tv).

  Speed: the PLD's discretization interval grows with the event's epsilon
  and one step's loss range (``_pld_interval``; pessimistic at any
  interval), and where it would exceed 1 (epsilon in the hundreds of
  thousands) RDP answers and ``note`` says so. dp_accounting's RDP warnings
  that a series failed to converge are dropped (that order is left out,
  an upper bound still) and counted in ``note``. A noise multiplier of 0
  gives inf at once.

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
  if _noiseless(event):
    return Epsilon(math.inf, accountant, 'not private: a Gaussian part has '
                   'noise multiplier 0')
  if neighboring_relation is None:
    neighboring_relation = (
        _extended_accountants.infer_neighboring_relation(event))
  untruncated, tv = _truncation.untruncate(event)
  note = ''
  with _extended_accountants.quiet_convergence() as quiet:
    try:
      if tv <= delta / 2:
        eps = _composed(untruncated, accountant, neighboring_relation,
                        delta).get_epsilon(delta - tv)
      elif any(isinstance(e, _balls_in_bins.BallsInBinsDpEvent)
               for e in _extended_accountants.walk(event)):
        note = (f'the balls-in-bins truncation probability {tv:.3g} is '
                f'more than delta/2 = {delta / 2:.3g} (a cap too small '
                'for the run); answered by RDP at delta - tv')
        eps = (_composed(untruncated, 'rdp', neighboring_relation,
                         delta).get_epsilon(delta - tv)
               if tv < delta else math.inf)
        accountant = 'rdp'
      else:
        note = ('a step\'s other examples fill the Poisson cap with '
                f'probability {tv:.3g} over the run, more than delta/2 = '
                f'{delta / 2:.3g}; answered by the PLD accountant on the '
                'truncated event')
        eps = _composed(event, 'pld', neighboring_relation,
                        delta).get_epsilon(delta)
        accountant = 'pld'
    except _PldTooCoarse as e:
      note = (f'the PLD would need a grid interval of {e.args[0]:.3g} (so '
              'little noise that epsilon is huge); answered by the RDP '
              'accountant')
      accountant = 'rdp'
      eps = (_composed(untruncated, 'rdp', neighboring_relation,
                       delta).get_epsilon(delta - tv)
             if tv < delta else math.inf)
  if quiet.count:
    note = '; '.join(filter(None, [note, (
        f'dp_accounting\'s RDP series did not converge at {quiet.count} '
        'order(s), left out (their RDP counted as infinite)')]))
  eps = min(eps, _basic_epsilon(untruncated))
  if math.isinf(eps) and not note:
    note = ('the event is not private at this delta (a noise multiplier of '
            '0, or a part that is not private)')
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

  A truncated Poisson event adds tv (see ``epsilon``) to the untruncated
  event's delta.

  Example:
    >>> delta(gaussian_event(1.1, sampling_rate=256 / 60000, steps=14062),
    ...       3.0, 'pld') < 1e-5
    True
  """
  _validate.non_negative(epsilon=epsilon)
  if neighboring_relation is None:
    neighboring_relation = (
        _extended_accountants.infer_neighboring_relation(event))
  untruncated, tv = _truncation.untruncate(event)
  if _basic_epsilon(untruncated) <= epsilon:
    return 0.0
  if _noiseless(event):
    return 1.0
  with _extended_accountants.quiet_convergence():
    acc = _composed(untruncated, accountant, neighboring_relation, 1e-6)
    d = acc.get_delta(epsilon) + tv
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
    neighboring_relation = (
        _extended_accountants.infer_neighboring_relation(event))
  acc = _extended_accountants.RdpAccountant(orders=[float(a) for a in orders],
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
