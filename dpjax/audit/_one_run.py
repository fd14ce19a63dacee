"""One-run privacy auditing (Steinke, Nasr & Jagielski 2023).

Each of m canaries is included in the training data independently with
probability 1/2 (S_i = +1 included, -1 excluded). After ONE run the auditor
guesses S_i for r of the canaries (abstaining on the others) from a score
per canary, and counts v correct guesses. Under (eps, delta)-DP the number of
correct guesses W is stochastically dominated by a worst case that the paper
bounds (its main theorem, evaluated by its Algorithm 2):

    P[W >= v] <= P[B >= v] + 2 m delta max_{1<=i<=v} P[v - i <= B < v] / i,

with B ~ Binomial(r, e^eps / (1 + e^eps)), the number of correct guesses of
eps-DP randomized response. The largest eps whose right side is still at
most 1 - confidence is a lower bound on the run's epsilon that holds with
the stated confidence: a bound above a mechanism's stated epsilon refutes
the statement. With delta = 0 it is the exact binomial tail test.

Unlike a distinguishing audit (``distinguishing_audit``) this needs a single
run of the mechanism, at the price of looseness: r guesses prove at most
about ln(r / ln(1 / (1 - confidence))) even when all are correct, and the
bound is far from the stated epsilon at small epsilon (the paper's finding).

Example:
  >>> round(one_run_epsilon_lower_bound(90, 100, 1000, delta=0.0), 3)
  1.631
"""

import math
from typing import Callable, NamedTuple

import jax
import numpy as np
from scipy import special
from scipy import stats

from dpjax import _keys
from dpjax import _validate

_STREAM = _keys.register('one_run_audit', __name__)

_EPS_TOL = 1e-7


class OneRunResult(NamedTuple):
  """A one-run audit's outcome.

  Attributes:
    epsilon_lower_bound: eps such that the run is not (eps', delta)-DP for
      any eps' < eps, with probability >= ``confidence`` (0 without
      evidence).
    num_correct: v, the correct guesses.
    num_guesses: r, the guesses made (abstentions excluded).
    num_canaries: m, the canaries each included with probability 1/2.
    num_positive_guesses: k+, the guesses "included" (top scores); the other
      r - k+ guesses are "excluded" (bottom scores).
    num_included: canaries the draw included (for reference only).
    delta: the delta of the bound.
    confidence: the level of the bound.
  """
  epsilon_lower_bound: float
  num_correct: int
  num_guesses: int
  num_canaries: int
  num_positive_guesses: int
  num_included: int
  delta: float
  confidence: float


def one_run_p_value(num_correct: int, num_guesses: int, num_canaries: int,
                    epsilon: float, delta: float) -> float:
  """Bound on P[>= v correct guesses] for an (eps, delta)-DP run.

  Steinke, Nasr & Jagielski 2023, main theorem via their Algorithm 2:
  P[B >= v] + 2 m delta max_i P[v - i <= B < v] / i with B ~ Binomial(r,
  e^eps / (1 + e^eps)), capped at 1. A small value refutes (eps, delta)-DP.

  Args:
    num_correct: v, correct guesses (0 <= v <= r).
    num_guesses: r, guesses made (1 <= r <= m).
    num_canaries: m, canaries each included with probability 1/2.
    epsilon: the hypothesised eps >= 0.
    delta: the hypothesised delta in [0, 1).

  Returns:
    The p-value, in [0, 1].

  Example:
    >>> round(one_run_p_value(10, 10, 10, 0.0, 0.0), 6)  # 2^-10
    0.000977
  """
  _check_counts(num_correct, num_guesses, num_canaries)
  _validate.non_negative(epsilon=epsilon)
  _validate.finite(epsilon=epsilon)
  _check_delta(delta)
  return _p_value(num_correct, num_guesses, num_canaries, float(epsilon),
                  float(delta))


def one_run_epsilon_lower_bound(num_correct: int, num_guesses: int,
                                num_canaries: int, delta: float,
                                confidence: float = 0.95) -> float:
  """The epsilon that v correct out of r guesses on m canaries proves.

  The largest eps with ``one_run_p_value(v, r, m, eps, delta) <= 1 -
  confidence`` (Steinke, Nasr & Jagielski 2023, Algorithm 2), found by
  doubling and bisection to a relative 1e-7 (the p-value at the returned
  eps is at most 1 - confidence).

  Args:
    num_correct: v, correct guesses (0 <= v <= r).
    num_guesses: r, guesses made, abstentions excluded (1 <= r <= m).
    num_canaries: m, canaries each included independently with probability
      1/2 (the delta term grows with m).
    delta: the delta of the claim under test, in [0, 1).
    confidence: the level of the bound, in (0, 1).

  Returns:
    eps >= 0 (0 when the counts give no evidence against eps = 0).

  Example:
    >>> round(one_run_epsilon_lower_bound(100, 100, 1000, 0.0), 3)
    3.493
    >>> round(one_run_epsilon_lower_bound(100, 100, 1000, 1e-5), 3)
    3.465
  """
  _check_counts(num_correct, num_guesses, num_canaries)
  _check_delta(delta)
  _validate.open_unit(confidence=confidence)
  alpha = 1.0 - float(confidence)
  v, r, m, delta = num_correct, num_guesses, num_canaries, float(delta)
  excess = lambda eps: _p_value(v, r, m, eps, delta) - alpha
  if excess(0.0) > 0:
    return 0.0
  if v == r and delta == 0:
    return _perfect_pure(r, alpha)
  # Bisection keeping excess(lo) <= 0, so the (lo, delta) claim is refuted
  # at the stated level. The tail P[B >= v] tends to 1 as eps grows, so
  # doubling finds a refuted hi.
  lo, hi = 0.0, 1.0
  while excess(hi) <= 0:
    lo, hi = hi, 2 * hi
  while hi - lo > _EPS_TOL * max(1.0, lo):
    mid = (lo + hi) / 2
    if excess(mid) <= 0:
      lo = mid
    else:
      hi = mid
  return lo


def one_run_audit(key: jax.Array,
                  scores_fn: Callable[[jax.Array, jax.Array], jax.Array], *,
                  num_canaries: int, num_guesses: int, delta: float,
                  num_positive_guesses: int | None = None,
                  confidence: float = 0.95) -> OneRunResult:
  """Audits one run: random canary inclusion, guesses from scores, the bound.

  Draws S_i uniformly from {-1, +1} for m canaries, runs ``scores_fn`` once,
  guesses "included" for the k+ highest scores and "excluded" for the
  r - k+ lowest, abstains on the rest, and converts the correct count into
  ``one_run_epsilon_lower_bound`` (Steinke, Nasr & Jagielski 2023, Alg. 1).
  Ties are broken by canary index, which does not depend on S.

  Args:
    key: a PRNG key; the audit is a pure function of it (the inclusion draw
      and the run's key come from it).
    scores_fn: ``(key, included: bool[m]) -> float[m]``, one training run
      with canary i present iff ``included[i]``, and a membership score per
      canary (higher means more likely included).
    num_canaries: m >= 1.
    num_guesses: r, 1 <= r <= m.
    delta: the delta of the claim under test, in [0, 1).
    num_positive_guesses: k+ in [0, r]; default ceil(r / 2).
    confidence: the level of the bound, in (0, 1).

  Returns:
    A ``OneRunResult``.

  Example:
    >>> def scores_fn(key, included):  # a perfect membership oracle
    ...   return included.astype(jnp.float32)
    >>> r = one_run_audit(jax.random.key(0), scores_fn, num_canaries=1000,
    ...                   num_guesses=100, delta=1e-5)
    >>> r.num_correct, round(r.epsilon_lower_bound, 3)
    (100, 3.465)
  """
  key = _keys.stream(_validate.key(key), _STREAM)
  _validate.positive_int(num_canaries=num_canaries)
  _validate.positive_int(num_guesses=num_guesses)
  if num_guesses > num_canaries:
    raise ValueError(f'Expected num_guesses={num_guesses} <= '
                     f'num_canaries={num_canaries}.')
  if num_positive_guesses is None:
    num_positive_guesses = (num_guesses + 1) // 2
  _validate.non_negative_int(num_positive_guesses=num_positive_guesses)
  if num_positive_guesses > num_guesses:
    raise ValueError(f'Expected num_positive_guesses={num_positive_guesses} '
                     f'<= num_guesses={num_guesses}.')
  _check_delta(delta)
  _validate.open_unit(confidence=confidence)
  sign_key, run_key = jax.random.split(key)
  included = jax.random.bernoulli(sign_key, 0.5, (num_canaries,))
  scores = np.asarray(scores_fn(run_key, included), np.float64)
  included = np.asarray(included)
  if scores.shape != (num_canaries,):
    raise ValueError(f'Expected scores_fn to return shape ({num_canaries},), '
                     f'got scores of shape {scores.shape}.')
  if not np.all(np.isfinite(scores)):
    bad = int(np.sum(~np.isfinite(scores)))
    raise ValueError(f'Expected finite scores; got {bad} NaN or inf scores.')
  v = count_correct(scores, included, num_positive_guesses,
                    num_guesses - num_positive_guesses)
  bound = one_run_epsilon_lower_bound(v, num_guesses, num_canaries, delta,
                                      confidence)
  return OneRunResult(bound, v, num_guesses, num_canaries,
                      num_positive_guesses, int(included.sum()),
                      float(delta), float(confidence))


def count_correct(scores: np.ndarray, included: np.ndarray,
                  num_positive: int, num_negative: int) -> int:
  """Correct guesses of "top k+ included, bottom k- excluded".

  Example:
    >>> count_correct(np.array([3., 1., 2., 0.]),
    ...               np.array([True, False, False, True]), 1, 1)
    1
  """
  scores, included = np.asarray(scores), np.asarray(included, bool)
  if num_positive + num_negative > len(scores):
    raise ValueError(f'Expected num_positive + num_negative = '
                     f'{num_positive + num_negative} <= {len(scores)} '
                     'scores.')
  order = np.argsort(-scores, kind='stable')  # descending, ties by index
  top = order[:num_positive]
  bottom = order[len(order) - num_negative:]
  return int(included[top].sum() + (~included[bottom]).sum())


def _p_value(v: int, r: int, m: int, eps: float, delta: float) -> float:
  q = float(special.expit(eps))  # accuracy of eps-DP randomized response
  tail = float(stats.binom.sf(v - 1, r, q)) if v > 0 else 1.0
  if delta == 0 or v == 0:
    return min(tail, 1.0)
  # P[v - i <= B < v] for i = 1..v, as a running sum of the pmf (exact
  # where a difference of tails would cancel).
  window = np.cumsum(stats.binom.pmf(np.arange(v - 1, -1, -1), r, q))
  worst = float(np.max(window / np.arange(1, v + 1)))
  return min(tail + 2.0 * m * delta * worst, 1.0)


def _perfect_pure(r: int, alpha: float) -> float:
  """Closed form for v = r, delta = 0: q^r = alpha, eps = logit(q)."""
  log_q = math.log(alpha) / r
  return float(log_q - math.log(-math.expm1(log_q)))


def _check_counts(v: int, r: int, m: int) -> None:
  _validate.non_negative_int(num_correct=v)
  _validate.positive_int(num_guesses=r)
  _validate.positive_int(num_canaries=m)
  if v > r:
    raise ValueError(f'Expected num_correct={v} <= num_guesses={r}.')
  if r > m:
    raise ValueError(f'Expected num_guesses={r} <= num_canaries={m}.')


def _check_delta(delta: float) -> None:
  if not 0 <= delta < 1:
    raise ValueError(f'Expected delta={delta} in [0, 1).')
