"""Trade-off curves (f-DP) of a DpEvent, and its mu-GDP where it is one.

The trade-off curve of a mechanism is the least type II error beta of any
test between neighbouring outputs at type I error alpha (Dong, Roth & Su
2022, "Gaussian Differential Privacy", Def. 2.1); a composition of Gaussian
mechanisms is mu-GDP, with curve Phi(Phi^-1(1 - alpha) - mu) (ibid.,
Cor. 3.3). Other events get theirs from the privacy profile of the PLD
accountant: f(alpha) = sup_eps max(0, 1 - delta(eps) - e^eps alpha,
e^-eps (1 - delta(eps) - alpha)) (ibid., Prop. 2.12 and 2.5).
"""

import math

import dp_accounting
import numpy as np
from scipy import stats

from dpjax import _validate
from dpjax.accounting import _accountants
from dpjax.accounting import _extended_accountants
from dpjax.accounting import _truncation

# Epsilons at which the PLD's profile is read (0 to its epsilon at
# _FLOOR_DELTA): the supremum over this grid is a valid, slightly smaller
# curve than the supremum over all epsilon.
_GRID = 4001
_FLOOR_DELTA = 1e-12


def gdp_mu(event: dp_accounting.DpEvent) -> float | None:
  """mu such that ``event`` is mu-GDP, if it composes Gaussian mechanisms only.

  T Gaussian mechanisms of noise multipliers z_i compose to
  sqrt(sum 1 / z_i^2)-GDP, exactly (Dong, Roth & Su 2022, Cor. 3.3); a
  multiplier of 0 gives inf. None for any other event (subsampled ones
  included: their curve is not a Gaussian one).

  Example:
    >>> gdp_mu(dp_accounting.SelfComposedDpEvent(
    ...     dp_accounting.GaussianDpEvent(2.0), 4))
    1.0
  """
  square = _mu_squared(event)
  return None if square is None else math.sqrt(square)


def _mu_squared(event) -> float | None:
  if isinstance(event, dp_accounting.NoOpDpEvent):
    return 0.0
  if isinstance(event, dp_accounting.GaussianDpEvent):
    z = float(event.noise_multiplier)
    return math.inf if z == 0 else 1.0 / z**2
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    inner = _mu_squared(event.event)
    return None if inner is None else event.count * inner
  if isinstance(event, dp_accounting.ComposedDpEvent):
    parts = [_mu_squared(e) for e in event.events]
    return None if any(p is None for p in parts) else sum(parts)
  return None


def tradeoff_curve(event: dp_accounting.DpEvent, alphas,
                   neighboring_relation=None) -> np.ndarray:
  """beta at each alpha: the f-DP trade-off curve of ``event``.

  Exact for compositions of Gaussian mechanisms (``gdp_mu``):
  Phi(Phi^-1(1 - alpha) - mu). Otherwise from the PLD accountant's
  pessimistic privacy profile delta(eps) (plus a truncated Poisson event's
  tv, as in ``epsilon``) on a grid of epsilons, which gives a curve never
  above the true one: a valid f-DP guarantee.

  Args:
    event: a DpEvent the PLD accountant composes (``epsilon``'s events).
    alphas: type I errors in [0, 1] (a float or an array).
    neighboring_relation: as in ``epsilon``.

  Returns:
    float64 array of betas, the shape of ``alphas``.

  Raises:
    TypeError: non-numeric alphas.
    ValueError: alphas outside [0, 1] or not finite.

  Example:
    >>> beta = tradeoff_curve(dp_accounting.GaussianDpEvent(1.0), [0.05])
    >>> round(float(beta[0]), 4)
    0.7405
  """
  alphas = _alphas(alphas)
  mu = gdp_mu(event)
  if mu is not None:
    if math.isinf(mu):
      return np.zeros_like(alphas)
    return np.asarray(stats.norm.cdf(stats.norm.isf(alphas) - mu), np.float64)
  eps, deltas = _profile(event, neighboring_relation)
  if deltas is None:  # not private, or too little noise for a PLD
    return np.zeros_like(alphas)
  keep = 1.0 - deltas[None, :]
  a = alphas.reshape(-1, 1)
  lines = np.maximum(keep - np.exp(eps)[None, :] * a,
                     np.exp(-eps)[None, :] * (keep - a))
  return np.clip(lines.max(axis=1), 0.0, 1.0 - alphas.reshape(-1)).reshape(
      alphas.shape)


def _alphas(alphas) -> np.ndarray:
  try:
    values = np.asarray(alphas, np.float64)
  except (TypeError, ValueError) as e:
    raise TypeError(f'alphas: expected numbers, got {alphas!r}.') from e
  if not np.all(np.isfinite(values)) or np.any(values < 0) or np.any(
      values > 1):
    raise ValueError(f'alphas: expected finite values in [0, 1], got '
                     f'{alphas!r}.')
  return values


def _profile(event, neighboring_relation):
  """(epsilons, deltas) of the PLD profile, deltas None if not private."""
  if neighboring_relation is None:
    neighboring_relation = _extended_accountants.infer_neighboring_relation(
        event)
  untruncated, tv = _truncation.untruncate(event)
  with _extended_accountants.quiet_convergence():
    try:
      acc = _accountants._composed(  # pylint: disable=protected-access
          untruncated, 'pld', neighboring_relation, _FLOOR_DELTA)
    except _accountants._PldTooCoarse:  # pylint: disable=protected-access
      return None, None  # epsilon is huge: only the trivial curve
  if acc._contains_non_dp_event:  # pylint: disable=protected-access
    return None, None
  top = acc.get_epsilon(_FLOOR_DELTA)
  eps = np.linspace(0.0, max(float(top), 1e-6), _GRID)
  profile = acc._pld.get_delta_for_epsilon  # pylint: disable=protected-access
  deltas = np.asarray(profile(eps), np.float64)
  return eps, np.minimum(1.0, deltas + tv)
