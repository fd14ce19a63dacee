"""DpEvents for dpjax mechanisms, and the ones dp_accounting lacks."""

import math

import attr
import dp_accounting

from dpjax import _validate
from dpjax._composition import repeated


@attr.s(frozen=True, slots=True, auto_attribs=True)
class EpsilonDeltaDpEvent(dp_accounting.DpEvent):
  """A mechanism known only to be (epsilon, delta)-DP (pure DP if delta = 0).

  dp_accounting has no such event. dpjax's accountants treat it as follows:
  basic composition sums epsilons and deltas; the PLD accountant uses the
  pessimistic PLD of an (epsilon, delta)-DP mechanism (dp_accounting
  ``from_privacy_parameters``); the RDP accountant uses, for delta = 0,
  RDP(a) <= min(epsilon, a epsilon^2 / 2) (Bun & Steinke 2016, Prop. 3.3) and
  rejects delta > 0 (no finite RDP).

  Attributes:
    epsilon: epsilon >= 0.
    delta: delta in [0, 1).
  """
  epsilon: float
  delta: float = 0.0


def pure_dp_event(epsilon: float, *, steps: int = 1) -> dp_accounting.DpEvent:
  """``steps`` epsilon-DP releases: the planning event of pure DP.

  Any mechanism known only to be epsilon-DP (a noisy count, a histogram, a
  tree's leaves) is planned and accounted through this event; mechanisms
  whose accounting is tighter than their epsilon keep their own event
  (``laplace_event``).

  Args:
    epsilon: epsilon >= 0 of one release.
    steps: releases (> 0); one is ``EpsilonDeltaDpEvent(epsilon, 0)``, more
      its ``SelfComposedDpEvent``.

  Example:
    >>> pure_dp_event(0.5)
    EpsilonDeltaDpEvent(epsilon=0.5, delta=0.0)
    >>> basic_composition(pure_dp_event(0.5, steps=4))
    (2.0, 0.0)
  """
  _validate.non_negative(epsilon=epsilon)
  return repeated(EpsilonDeltaDpEvent(float(epsilon), 0.0), steps)


def laplace_event(epsilon: float, *, steps: int = 1) -> dp_accounting.DpEvent:
  """``steps`` epsilon-DP Laplace releases: ``LaplaceDpEvent(1 / epsilon)``.

  For Laplace noise of scale b on a query of L1 sensitivity S (over the
  neighbouring relation in use), epsilon = S / b. Unlike ``pure_dp_event``,
  dp_accounting composes it with the Laplace PLD (``accountant="pld"``) or
  its RDP (Mironov 2017), which are tighter than a generic epsilon-DP
  mechanism's; ``basic_composition`` counts it as epsilon.

  Args:
    epsilon: epsilon > 0 of one release (S / b).
    steps: releases (> 0); more than one is the ``SelfComposedDpEvent``.

  Example:
    >>> laplace_event(0.5)
    LaplaceDpEvent(noise_multiplier=2.0)
    >>> basic_composition(laplace_event(0.5, steps=3))
    (1.5, 0.0)
  """
  _validate.positive(epsilon=epsilon)
  return repeated(dp_accounting.LaplaceDpEvent(1.0 / float(epsilon)), steps)


def gaussian_event(noise_multiplier: float, *, sampling_rate: float = 1.0,
                   steps: int = 1) -> dp_accounting.DpEvent:
  """The planning event of the Gaussian mechanism (DP-SGD's, every Gaussian).

  Every Gaussian release is this event whatever its argument convention:
  noise of stddev sigma on a query of L2 sensitivity Delta is
  ``gaussian_event(sigma / Delta)``; DP-SGD at noise multiplier z, Poisson
  rate q and T steps is ``gaussian_event(z, sampling_rate=q, steps=T)``.
  A noise multiplier of 0 is the non-private Gaussian (epsilon = inf).

  Args:
    noise_multiplier: noise stddev over the L2 sensitivity (>= 0).
    sampling_rate: Poisson sampling rate q in (0, 1]; 1 means no sampling.
    steps: compositions (> 0).

  Returns:
    ``GaussianDpEvent(z)``, inside ``PoissonSampledDpEvent(q, .)`` when
    q < 1, self-composed ``steps`` times when steps > 1 (add/remove-one
    neighbours under sampling).

  References:
    Abadi et al. 2016; Mironov, Talwar, Zhang 2019 (RDP of the sampled
    Gaussian); Balle & Wang 2018 (the exact profile the PLD evaluates).

  Example:
    >>> gaussian_event(2.0)
    GaussianDpEvent(noise_multiplier=2.0)
    >>> gaussian_event(1.1, sampling_rate=0.01, steps=100).count
    100
  """
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  event = dp_accounting.GaussianDpEvent(float(noise_multiplier))
  if sampling_rate != 1:
    event = dp_accounting.PoissonSampledDpEvent(float(sampling_rate), event)
  return repeated(event, steps)


def discrete_gaussian_event(sigma: float, l2_sensitivity: float = 1.0, *,
                            steps: int = 1) -> dp_accounting.DpEvent:
  """``steps`` releases of the discrete Gaussian mechanism, as zCDP.

  Adding N_Z(0, sigma^2) i.i.d. to each coordinate of an integer-valued query
  whose values on neighbouring datasets differ by an integer vector of L2
  norm at most ``l2_sensitivity`` is rho-zCDP with
  rho = l2_sensitivity^2 / (2 sigma^2), i.e. RDP(a) = a rho for all a > 1.
  On the grid eta Z give both sigma and the sensitivity in the same units
  (the ratio is what counts): the event of ``add_discrete_gaussian_noise``.

  Args:
    sigma: noise scale (> 0), in the query's lattice units.
    l2_sensitivity: Delta (>= 0), an L2 norm of a lattice vector.
    steps: releases (> 0); more than one is the ``SelfComposedDpEvent``.

  Returns:
    ``dp_accounting.ZCDpEvent(rho)``. The RDP accountant composes it exactly;
    dp_accounting's PLD accountant does not support it (``epsilon(...,
    'pld')`` raises).

  Privacy:
    rho-zCDP (Bun & Steinke 2016), hence (rho + 2 sqrt(rho log(1/delta)),
    delta)-DP for every delta; the RDP conversion used by ``epsilon`` is at
    least as tight.

  References:
    Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020, Thm. 14 (multivariate, independent coordinates).

  Example:
    >>> discrete_gaussian_event(2.0, 1.0)
    ZCDpEvent(rho=0.125, xi=0.0)
  """
  _validate.positive(sigma=sigma)
  _validate.non_negative(l2_sensitivity=l2_sensitivity)
  return repeated(dp_accounting.ZCDpEvent(
      float(l2_sensitivity)**2 / (2 * float(sigma)**2)), steps)


def poisson_truncation_probability(num_examples: int, sampling_rate: float,
                                   max_batch_size: int) -> float:
  """P[Bin(num_examples + 1, q) > max_batch_size]: one step's overflow chance.

  Uses num_examples + 1 so the bound also holds on an add-one neighbour.
  """
  from scipy import stats  # pylint: disable=g-import-not-at-top
  if max_batch_size >= num_examples + 1:
    return 0.0
  return float(stats.binom.sf(max_batch_size, num_examples + 1,
                              sampling_rate))


@attr.s(frozen=True, slots=True, auto_attribs=True)
class TruncatedPoissonSampledDpEvent(dp_accounting.DpEvent):
  """Poisson sampling capped at a batch size, around any inner event.

  ``dp_accounting.TruncatedSubsampledGaussianDpEvent`` for mechanisms other
  than the Gaussian (e.g. the exact discrete Gaussian of DP-SGD): each of
  ``dataset_size`` examples joins with probability ``sampling_probability``
  and a draw above ``truncated_batch_size`` keeps a uniform subset of that
  size. The RDP accountant composes the untruncated
  ``PoissonSampledDpEvent`` and adds the overflow chance
  (``poisson_truncation_probability``) as a total-variation slack to delta
  (``epsilon``); add/remove-one neighbours.

  Attributes:
    dataset_size: N.
    sampling_probability: q in (0, 1].
    truncated_batch_size: the cap.
    event: the mechanism run on the batch.
  """
  dataset_size: int
  sampling_probability: float
  truncated_batch_size: int
  event: dp_accounting.DpEvent


def basic_composition(event: dp_accounting.DpEvent,
                      strict: bool = True) -> tuple[float, float]:
  """(sum of epsilons, sum of deltas) over ``EpsilonDeltaDpEvent`` leaves.

  Args:
    event: built from ``EpsilonDeltaDpEvent``, ``LaplaceDpEvent``,
      ``NoOpDpEvent``, ``SelfComposedDpEvent`` and ``ComposedDpEvent``.
    strict: raise on any other event (otherwise return (inf, 1)).

  Returns:
    The basic-composition guarantee (epsilon, delta) (Dwork & Roth 2014,
    Thm. 3.16).

  Example:
    >>> basic_composition(dp_accounting.SelfComposedDpEvent(
    ...     pure_dp_event(0.5), 4))
    (2.0, 0.0)
  """
  if isinstance(event, EpsilonDeltaDpEvent):
    return float(event.epsilon), float(event.delta)
  if isinstance(event, dp_accounting.NoOpDpEvent):
    return 0.0, 0.0
  if isinstance(event, dp_accounting.LaplaceDpEvent):
    return (math.inf if event.noise_multiplier == 0 else
            1.0 / float(event.noise_multiplier)), 0.0
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    eps, delta = basic_composition(event.event, strict)
    return eps * event.count, min(1.0, delta * event.count)
  if isinstance(event, dp_accounting.ComposedDpEvent):
    parts = [basic_composition(e, strict) for e in event.events]
    return (sum(p[0] for p in parts),
            min(1.0, sum(p[1] for p in parts)))
  if strict:
    raise ValueError(
        f'basic_composition supports EpsilonDeltaDpEvent and compositions of '
        f'it; got {type(event).__name__}.')
  return math.inf, 1.0


def replace_one_event(event: dp_accounting.DpEvent) -> dp_accounting.DpEvent:
  """The replace-one guarantee of an event known under add/remove-one.

  Replacing one example is removing it and adding another, so this is
  group privacy of size 2: an (epsilon, delta)-DP event becomes (2 epsilon,
  (1 + e^epsilon) delta)-DP (Dwork & Roth 2014, Thm. 2.2, applied twice);
  a Gaussian mechanism of noise multiplier s (noise over the add/remove
  sensitivity) has at most twice the sensitivity, so s / 2; a Laplace one
  becomes the pure 2 / s-DP event (dp_accounting's RDP has no replace-one
  Laplace); rho-zCDP becomes 4 rho-zCDP (Bun & Steinke 2016, Prop. 1.9). Compositions
  convert term by term. Events amplified by subsampling have no such
  conversion here: account them under the relation of their sampler.

  Raises:
    ValueError: an event without a conversion (naming it).

  Example:
    >>> replace_one_event(pure_dp_event(1.0))
    EpsilonDeltaDpEvent(epsilon=2.0, delta=0.0)
  """
  if isinstance(event, (dp_accounting.NoOpDpEvent,
                        dp_accounting.NonPrivateDpEvent)):
    return event
  if isinstance(event, EpsilonDeltaDpEvent):
    eps = float(event.epsilon)
    return EpsilonDeltaDpEvent(
        2 * eps, min(1.0, (1 + math.exp(min(eps, 700.0))) * event.delta))
  if isinstance(event, dp_accounting.GaussianDpEvent):
    return dp_accounting.GaussianDpEvent(event.noise_multiplier / 2)
  if isinstance(event, dp_accounting.LaplaceDpEvent):  # pure 2 / b-DP
    if event.noise_multiplier == 0:
      return dp_accounting.NonPrivateDpEvent()
    return replace_one_event(pure_dp_event(1.0 / event.noise_multiplier))
  if isinstance(event, dp_accounting.ZCDpEvent) and event.xi == 0:
    return dp_accounting.ZCDpEvent(4 * event.rho)
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    return dp_accounting.SelfComposedDpEvent(replace_one_event(event.event),
                                             event.count)
  if isinstance(event, dp_accounting.ComposedDpEvent):
    return dp_accounting.ComposedDpEvent(
        [replace_one_event(e) for e in event.events])
  raise ValueError(f'event: no replace-one conversion of '
                   f'{type(event).__name__} is known.')
